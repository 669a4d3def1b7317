"""Loop detection without a model: the same tool call over and over is nudged, then salvaged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import (
    Agent,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    ToolCall,
    tool,
)
from loopwright.data.events import ToolAnswered, ToolResult
from loopwright.features import BUILT_IN_MACHINES, LOOP_DETECTION, machine_for
from loopwright.table.machine import CORE
from loopwright.testing import assert_run_invariants

RAN: list[str] = []


@tool
def search(query: str) -> str:
    """Search the web."""
    RAN.append(query)
    return f"no results for {query!r}"


@tool
def flaky(query: str) -> str:
    """A tool that always fails."""
    RAN.append(query)
    raise ConnectionError("upstream down")


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def same(query: str = "weather lisbon", name: str = "search") -> list[ToolCall]:
    return [ToolCall(name=name, args={"query": query})]


def forever(request: ModelRequest) -> ModelResponse:
    """A model stuck in a loop: it calls the same tool with the same arguments every time
    (asked for a tool-less answer, it says what it has)."""
    if request.tool_choice == "none":
        return ModelResponse(parts=(), stop_reason="end_turn")
    return ModelResponse(parts=(ToolCall(name="search", args={"query": "weather lisbon"}),), stop_reason="tool_use")


def make(model: Any, **limits: Any) -> Agent:
    return Agent(name="looper", model=model, tools=[search, flaky], limits=Limits(retry_backoff_s=0, **limits))


def results(result: RunResult) -> list[ToolResult]:
    return [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]


def test_an_agent_with_tools_has_loop_detection_by_default() -> None:
    agent = make(ScriptedModel([]))
    assert agent.limits.max_repeated_calls == 3
    assert machine_for(agent) is BUILT_IN_MACHINES["loop_detection"]
    assert "loop_detection" in machine_for(agent).features
    assert machine_for(make(ScriptedModel([]), max_repeated_calls=None)) is CORE
    assert machine_for(Agent(name="chat", model=ScriptedModel([]))) is CORE  # no tools, nothing to repeat


def test_a_model_that_calls_the_same_tool_for_ever_is_stopped_within_the_configured_count() -> None:
    result = Runner(make(ScriptedModel(forever))).run_sync("weather?")
    assert result.outcome == "salvaged" and result.limit == "max_repeated_calls"
    assert RAN == ["weather lisbon"] * 2  # the 3rd identical call is the nudge, the 4th ends the loop
    assert result.iterations == 4  # not max_iterations=10
    nudge, stopped = results(result)[2:]
    assert nudge.is_error and nudge.content.startswith("not run: this is call 3 in a row of search(")  # type: ignore[union-attr]
    assert "The same call once more ends the run." in nudge.content  # type: ignore[operator]
    assert stopped.is_error and "called 4 times in a row" in stopped.content  # type: ignore[operator]
    kinds = [e.error.kind for e in result.events if e.type == "error_occurred"]
    assert kinds == ["repeated_calls", "repeated_calls"]
    limit = next(e for e in result.events if e.type == "limit_reached")
    assert (limit.limit, limit.value, limit.used) == ("max_repeated_calls", 3, 4)
    assert "repeats of the same tool call (max_repeated_calls=3)" in result.messages[-2].text  # salvage's prompt
    assert_run_invariants(result, make(ScriptedModel(forever)))


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_cap_is_limits_max_repeated_calls(n: int) -> None:
    result = Runner(make(ScriptedModel(forever), max_repeated_calls=n, max_iterations=20)).run_sync("weather?")
    assert result.limit == "max_repeated_calls" and len(RAN) == n - 1 and result.iterations == n + 1


def test_the_nudge_works_when_the_model_listens() -> None:
    script = [same(), same(), same(), same("weather lisbon today"), "24 degrees in Lisbon."]
    result = Runner(make(ScriptedModel(script))).run_sync("weather?")
    assert result.outcome == "final" and result.output == "24 degrees in Lisbon." and result.limit is None
    assert RAN == ["weather lisbon", "weather lisbon", "weather lisbon today"]


def test_the_same_failing_call_repeated_is_caught_too() -> None:
    script = [same(name="flaky")] * 4 + ["It is down."]
    result = Runner(make(ScriptedModel(script))).run_sync("weather?")
    assert result.limit == "max_repeated_calls" and result.outcome == "salvaged"
    assert RAN == ["weather lisbon"] * 2
    assert [r.content for r in results(result)][:2] == ["tool 'flaky' raised ConnectionError: upstream down"] * 2


def test_other_arguments_or_another_tool_start_a_new_streak() -> None:
    script = [same("a"), same("a"), same("b"), same("b"), same("a"), same("a"), same("a", "flaky"), "done"]
    result = Runner(make(ScriptedModel(script))).run_sync("go")
    assert result.outcome == "final" and not any(r.content.startswith("not run") for r in results(result))  # type: ignore[union-attr]


def test_identical_calls_side_by_side_in_one_reply_are_not_a_loop() -> None:
    script = [same() * 3, same("other"), "done"]
    result = Runner(make(ScriptedModel(script))).run_sync("go")
    assert result.outcome == "final" and RAN == ["weather lisbon"] * 3 + ["other"]


def test_a_repeated_group_of_calls_is_caught() -> None:
    pair = [*same("a"), *same("b")]
    script = [[c.model_copy(update={"id": f"{c.id}-{i}"}) for c in pair] for i in range(4)] + ["salvaged"]
    result = Runner(make(ScriptedModel(script))).run_sync("go")
    assert result.limit == "max_repeated_calls" and sorted(RAN) == ["a", "a", "b", "b"]  # sync tools run in threads
    nudged = [r for r in results(result) if str(r.content).startswith("not run: this is call 3")]
    assert [r.call_id for r in nudged] == [c.id for c in result.messages[5].parts]  # every call of the reply


def test_without_salvage_the_run_ends_with_the_limit_named() -> None:
    result = Runner(make(ScriptedModel(forever), salvage=False)).run_sync("go")
    assert (
        result.outcome == "limit" and result.limit == "max_repeated_calls" and result.trace[-2:] == ["decide", "done"]
    )


def test_off_the_loop_runs_to_max_iterations_as_before() -> None:
    result = Runner(make(ScriptedModel(forever), max_repeated_calls=None, max_iterations=6)).run_sync("go")
    assert result.limit == "max_iterations" and len(RAN) == 6


def test_bad_limit_is_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="max_repeated_calls"):
        Limits(max_repeated_calls=1)


def test_the_streak_is_saved_with_the_run_and_holds_across_a_resume_from_json() -> None:
    agent = make(ScriptedModel(forever))
    runner = Runner(agent)
    run = runner.start("go")

    async def until_second_call() -> None:
        while len(RAN) < 2:
            await run.step()

    import asyncio

    asyncio.run(until_second_call())
    saved = RunState.from_json(run.state.to_json())
    assert saved.features["loop_detection"].streak == 2
    assert saved.features["loop_detection"].at == 3  # the second reply's place in the history


def test_the_feature_adds_a_guard_and_a_budget_only() -> None:
    machine = BUILT_IN_MACHINES["loop_detection"]
    assert machine.states == CORE.states and len(machine.rows) == len(CORE.rows)
    assert "max_repeated_calls" in machine.budgets and LOOP_DETECTION.gate is not None
    (row,) = [r for r in machine.rows if (r.source, r.dest) == ("decide", "preprocess")]
    assert row.guard_names[0] == "not_repeating_calls"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=14),
    st.integers(min_value=2, max_value=5),
)
def test_no_call_runs_more_than_cap_minus_one_times_in_a_row(queries: list[str], cap: int) -> None:
    RAN.clear()
    agent = make(ScriptedModel([same(q) for q in queries] + ["done"] * 2), max_repeated_calls=cap, max_iterations=20)
    result = Runner(agent).run_sync("go")
    assert_run_invariants(result, agent)
    ran = [e.content for e in result.events if isinstance(e, ToolAnswered) and not e.is_error]
    streak, longest, last = 0, 0, None
    for content in ran:
        streak = streak + 1 if content == last else 1
        last, longest = content, max(longest, streak)
    assert longest <= cap - 1
    runs = [q for q in queries]
    stuck = any(runs[i : i + cap + 1] == [runs[i]] * (cap + 1) for i in range(len(runs)))
    assert (result.limit == "max_repeated_calls") == stuck
