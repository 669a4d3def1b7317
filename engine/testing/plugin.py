"""The loopwright pytest plugin (registered as a ``pytest11`` entry point).

- fixture ``scripted_run``: ``scripted_run(agent, script, "user text")`` runs ``agent`` on a
  ScriptedModel of ``script``, checks the run invariants and returns the RunResult;
- a transition-coverage report at the end of the session, for every machine the session ran:
  ``loopwright coverage: 19/21 rows of 'agent' (missing: reason->reason (...), ...)``;
- ``--loopwright-cov-fail-under=N``: fail the session if any machine's row coverage is below N%.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ..agent import Agent
from ..machine import LoopMachine, Row, coverage
from ..result import RunResult
from ..runner import Runner
from .invariants import assert_run_invariants, scripted


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopwright")
    group.addoption(
        "--loopwright-cov-fail-under",
        type=float,
        default=None,
        metavar="N",
        help="fail if the rows taken of any loopwright machine the session ran are below N percent",
    )


def pytest_configure(config: pytest.Config) -> None:
    coverage.reset()
    coverage.enabled = True


def _label(row: Row) -> str:
    return f"{row.source}->{row.dest} ({row.label})"


def coverage_lines() -> list[tuple[LoopMachine, int, int, list[Row]]]:
    """(machine, rows taken, rows in all, rows missing) for every machine the session ran."""
    report = []
    for machine in coverage.machines.values():
        missing = coverage.missing(machine)
        report.append((machine, len(machine.rows) - len(missing), len(machine.rows), missing))
    return report


def format_coverage() -> list[str]:
    lines = []
    for machine, taken, total, missing in coverage_lines():
        tail = f" (missing: {', '.join(_label(r) for r in missing)})" if missing else ""
        lines.append(f"loopwright coverage: {taken}/{total} rows of {machine.name!r}{tail}")
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    threshold = session.config.getoption("--loopwright-cov-fail-under")
    if threshold is None:
        return
    if any(total and 100.0 * taken / total < threshold for _, taken, total, _ in coverage_lines()):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = format_coverage()
    if not lines:
        return
    threshold = config.getoption("--loopwright-cov-fail-under")
    terminalreporter.section("loopwright")
    for line in lines:
        terminalreporter.write_line(line)
    if threshold is not None:
        below = [m.name for m, taken, total, _ in coverage_lines() if total and 100.0 * taken / total < threshold]
        if below:
            terminalreporter.write_line(f"FAIL: row coverage below {threshold:g}% for {below}", red=True)


@pytest.fixture
def scripted_run() -> Callable[..., RunResult]:
    """Run an agent on a scripted model, check the invariants, return the result."""

    def run(agent: Agent, script: Sequence[Any], text: str = "hello", *, check: bool = True, **kw: Any) -> RunResult:
        copy = scripted(agent, script)
        result = Runner(copy).run_sync(text, **kw)
        if check:
            assert_run_invariants(result, copy)
        return result

    return run
