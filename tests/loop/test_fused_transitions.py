"""The quiet transition written out in ``Run.steps`` (issue 38): a row that records no limit and enters
no stop but a terminal, taken while nothing watches transitions, is taken in the step loop itself
(a bounded one charged there too, a terminal's end of the run done there) rather than by
``Run._take``. A property: for every generated run, the trace (states), the events
(all but their times) and the counters are the same with the quiet case on (nothing watching) and
off (a transition observer that does nothing: every row through ``Run._take``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopwright.loop.run as run_module
from loopwright import Agent, Limits, ModelError, Runner, ScriptedModel, ToolCall, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def boom(a: int) -> int:
    """Fail."""
    raise ValueError(f"boom {a}")


def reply(kind: str, i: int) -> Any:
    if kind == "add":
        return [ToolCall(id=f"c{i}", name="add", args={"a": i, "b": 1})]
    if kind == "two":
        return [
            ToolCall(id=f"c{i}a", name="add", args={"a": i, "b": 2}),
            ToolCall(id=f"c{i}b", name="boom", args={"a": i}),
        ]
    if kind == "unknown":
        return [ToolCall(id=f"c{i}", name="nope", args={})]
    if kind == "bad_args":
        return [ToolCall(id=f"c{i}", name="add", args={"a": "x"})]
    if kind == "error":
        return ModelError("the provider is down", retryable=False)
    return f"text {i}"


scripts = st.lists(st.sampled_from(["add", "two", "unknown", "bad_args", "error", "text"]), min_size=1, max_size=8)


def run_once(script: list[str], max_iterations: int, watched: bool) -> dict[str, Any]:
    items = [reply(kind, i) for i, kind in enumerate(script)] + ["the end"] * 12
    runner = Runner(
        Agent(name="fused", model=ScriptedModel(items), tools=[add, boom], limits=Limits(max_iterations=max_iterations))
    )
    noop = [(object(), lambda run, row: None)] if watched else []
    saved = run_module.INSTRUMENTS.transition
    run_module.INSTRUMENTS.transition = noop  # (the suite's own row coverage watches every run: off here)

    async def drive() -> Any:
        run = runner.start("go", run_id="r1")
        await run.steps(to_end=True)
        return run

    try:
        run = asyncio.run(drive())
        result = run.ended()
    finally:
        run_module.INSTRUMENTS.transition = saved
    events = [{k: v for k, v in e.model_dump().items() if k not in ("time", "duration_s")} for e in result.events]
    return {
        "trace": result.trace,
        "seq": run.state.seq,
        "messages": result.messages,
        "events": events,
        "outcome": result.outcome,
        "limit": result.limit,
        "usage": result.usage,
        "iterations": result.iterations,
        "output": result.output,
        "error": result.error,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts, st.integers(min_value=1, max_value=6))
def test_the_quiet_case_takes_the_same_rows_as_take(script: list[str], max_iterations: int) -> None:
    assert run_once(script, max_iterations, watched=False) == run_once(script, max_iterations, watched=True)


@pytest.mark.parametrize("max_iterations", [1, 3])
def test_a_long_run_ends_the_same_either_way(max_iterations: int) -> None:
    script = ["add"] * 5 + ["text"]
    quiet, watched = run_once(script, max_iterations, False), run_once(script, max_iterations, True)
    assert quiet == watched
    assert quiet["limit"] == ("max_iterations" if max_iterations < 6 else None)
