"""A resumed run's result holds every leg's events; its clock and turn counters are capped at its agent's."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from loopwright import (
    Agent,
    Limits,
    RunContext,
    Runner,
    RunState,
    ScriptedModel,
    ToolCall,
    approve,
    tool,
)
from loopwright.cli.trace_page import write_trace_page
from loopwright.stores import SQLiteStore
from loopwright.testing import InvariantViolation, assert_run_invariants

DEADLINES: list[float | None] = []


@tool(requires_confirmation=True)
async def pay(amount: int, ctx: RunContext) -> str:
    """Pay an amount (needs approval)."""
    DEADLINES.append(ctx.run_state.deadline)
    return f"paid {amount}"


@tool
def note(text: str) -> str:
    """Write a note."""
    return "noted"


@tool(requires_confirmation=True)
async def slow_pay(amount: int) -> str:
    """Pay slowly (needs approval)."""
    await asyncio.sleep(3)
    return f"paid {amount}"


TWO_LEGS = [
    [ToolCall(id="n1", name="note", args={"text": "hi"}), ToolCall(id="c1", name="pay", args={"amount": 5})],
    "Paid.",
]


def _agent(script: list[Any], **limits: Any) -> Agent:
    return Agent(
        name="ops", tools=[pay, note, slow_pay], model=ScriptedModel(script), limits=Limits(retry_backoff_s=0, **limits)
    )


@pytest.fixture(autouse=True)
def _clear() -> None:
    DEADLINES.clear()


def _whole(events: list[Any]) -> None:
    """One run's events, all of them: from run_started, seq 1, 2, 3, ..."""
    assert events[0].type == "run_started"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


@pytest.mark.parametrize("through", ["result", "run_state"])
def test_a_resumed_result_carries_every_legs_events(through: str, tmp_path: Path) -> None:
    agent = _agent(TWO_LEGS)
    runner = Runner(agent)
    waiting = runner.run_sync("pay")
    assert_run_invariants(waiting, agent)  # a waiting run is not a failure
    first = list(waiting.events)
    done = runner.resume_sync(waiting if through == "result" else waiting.run_state, {"c1": approve()})
    assert done.outcome == "final"
    _whole(done.events)
    assert done.events[: len(first)] == first and waiting.events == first  # the suspended result is a snapshot
    assert sum(e.type == "tool_called" for e in done.events) == 2
    assert_run_invariants(done, agent)
    page = write_trace_page(done, tmp_path / "trace.html").read_text()
    assert re.search(r"tool calls</[a-z]+>\s*<[a-z]+>2<", page), "the trace page counts both calls"


def test_a_run_suspended_twice_carries_all_three_legs() -> None:
    script = [[ToolCall(id="c1", name="pay", args={"amount": 1})], [ToolCall(id="c2", name="pay", args={"amount": 2})]]
    agent = _agent([*script, "done"])
    runner = Runner(agent)
    result = runner.run_sync("pay twice")
    for call_id in ("c1", "c2"):
        result = runner.resume_sync(result, {call_id: approve()})
    assert result.outcome == "final"
    _whole(result.events)
    assert [e.type for e in result.events].count("resumed") == 2
    assert_run_invariants(result, agent)


def test_a_copy_from_json_carries_its_events_from_the_resume_and_passes_the_invariants() -> None:
    agent = _agent(TWO_LEGS)
    runner = Runner(agent)
    waiting = runner.run_sync("pay")
    saved = waiting.run_state.to_json()
    done = runner.resume_sync(RunState.from_json(saved), {"c1": approve()})
    assert done.events[0].type == "resumed" and done.events[0].seq == waiting.events[-1].seq + 1
    assert_run_invariants(done, agent)  # calls made before the resume are known from the history


def test_the_saved_state_does_not_carry_the_events() -> None:
    """Earlier legs' events stay out of the saved form: it stays as small as before."""
    script = [[ToolCall(id="c1", name="pay", args={"amount": 1})], [ToolCall(id="c2", name="pay", args={"amount": 2})]]
    runner = Runner(_agent([*script, "done"]))
    once = runner.run_sync("pay twice")
    twice = runner.resume_sync(once, {"c1": approve()})
    assert twice.outcome == "suspended" and len(twice.events) > len(once.events)
    saved = json.loads(twice.run_state.to_json())
    assert "legs" not in saved and "events" not in saved
    assert RunState.from_json(twice.run_state.to_json()).legs == ()


@pytest.mark.slow
def test_a_run_resumed_from_a_store_by_id_carries_every_leg(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = _agent(TWO_LEGS)
    waiting = Runner(agent, store=SQLiteStore(db)).run_sync("pay", run_id="r1")
    done = asyncio.run(Runner(agent, store=SQLiteStore(db)).resume("r1", {"c1": approve()}))
    assert done.outcome == "final"
    _whole(done.events)
    assert done.events[: len(waiting.events)] == waiting.events
    kept = [json.loads(e) for e in asyncio.run(SQLiteStore(db).events("r1"))]
    assert kept == [json.loads(e.model_dump_json()) for e in done.events]
    assert_run_invariants(done, agent)


def test_the_invariants_still_catch_an_unanswered_call_in_a_suspended_result() -> None:
    agent = _agent(TWO_LEGS)
    waiting = Runner(agent).run_sync("pay")
    broken = waiting.model_copy(update={"events": [e for e in waiting.events if e.type != "tool_answered"]})
    with pytest.raises(InvariantViolation, match="answered"):
        assert_run_invariants(broken, agent)


# ---------------------------------------------------------------- item 3: the clock and counters


def _edited(state: RunState, **waiting: Any) -> RunState:
    raw = json.loads(state.to_json())
    raw["features"]["waiting"].update(waiting)
    return RunState.from_json(json.dumps(raw))


def test_time_left_in_a_saved_state_is_capped_at_the_agents_timeout() -> None:
    runner = Runner(_agent([[ToolCall(id="c1", name="pay", args={"amount": 5})], "Paid."], timeout_s=1))
    waiting = runner.run_sync("pay")
    forged = _edited(waiting.run_state, time_left=1e9)
    before = time.time()
    assert runner.resume_sync(forged, {"c1": approve()}).outcome == "final"
    (deadline,) = DEADLINES
    assert deadline is not None and deadline <= before + 1 + 0.5, f"{deadline - before:.0f} s left of timeout_s=1"


def test_a_saved_state_without_a_clock_gets_the_agents_timeout() -> None:
    runner = Runner(_agent([[ToolCall(id="c1", name="pay", args={"amount": 5})], "Paid."], timeout_s=1))
    forged = _edited(runner.run_sync("pay").run_state, time_left=None)
    before = time.time()
    runner.resume_sync(forged, {"c1": approve()})
    (deadline,) = DEADLINES
    assert deadline is not None and deadline <= before + 1 + 0.5


def test_a_paused_states_deadline_is_capped_at_the_agents_timeout() -> None:
    agent = _agent([[ToolCall(id="c1", name="pay", args={"amount": 5})], "Paid."], timeout_s=1)
    handle = Runner(agent).start("pay")

    async def until_reason() -> None:
        while handle.stage != "reason":
            await handle.step()

    asyncio.run(until_reason())
    state = handle.state
    state.outcome = "paused"  # (as Runner.pause leaves it)
    raw = json.loads(state.to_json())
    raw["deadline"] = time.time() + 1e9
    before = time.time()
    result = Runner(agent).resume_sync(RunState.from_json(json.dumps(raw)))
    assert result.outcome == "suspended", result.error  # it went on to the call that waits: the clock stopped there
    left = result.run_state.features["waiting"].time_left
    assert left is not None and left <= time.time() - before + 1, f"{left:.0f} s left of timeout_s=1"


def test_the_resumed_clock_cuts_a_slow_approved_call() -> None:
    """The clock restarts before the resumed leg's first step, so the run's timer is armed:
    an approved call slower than what is left of timeout_s is cut short by it."""
    runner = Runner(_agent([[ToolCall(id="c1", name="slow_pay", args={"amount": 5})], "Paid."], timeout_s=0.5))
    waiting = runner.run_sync("pay")
    began = time.perf_counter()
    result = runner.resume_sync(waiting, {"c1": approve()})
    assert time.perf_counter() - began < 2.5, "the 3 s call ran to its end past timeout_s=0.5"
    assert result.limit == "timeout_s" or result.outcome in ("salvaged", "limit")


def test_turn_start_counters_from_a_saved_state_are_capped_at_the_runs() -> None:
    helper = Agent(name="helper", model=ScriptedModel([]), limits=Limits(max_iterations=2))
    root = Agent(name="ops", model=ScriptedModel([]), sub_agents=[helper], limits=Limits(max_iterations=5))
    runner = Runner(root)
    state = runner.new_run("hi", agent="helper")
    state.iteration = 3
    state.turn_start = {"max_iterations": 1e6}  # as if the helper's turn began long after now
    runner._own_limits(state)
    runner._cap_saved(state)
    assert state.turn_start["max_iterations"] <= state.iteration
