"""Crash-resume equivalence for workflows: a sequence holding a parallel, over scripted agents
whose calls may wait for approval, crashed at an arbitrary checkpoint of the workflow or of any
child and resumed from the store, ends as the uninterrupted run does (outcome, output, trace,
state) and every tool ran exactly as often. On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, ToolCall
from loopwright.workflows import ParallelAgent, SequentialAgent
from tests.store_app import EXECUTED, by_turn, pay, work
from tests.store_fakes import drive

_ids = itertools.count()


@st.composite
def leaf_scripts(draw: st.DrawFn, name: str) -> list[Any]:
    script: list[Any] = []
    for s in range(draw(st.integers(0, 3))):
        step = []
        for c in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                step.append(ToolCall(id=f"{name}{s}{c}", name="work", args={"label": f"{name}.s{s}c{c}"}))
            else:
                amount = draw(st.sampled_from([50, 500]))
                step.append(ToolCall(id=f"{name}{s}{c}", name="pay", args={"amount": amount + s * 10 + c}))
        script.append(step)
    script.append(f"{name} done")
    return script


def workflow(scripts: dict[str, list[Any]]) -> SequentialAgent:
    def leaf(name: str) -> Agent:
        return Agent(name=name, model=by_turn(scripts[name]), tools=[work, pay])

    return SequentialAgent(
        "flow", steps=[leaf("first"), ParallelAgent("both", branches=[leaf("left"), leaf("right")]), leaf("last")]
    )


def check_equivalent(scripts: dict[str, list[Any]], store: Any, at: float) -> None:
    EXECUTED.clear()
    run_id = f"w{next(_ids)}"
    saves = [0]
    plain, crashes = asyncio.run(
        drive(lambda: workflow(scripts), store, crash_at=None, run_id=run_id + "-plain", counter=saves)
    )
    assert crashes == 0 and plain.outcome == "final"
    expected = Counter(label for label, _ in EXECUTED)
    k = 1 + int(at * (saves[0] - 1))
    EXECUTED.clear()
    result, crashes = asyncio.run(drive(lambda: workflow(scripts), store, crash_at=k, run_id=run_id))
    assert crashes >= 1
    assert (result.outcome, result.output, result.trace) == (plain.outcome, plain.output, plain.trace)
    assert result.state == plain.state
    got = Counter(label for label, _ in EXECUTED)
    assert got == expected, (k, got, expected)  # nothing lost, nothing run twice (no call was in flight)


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    scripts=st.fixed_dictionaries({n: leaf_scripts(n) for n in ("first", "left", "right", "last")}),
    at=st.floats(0, 1),
)
def test_crash_resume_equivalence_of_a_workflow_on_sqlite(
    tmp_path: Path, scripts: dict[str, list[Any]], at: float
) -> None:
    check_equivalent(scripts, tmp_path / f"runs{next(_ids)}.db", at)


@pytest.mark.slow
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    scripts=st.fixed_dictionaries({n: leaf_scripts(n) for n in ("first", "left", "right", "last")}),
    at=st.floats(0, 1),
)
def test_crash_resume_equivalence_of_a_workflow_on_postgres(
    pg_url: str, scripts: dict[str, list[Any]], at: float
) -> None:
    from loopwright.stores.postgres import PostgresStore

    check_equivalent(scripts, lambda: PostgresStore(pg_url), at)
