"""Hypothesis properties of the loop over arbitrary scripted model behaviour and limits: every
run ends in a terminal state, within its iteration budget, every tool call answered exactly
once, its trace a path of the table, its event seq strictly increasing."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, ModelError, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, Usage, tool
from loopwright.events import ModelRequested, StateEntered, ToolAnswered, ToolCalled, ToolResult
from loopwright.machine import DEFAULT_MACHINE, TABLE
from loopwright.result import RunResult


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(timeout_s=0.005)
async def nap(seconds: float) -> str:
    """Sleeps (times out past 5 ms)."""
    await asyncio.sleep(seconds)
    return "rested"


@tool
async def fail(reason: str) -> str:
    """Raises."""
    raise RuntimeError(reason)


TOOLS = [add, nap, fail]

good_call = st.one_of(
    st.builds(lambda a, b: ToolCall(name="add", args={"a": a, "b": b}), st.integers(-5, 5), st.integers(-5, 5)),
    st.builds(lambda s: ToolCall(name="nap", args={"seconds": s}), st.sampled_from([0.0, 0.001, 0.02])),
    st.builds(lambda r: ToolCall(name="fail", args={"reason": r}), st.text(max_size=5)),
)
bad_call = st.one_of(
    st.builds(lambda n: ToolCall(name=n, args={}), st.sampled_from(["missing", "Add", ""])),
    st.builds(lambda v: ToolCall(name="add", args={"a": v}), st.sampled_from(["x", None, [1]])),
)
reply = st.one_of(
    st.text(max_size=8).map(lambda t: ModelResponse(parts=(TextPart(text=t),), stop_reason="end_turn")),
    st.lists(st.one_of(good_call, bad_call), min_size=1, max_size=4).map(
        lambda calls: ModelResponse(
            parts=tuple(ToolCall(name=c.name, args=c.args) for c in calls),
            usage=Usage(input_tokens=10, output_tokens=5, requests=1),
        )
    ),
    st.just(ModelResponse(parts=())),  # an empty reply
    st.just(ModelResponse(parts=(TextPart(text="cut"),), stop_reason="max_tokens")),
    st.builds(lambda s: ModelError("transient", status=s), st.sampled_from([429, 500, 529])),
    st.just(ModelError("bad request", status=400, retryable=False)),
)
limits = st.builds(
    Limits,
    max_iterations=st.integers(1, 5),
    max_tool_calls=st.none() | st.integers(1, 6),
    max_total_tokens=st.none() | st.integers(10, 120),
    max_model_retries=st.integers(0, 2),
    retry_backoff_s=st.just(0.0),
    salvage=st.booleans(),
)


def run_agent(script: list[Any], limits: Limits) -> RunResult:
    agent = Agent(name="prop", model=ScriptedModel(script), tools=TOOLS, limits=limits)
    return asyncio.run(Runner(agent).run("go"))


def check_invariants(result: RunResult, limits: Limits) -> None:
    trace = result.trace
    assert trace[0] == "start" and trace[-1] in DEFAULT_MACHINE.terminals
    assert not any(s in DEFAULT_MACHINE.terminals for s in trace[:-1])
    # passes through reason (first attempts) within the budget
    first_attempts = [e for e in result.events if isinstance(e, ModelRequested) and e.attempt == 1]
    assert result.iterations <= limits.max_iterations
    assert len(first_attempts) <= limits.max_iterations + 1  # + the salvage call
    # every tool call answered exactly once, with the same id, in the history in call order
    called = [e.call_id for e in result.events if isinstance(e, ToolCalled)]
    answered = Counter(e.call_id for e in result.events if isinstance(e, ToolAnswered))
    assert len(set(called)) == len(called)
    assert answered == Counter(called)
    for i, message in enumerate(result.messages):
        calls = [p.id for p in message.parts if isinstance(p, ToolCall)]
        if calls:  # the next turn answers exactly these calls, in order
            assert i + 1 < len(result.messages), "the history ends with unanswered tool calls"
            following = result.messages[i + 1]
            assert [p.call_id for p in following.parts if isinstance(p, ToolResult)] == calls
    # the trace is a path of the table, and each step names the row that was taken
    rows = {(r.source, r.dest, r.label) for r in TABLE}
    steps = [(e.source, e.state, e.guard) for e in result.events if isinstance(e, StateEntered)]
    assert all(step in rows for step in steps), set(steps) - rows
    assert [s[1] for s in steps] == trace[1:]
    # seq strictly increases from 1
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    # tool-call budget: the crossing step completes, no step starts after
    if limits.max_tool_calls is not None and result.tool_calls > limits.max_tool_calls:
        last_step = max(len(m.parts) for m in result.messages if m.role == "assistant")
        assert result.tool_calls < limits.max_tool_calls + last_step


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(reply, max_size=8), limits=limits)
def test_every_run_ends_within_its_bounds(script: list[Any], limits: Limits) -> None:
    result = run_agent(script, limits)
    check_invariants(result, limits)
    assert result.outcome in ("final", "salvaged", "limit", "failed")
    if result.outcome == "final":
        assert result.output is not None
    if result.outcome == "limit":
        assert result.limit is not None


@settings(max_examples=40, deadline=None)
@given(script=st.lists(reply, max_size=6), limits=limits, cancel_after=st.integers(0, 12))
def test_cancellation_at_any_step_keeps_the_invariants(script: list[Any], limits: Limits, cancel_after: int) -> None:
    async def scenario() -> RunResult:
        runner = Runner(Agent(name="prop", model=ScriptedModel(script), tools=TOOLS, limits=limits))
        handle = runner.start("go")
        steps = 0
        while not handle.done:
            if steps == cancel_after:
                runner.cancel(handle.run_id)
            await handle.step()
            steps += 1
        return handle.result

    result = asyncio.run(scenario())
    check_invariants(result, limits)
    if cancel_after < len(result.trace) - 1 and result.trace[cancel_after] != "start":
        assert result.outcome == "cancelled"
