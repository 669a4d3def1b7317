"""Tool retries: ``@tool(retries=N, retry_on=...)``. A tool that raises ``RetryTool`` (or gets
arguments that do not validate) is answered "fix this and call again"; a transient exception is
retried by act after a backoff; each retry is an event and is charged to ``max_tool_retries``, whose
guard stops the loop once a retry is asked past it. A hypothesis property bounds every retry."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunState,
    ScriptedModel,
    ToolCall,
    verify,
)
from loopwright.data.events import TextPart, ToolResult, ToolRetried
from loopwright.features import TOOL_RETRIES, machine_for
from loopwright.runtime.tools import RetryTool, tool

FAST = {"retry_backoff_s": 0, "max_repeated_calls": None}


def _run(tools: list[Any], script: list[Any], **limits: Any) -> Any:
    model = ScriptedModel(script)
    agent = Agent(name="a", model=model, tools=tools, limits=Limits(**{**FAST, **limits}))
    return Runner(agent).run_sync("go"), model


def _retried(result: Any) -> list[ToolRetried]:
    return [e for e in result.events if isinstance(e, ToolRetried)]


def _results(result: Any) -> list[ToolResult]:
    return [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]


def call(x: Any, id: str | None = None) -> list[ToolCall]:
    return [ToolCall(name="even", args={"x": x}, **({"id": id} if id else {}))]


def test_retry_tool_tells_the_model_what_to_fix_and_it_calls_again() -> None:
    @tool(retries=2)
    def even(x: int) -> str:
        """Take an even number."""
        if x % 2:
            raise RetryTool(f"{x} is odd: pass an even number")
        return f"took {x}"

    result, _ = _run([even], [call(3, "c1"), call(4, "c2"), "done"])
    assert result.outcome == "final"
    first, second = _results(result)
    assert first.is_error
    assert first.content == "3 is odd: pass an even number\nFix this and call even again (retry 1 of 2)."
    assert second.content == "took 4" and not second.is_error
    assert [(e.call_id, e.attempt, e.reason, e.message) for e in _retried(result)] == [
        ("c1", 1, "retry_tool", "3 is odd: pass an even number")
    ]
    assert result.run_state.features["tool_retries"].made == 1


def test_past_its_retries_in_a_row_the_model_reads_that_none_is_left() -> None:
    @tool(retries=1)
    def even(x: int) -> str:
        """Take an even number."""
        raise RetryTool("never good")

    result, _ = _run([even], [call(1), call(3), call(5), "done"])
    assert result.outcome == "final"
    contents = [r.content for r in _results(result)]
    assert contents[0].endswith("(retry 1 of 1).")
    assert contents[1] == "never good (tool 'even' was retried 1 times in a row: no retry left)"
    assert contents[2].endswith("(retry 1 of 1).")  # a result that was no retry started the count again
    assert len(_retried(result)) == 2


def test_a_transient_exception_is_retried_by_act_with_backoff_and_answered_once() -> None:
    failures = [ConnectionError("reset"), ConnectionError("reset again")]

    @tool(retries=2, retry_on=(ConnectionError,))
    def even(x: int) -> str:
        """Take an even number."""
        if failures:
            raise failures.pop(0)
        return "took it"

    began = time.perf_counter()
    result, _ = _run([even], [call(2, "c1"), "done"], retry_backoff_s=0.02)
    assert time.perf_counter() - began >= 0.06  # 0.02, then 0.04
    assert [r.content for r in _results(result)] == ["took it"]
    assert [(e.call_id, e.attempt, e.reason, e.delay_s) for e in _retried(result)] == [
        ("c1", 1, "transient", 0.02),
        ("c1", 2, "transient", 0.04),
    ]
    answered = [e for e in result.events if e.type == "tool_answered"]
    assert len(answered) == 1


def test_a_transient_exception_past_the_retries_is_the_answer() -> None:
    @tool(retries=2, retry_on=(TimeoutError,))
    def even(x: int) -> str:
        """Take an even number."""
        raise TimeoutError("upstream slow")

    result, _ = _run([even], [call(2), "done"])
    assert [r.content for r in _results(result)] == ["tool 'even' raised TimeoutError: upstream slow (tried 3 times)"]
    assert len(_retried(result)) == 2


def test_an_exception_not_listed_is_not_retried() -> None:
    @tool(retries=2, retry_on=(TimeoutError,))
    def even(x: int) -> str:
        """Take an even number."""
        raise ValueError("bad")

    result, _ = _run([even], [call(2), "done"])
    assert [r.content for r in _results(result)] == ["tool 'even' raised ValueError: bad"]
    assert _retried(result) == []


def test_arguments_that_do_not_validate_are_a_retry_the_model_can_fix() -> None:
    @tool(retries=1)
    def even(x: int) -> str:
        """Take an even number."""
        return "took it"

    result, _ = _run([even], [call("two"), call(2), "done"])
    first = _results(result)[0]
    assert first.is_error and str(first.content).startswith("invalid arguments for tool 'even': x:")
    assert str(first.content).endswith("Fix this and call even again (retry 1 of 1).")
    assert [e.reason for e in _retried(result)] == ["arguments"]


def test_a_tool_without_retries_is_as_before() -> None:
    @tool
    def even(x: int) -> str:
        """Take an even number."""
        raise RetryTool("odd")

    result, _ = _run([even], [call("two"), call(2), "done"])
    first, second = (r.content for r in _results(result))
    assert str(first).startswith("invalid arguments for tool 'even'") and "Fix this" not in str(first)
    assert second == "odd (tool 'even' takes no retries)"
    assert _retried(result) == []
    assert TOOL_RETRIES not in machine_for(Agent(name="a", model=ScriptedModel([]), tools=[even])).extensions


def test_past_max_tool_retries_the_run_stops_going_round() -> None:
    @tool(retries=5)
    def even(x: int) -> str:
        """Take an even number."""
        raise RetryTool("odd")

    result, _ = _run([even], [call(1), call(3), call(5), "best effort"], max_tool_retries=2)
    assert result.outcome == "salvaged" and result.limit == "max_tool_retries"
    last = _results(result)[-1]
    assert last.content == "odd (the run's tool-retry budget is spent (max_tool_retries=2); the run stops here)"
    assert len(_retried(result)) == 2
    off, _ = _run([even], [call(1), "never"], max_tool_retries=0, salvage=False)
    assert off.outcome == "limit" and off.limit == "max_tool_retries"


def test_the_slice_is_saved_with_the_run() -> None:
    @tool(retries=2, requires_confirmation=lambda args: args["x"] > 100)
    def even(x: int) -> str:
        """Take an even number."""
        if x % 2:
            raise RetryTool("odd")
        return "ok"

    result, _ = _run([even], [call(1), call(102), "done"])
    assert result.outcome == "suspended"
    back = RunState.from_json(result.run_state.to_json())
    r = back.features["tool_retries"]
    assert (r.made, r.streak) == (1, {"even": 1})


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"retries": -1}, "retries must be a whole number >= 0"),
        ({"retries": 1.5}, "retries must be a whole number >= 0"),
        ({"retry_on": (TimeoutError,)}, "needs retries=N"),
        ({"retries": 1, "retry_on": (int,)}, "retry_on takes exception classes"),
        ({"retries": 1, "retry_on": (RetryTool,)}, "retry_on takes exception classes"),
    ],
)
def test_bad_retry_options_are_one_line(options: dict[str, Any], said: str) -> None:
    def even(x: int) -> str:
        """Take an even number."""
        return "ok"

    with pytest.raises(ConfigurationError, match=said):
        tool(**options)(even)


def test_the_machine_has_the_budget_drawn_and_verified() -> None:
    @tool(retries=1)
    def even(x: int) -> str:
        """Take an even number."""
        return "ok"

    machine = machine_for(Agent(name="a", model=ScriptedModel([]), tools=[even]))
    assert TOOL_RETRIES in machine.extensions and "max_tool_retries" in machine.budgets
    row = next(r for r in machine.rows if r.source == "decide" and r.dest == "preprocess")
    assert "within_tool_retry_budget" in row.guard_names
    assert verify(machine).ok


# ------------------------------------------------------------------ the property

behaviour = st.sampled_from(["ok", "retry", "transient", "boom"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    retries=st.integers(0, 3),
    cap=st.integers(0, 4),
    behaviours=st.lists(behaviour, max_size=16),
    bad_args=st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_retries_are_bounded_and_every_call_is_answered_once(
    retries: int, cap: int, behaviours: list[str], bad_args: list[bool]
) -> None:
    todo = list(behaviours)

    def even(x: int) -> str:
        """Take a number."""
        what = todo.pop(0) if todo else "ok"
        if what == "retry":
            raise RetryTool("again")
        if what == "transient":
            raise ConnectionError("reset")
        if what == "boom":
            raise ValueError("boom")
        return "ok"

    made = tool(retries=retries, retry_on=(ConnectionError,) if retries else ())(even)
    asked = iter(bad_args)

    def reply(request: ModelRequest) -> ModelResponse:
        bad = next(asked, None)
        if bad is None:
            return ModelResponse(parts=(TextPart(text="done"),))
        return ModelResponse(parts=(ToolCall(name="even", args={"x": "nope" if bad else 1}),), stop_reason="tool_use")

    limits = Limits(retry_backoff_s=0, max_repeated_calls=None, max_tool_retries=cap, max_iterations=20)
    result = Runner(Agent(name="a", model=ScriptedModel(reply), tools=[made], limits=limits)).run_sync("go")
    retried = _retried(result)
    assert len(retried) <= cap
    if retries == 0:
        assert retried == []
    for call_id in {e.call_id for e in retried}:
        assert sum(1 for e in retried if e.call_id == call_id and e.reason == "transient") <= min(retries, cap)
    by_model = {e.call_id for e in retried if e.reason != "transient"}
    streak = 0
    for answered in _results(result):
        streak = streak + 1 if answered.call_id in by_model else 0
        assert streak <= min(retries, cap)
    calls = [p.id for m in result.messages if m.role == "assistant" for p in m.parts if isinstance(p, ToolCall)]
    answers = [r.call_id for r in _results(result)]
    assert sorted(calls) == sorted(answers) and len(set(answers)) == len(answers)
    events = [e.call_id for e in result.events if e.type == "tool_answered"]
    assert sorted(events) == sorted(calls)
