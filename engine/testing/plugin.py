"""The loopwright pytest plugin (registered as a ``pytest11`` entry point).

- fixture ``scripted_run``: ``scripted_run(agent, script, "user text")`` runs ``agent`` on a
  ScriptedModel of ``script``, checks the run invariants and returns the RunResult;
- a transition-coverage report at the end of the session, for every machine the session ran:
  ``loopwright coverage: 19/21 rows of 'agent' (missing: reason->reason (...), ...)``;
- ``--loopwright-cov-fail-under=N``: fail the session if any machine's row coverage is below N%.

A session started inside another one's test (``pytest.main`` in a test, ``pytester``, an eval
runner) counts and reports its own coverage: the outer session's stays installed and whole (it
also counts the nested session's runs, which its test made).

pytest loads this module in every session of every project that installs loopwright, so it
imports nothing of the engine until a hook needs it: coverage is installed as an observer when
the session's first test runs, and a session that collects only (``pytest --co``) or runs no
loopwright code pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

_installed: list[tuple[pytest.Config, Any]] = []
"""The sessions watching runs, outermost first: each one's config and its row coverage."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopwright")
    group.addoption(
        "--loopwright-cov-fail-under",
        type=float,
        default=None,
        metavar="N",
        help="fail if the rows taken of any loopwright machine the session ran are below N percent",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Install row coverage before the first test runs (not on collect-only): the outermost
    session the shared :data:`~loopwright.testing.coverage.coverage`, started afresh; a nested
    session one of its own, so the outer session's is neither reset nor removed."""
    if session.config.option.collectonly:
        return
    from loopwright.runtime.observers import instrument
    from loopwright.testing.coverage import RowCoverage, coverage

    if _installed:
        mine = RowCoverage()
    else:
        mine = coverage
        coverage.reset()
    instrument(mine)
    _installed.append((session.config, mine))


def pytest_unconfigure(config: pytest.Config) -> None:
    for n, (owner, observer) in enumerate(_installed):
        if owner is config:
            from loopwright.runtime.observers import uninstrument

            uninstrument(observer)
            del _installed[n]
            return


def _coverage(config: pytest.Config | None) -> Any:
    """The coverage ``config``'s session installed (None: the outermost session's)."""
    for owner, observer in _installed:
        if config is None or owner is config:
            return observer
    return None


def _label(row: Any) -> str:
    return f"{row.source}->{row.dest} ({row.label})"


def coverage_lines(config: pytest.Config | None = None) -> list[tuple[Any, int, int, list[Any]]]:
    """(machine, rows taken, rows in all, rows missing) for every machine the session ran
    (``config``'s session; None: the outermost)."""
    coverage = _coverage(config)
    if coverage is None:
        return []
    report = []
    for machine in coverage.machines.values():
        missing = coverage.missing(machine)
        report.append((machine, len(machine.rows) - len(missing), len(machine.rows), missing))
    return report


_MOST = 12
"""Machines the report lists at the most (a property test may compose hundreds)."""


def format_coverage(config: pytest.Config | None = None) -> list[str]:
    lines: list[str] = []
    seen: set[str] = set()
    report = coverage_lines(config)
    for machine, taken, total, missing in report:
        if machine.name in seen or len(lines) == _MOST:
            continue
        seen.add(machine.name)
        tail = f" (missing: {', '.join(_label(r) for r in missing)})" if missing else ""
        lines.append(f"loopwright coverage: {taken}/{total} rows of {machine.name!r}{tail}")
    if len(report) > len(lines):
        lines.append(f"loopwright coverage: {len(report) - len(lines)} more machines (same names or past {_MOST})")
    return lines


def _below(threshold: float, config: pytest.Config) -> list[str]:
    return [m.name for m, taken, total, _ in coverage_lines(config) if total and 100.0 * taken / total < threshold]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    threshold = session.config.getoption("--loopwright-cov-fail-under")
    if threshold is not None and _below(threshold, session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = format_coverage(config)
    if not lines:
        return
    threshold = config.getoption("--loopwright-cov-fail-under")
    terminalreporter.section("loopwright")
    for line in lines:
        terminalreporter.write_line(line)
    if threshold is not None and (below := _below(threshold, config)):
        terminalreporter.write_line(f"FAIL: row coverage below {threshold:g}% for {below}", red=True)


@pytest.fixture
def scripted_run() -> Callable[..., Any]:
    """Run an agent on a scripted model, check the invariants, return the result."""
    from loopwright.loop.runner import Runner
    from loopwright.testing.invariants import assert_run_invariants, scripted

    def run(agent: Any, script: Sequence[Any], text: str = "hello", *, check: bool = True, **kw: Any) -> Any:
        copy = scripted(agent, script)
        result = Runner(copy).run_sync(text, **kw)
        if check:
            assert_run_invariants(result, copy)
        return result

    return run
