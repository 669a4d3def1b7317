"""Shared test set-up: a full run of the suite fails if any row of any built-in machine (the
core, each feature, both) never fired on that machine (the loopwright pytest plugin records the
rows taken, per machine)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester", "tests.pg_fixture"]


def _is_full_run(session: pytest.Session) -> bool:
    option = session.config.option
    selected_all = not (
        option.keyword or option.markexpr or getattr(option, "deselect", None) or getattr(option, "lf", False)
    )
    named = [a for a in session.config.args if a.rstrip("/") not in ("tests", ".")]
    return selected_all and not named and session.testsfailed == 0 and not option.collectonly


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _is_full_run(session):
        return
    from loopwright.features import BUILT_IN_MACHINES
    from loopwright.testing.coverage import coverage

    missing = [f"{name}: {row}" for name, m in BUILT_IN_MACHINES.items() for row in coverage.missing(m)]
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  {row}" for row in missing)
        message = f"loopwright row coverage: {len(missing)} row(s) of the built-in machines never fired:\n{lines}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
