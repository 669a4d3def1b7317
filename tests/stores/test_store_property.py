"""Crash-resume equivalence: for an arbitrary scripted agent tree (parallel calls, calls that
wait for approval, transfers between agents) and an arbitrary checkpoint k, a run killed at k
and resumed from the store ends as the uninterrupted run does: outcome, output, trace, history,
and the multiset of tool executions (each call answered exactly once; only the calls in flight
at the crash may run twice). On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import ToolCall
from loopwright.data.result import RunResult
from tests.store_app import CRASH_AFTER, EXECUTED, tree_agent
from tests.store_fakes import drive

_ids = itertools.count()


@st.composite
def scripts(draw: st.DrawFn) -> list[Any]:
    """Steps of 1-3 parallel calls (work, or pay: over 100 waits for approval) or a transfer
    between the root and its helper; then a text."""
    script: list[Any] = []
    active = "root"
    for s in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 3)) == 0:
            active = "helper" if active == "root" else "root"
            script.append([ToolCall(id=f"t{s}", name="transfer_to_agent", args={"agent_name": active, "task": "on"})])
            continue
        step = []
        for c in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                step.append(ToolCall(id=f"s{s}c{c}", name="work", args={"label": f"s{s}c{c}"}))
            else:
                amount = draw(st.sampled_from([50, 500]))
                step.append(ToolCall(id=f"s{s}c{c}", name="pay", args={"amount": amount + s * 10 + c}))
        script.append(step)
    script.append("all done")
    return script


def answered_once(result: RunResult) -> bool:
    answers = Counter(p.call_id for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result")
    calls = Counter(p.id for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_call")
    return answers == calls and set(answers.values()) == {1}


def check_equivalent(script: list[Any], store: Any, at: float, in_flight: str | None) -> None:
    """Crash at the checkpoint ``at`` of the way through the uninterrupted run's checkpoints
    (and, with ``in_flight``, also right after that call did its work)."""
    EXECUTED.clear()
    CRASH_AFTER.clear()
    run_id = f"p{next(_ids)}"
    saves = [0]
    plain, crashes = asyncio.run(
        drive(lambda: tree_agent(script), store, crash_at=None, run_id=run_id + "-plain", counter=saves)
    )
    assert crashes == 0
    k = 1 + int(at * (saves[0] - 1))
    expected = Counter(label for label, _ in EXECUTED)
    EXECUTED.clear()
    if in_flight is not None:
        CRASH_AFTER.add(in_flight)
    result, crashes = asyncio.run(drive(lambda: tree_agent(script), store, crash_at=k, run_id=run_id))
    assert crashes >= 1
    got = Counter(label for label, _ in EXECUTED)
    assert result.outcome == plain.outcome and result.output == plain.output
    assert result.trace == plain.trace
    assert result.messages == plain.messages
    assert answered_once(result)
    twice = got - expected
    assert not (expected - got), "a call was lost"
    if in_flight is None or crashes == 0 or in_flight not in expected:
        assert got == expected, (k, crashes, got, expected)
    else:  # the calls in flight at the crash (its step's, running at once) may have run twice
        step = next(s for s in script[:-1] if any(c.args.get("label") == in_flight for c in s))
        assert set(twice) <= {c.args.get("label", f"pay {c.args.get('amount')}") for c in step}
        assert set(twice.values()) <= {1}


def _in_flight(script: list[Any], pick: int | None) -> str | None:
    labels = [c.args["label"] for step in script[:-1] for c in step if c.name == "work"]  # type: ignore[union-attr]
    return labels[pick % len(labels)] if labels and pick is not None else None


SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@SETTINGS
@given(script=scripts(), at=st.floats(0, 1), pick=st.none() | st.integers(0, 20))
def test_crash_resume_equivalence_on_sqlite(tmp_path: Path, script: list[Any], at: float, pick: int | None) -> None:
    check_equivalent(script, tmp_path / "runs.db", at, _in_flight(script, pick))


@settings(SETTINGS, max_examples=15)
@given(script=scripts(), at=st.floats(0, 1), pick=st.none() | st.integers(0, 20))
def test_crash_resume_equivalence_on_postgres(pg_url: str, script: list[Any], at: float, pick: int | None) -> None:
    from loopwright.stores.postgres import PostgresStore

    check_equivalent(script, lambda: PostgresStore(pg_url), at, _in_flight(script, pick))
