"""The runner end to end: answers, tools, budgets, retries, salvage, cancellation, streaming."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelError,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
    tool,
)
from loopwright.data.events import ErrorOccurred, LimitReached, RunFinished, StateEntered, ToolAnswered
from tests.helpers import add, agent, run, types


def test_text_reply_is_final() -> None:
    result = Runner(agent(["hello"])).run_sync("hi")
    assert result.outcome == "final"
    assert result.output == "hello"
    assert result.trace == ["start", "preprocess", "reason", "postprocess", "decide", "done"]
    assert result.iterations == 1
    assert result.error is None
    assert types(result.events)[0] == "run_started" and types(result.events)[-1] == "run_finished"


def test_tool_round_trip_answers_in_call_order() -> None:
    calls = [ToolCall(name="slow", args={"seconds": 0.05}), ToolCall(name="add", args={"a": 2, "b": 3})]
    result = Runner(agent([calls, "five"])).run_sync("go")
    assert result.outcome == "final" and result.output == "five"
    answer = result.messages[2]
    assert answer.role == "user"
    assert [p.call_id for p in answer.parts if isinstance(p, ToolResult)] == [c.id for c in calls]
    assert [p.content for p in answer.parts if isinstance(p, ToolResult)] == ["slept 0.05", 5]
    # the faster call answered first in the events, the history keeps the model's order
    answered = [e.call_id for e in result.events if isinstance(e, ToolAnswered)]
    assert answered == [calls[1].id, calls[0].id]


def test_parallel_tool_calls_run_concurrently() -> None:
    calls = [ToolCall(name="slow", args={"seconds": 0.2}) for _ in range(5)]
    started = time.perf_counter()
    result = Runner(agent([calls, "done"])).run_sync("go")
    elapsed = time.perf_counter() - started
    assert result.tool_calls == 5
    assert elapsed < 0.6, f"5 calls of 0.2 s took {elapsed:.2f} s: they did not run concurrently"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCall(name="nope", args={}), "unknown tool 'nope'; available tools: add, slow, boom"),
        (
            ToolCall(name="add", args={"a": "x", "b": 1}),
            "invalid arguments for tool 'add': a: Input should be a valid integer, unable to parse string as an "
            "integer (got 'x')",
        ),
        (ToolCall(name="add", args={"a": 1}), "invalid arguments for tool 'add': b: Field required"),
        (ToolCall(name="add", args={"a": 1, "b": 2, "c": 3}), "invalid arguments for tool 'add': c: Extra inputs"),
        (ToolCall(name="boom", args={"message": "kaput"}), "tool 'boom' raised ValueError: kaput"),
    ],
)
def test_tool_failures_become_error_results_the_model_sees(call: ToolCall, expected: str) -> None:
    result = Runner(agent([[call], "recovered"])).run_sync("go")
    assert result.outcome == "final"
    (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
    assert answer.is_error and answer.call_id == call.id
    assert isinstance(answer.content, str) and answer.content.startswith(expected)


def test_tool_timeout() -> None:
    script = [[ToolCall(name="slow", args={"seconds": 5})], "ok"]
    result = Runner(agent(script, tool_timeout_s=0.05)).run_sync("go")
    (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
    assert answer.is_error and answer.content == "tool 'slow' timed out after 0.05 s"
    assert result.outcome == "final"


def test_a_tool_timeout_is_armed_when_the_tool_first_suspends_and_counts_from_its_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A quick tool that ends in its first step pays for no watch (it could not be cancelled
    anyway); one that suspends is bounded, its time counted from the call's start: 0.15 s of
    blocking work before its first await leave it 0.05 s of a 0.2 s timeout, not 0.2 s."""
    import loopwright.runtime.calls

    armed: list[float] = []
    real_watch = loopwright.runtime.calls.watch

    def counting_watch(seconds: float) -> Any:
        armed.append(seconds)
        return real_watch(seconds)

    monkeypatch.setattr(loopwright.runtime.calls, "watch", counting_watch)

    @tool
    async def quick() -> str:
        """Answers at once."""
        return "now"

    @tool
    async def busy_then_waits() -> str:
        """Works without awaiting, then waits."""
        time.sleep(0.15)  # noqa: ASYNC251 (work that holds the loop, on purpose)
        await asyncio.sleep(5)
        return "late"

    quick_run = Runner(agent([[ToolCall(name="quick")], "ok"], tools=[quick], tool_timeout_s=0.2)).run_sync("go")
    assert quick_run.messages[2].parts[0].content == "now" and armed == []

    started = time.perf_counter()
    script = [[ToolCall(name="busy_then_waits")], "ok"]
    result = Runner(agent(script, tools=[busy_then_waits], tool_timeout_s=0.2)).run_sync("go")
    took = time.perf_counter() - started
    (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
    assert answer.content == "tool 'busy_then_waits' timed out after 0.2 s"
    assert len(armed) == 1 and armed[0] < 0.06
    assert took < 0.3  # 0.15 s of work and what was left of the timeout (not a fresh 0.2 s)


def test_a_suspended_tool_gets_what_the_task_sends_and_throws() -> None:
    """The rest of a tool whose first step was taken by hand is driven like ``await``: results
    of what it awaits come back to it, and a cancellation is thrown into it (it may clean up)."""
    cleaned: list[str] = []

    @tool
    async def waits_twice() -> str:
        """Waits twice, then answers."""
        await asyncio.sleep(0)
        got = await asyncio.wait_for(asyncio.sleep(0.01, result="slept"), 1)
        return got

    @tool
    async def cleans_up() -> str:
        """Waits long; cleans up when cancelled."""
        try:
            await asyncio.sleep(5)
        finally:
            cleaned.append("yes")
        return "late"

    result = Runner(agent([[ToolCall(name="waits_twice")], "ok"], tools=[waits_twice], tool_timeout_s=5)).run_sync("go")
    assert result.messages[2].parts[0].content == "slept"
    script = [[ToolCall(name="cleans_up")], "ok"]
    timed = Runner(agent(script, tools=[cleans_up], tool_timeout_s=0.05)).run_sync("go")
    assert timed.messages[2].parts[0].content == "tool 'cleans_up' timed out after 0.05 s" and cleaned == ["yes"]


def test_tool_own_timeout_wins_and_blocking_tools_run_in_a_thread() -> None:
    @tool(blocking=True, timeout_s=0.05)
    def sleepy() -> str:
        """Blocks."""
        time.sleep(0.3)
        return "late"

    async def scenario() -> float:
        started = time.perf_counter()
        result = await Runner(agent([[ToolCall(name="sleepy")], "ok"], tools=[sleepy], tool_timeout_s=10)).run("go")
        (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
        assert (
            answer.content
            == "tool 'sleepy' timed out after 0.05 s; it may still complete (its thread cannot be stopped)"
        )
        return time.perf_counter() - started

    assert run(scenario()) < 0.29  # the thread was left behind (its late result is logged)


def test_max_iterations_salvages_with_a_tool_less_call() -> None:
    loop = [[ToolCall(name="add", args={"a": 1, "b": 1})]] * 3
    model = ScriptedModel([*loop, "best guess: 2"])
    a = Agent(name="t", model=model, tools=[add], limits=Limits(max_iterations=3))
    result = Runner(a).run_sync("go")
    assert result.outcome == "salvaged" and result.output == "best guess: 2"
    assert result.limit == "max_iterations" and result.iterations == 3
    assert result.trace[-3:] == ["decide", "salvage", "done"]
    salvage_request = model.requests[-1]
    assert salvage_request.tool_choice == "none"
    assert "run out of steps (max_iterations=3)" in salvage_request.messages[-1].text
    (limit,) = [e for e in result.events if isinstance(e, LimitReached)]
    assert (limit.limit, limit.value, limit.used) == ("max_iterations", 3, 3)


def test_salvage_off_ends_with_limit() -> None:
    loop = [[ToolCall(name="add", args={"a": 1, "b": 1})]] * 2
    result = Runner(agent(loop, max_iterations=2, salvage=False)).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_iterations" and result.output is None
    assert result.trace[-2:] == ["decide", "done"]


def test_salvage_call_failing_keeps_the_error() -> None:
    script = [[ToolCall(name="add", args={"a": 1, "b": 1})], ModelError("overloaded", status=529)]
    result = Runner(agent(script, max_iterations=1)).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_iterations"
    assert result.error is not None and result.error.kind == "salvage" and result.error.message == "overloaded"


def test_salvage_drops_tool_calls_from_the_reply() -> None:
    call = ToolCall(name="add", args={"a": 1, "b": 1})
    reply = ModelResponse(parts=(TextPart(text="partial"), ToolCall(name="add", args={"a": 2, "b": 2})))
    result = Runner(agent([[call], reply], max_iterations=1)).run_sync("go")
    assert result.outcome == "salvaged" and result.output == "partial"
    assert result.messages[-1].parts == (TextPart(text="partial"),)


def test_max_tool_calls() -> None:
    calls = [ToolCall(name="add", args={"a": 1, "b": i}) for i in range(3)]
    result = Runner(agent([calls, calls, "never"], max_tool_calls=2, salvage=False)).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_tool_calls"
    assert result.tool_calls == 2  # the third call of the step is answered "not run: tool-call budget spent"


def test_max_total_tokens_counts_every_kind() -> None:
    usage = Usage(input_tokens=50, output_tokens=20, cache_read_tokens=20, cache_creation_tokens=10, requests=1)
    reply = ModelResponse(parts=(ToolCall(name="add", args={"a": 1, "b": 1}),), usage=usage)
    result = Runner(agent([reply, reply, "x"], max_total_tokens=150, salvage=False)).run_sync("go")
    assert result.usage.total_tokens == 200
    assert result.outcome == "limit" and result.limit == "max_total_tokens"


def test_timeout_during_a_model_call_ends_with_the_limit() -> None:
    async def hang(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(10)
        raise AssertionError("unreachable")

    a = Agent(name="t", model=ScriptedModel(hang), limits=Limits(timeout_s=0.1))
    started = time.perf_counter()
    result = Runner(a).run_sync("go")
    assert time.perf_counter() - started < 1
    assert result.outcome == "limit" and result.limit == "timeout_s"
    # the salvage call hangs too: it is cut when the time kept for it (the salvage reserve) runs out
    assert result.trace[-3:] == ["decide", "salvage", "done"]


def test_timeout_during_tools_answers_every_call() -> None:
    calls = [ToolCall(name="slow", args={"seconds": 5}), ToolCall(name="add", args={"a": 1, "b": 2})]
    result = Runner(agent([calls, "x"], timeout_s=0.1)).run_sync("go")
    answers = {e.call_id: e for e in result.events if isinstance(e, ToolAnswered)}
    assert set(answers) == {c.id for c in calls}
    assert answers[calls[0].id].content == "tool 'slow' did not finish: the run's time budget (timeout_s) ran out"
    assert answers[calls[1].id].content == 3
    assert result.outcome == "salvaged" and result.limit == "timeout_s"  # the salvage call answers "x"


def test_retryable_model_error_takes_the_bounded_retry_edge() -> None:
    script = [ModelError("rate limited", status=429), ModelError("overloaded", status=529), "finally"]
    result = Runner(agent(script, max_model_retries=2)).run_sync("go")
    assert result.outcome == "final" and result.output == "finally"
    assert result.trace[:5] == ["start", "preprocess", "reason", "reason", "reason"]
    assert result.iterations == 1
    errors = [e for e in result.events if isinstance(e, ErrorOccurred)]
    assert [(e.error.status, e.error.retryable) for e in errors] == [(429, True), (529, True)]


def test_retries_exhausted_fail_with_the_error_kept() -> None:
    script = [ModelError("overloaded", status=529)] * 3
    result = Runner(agent(script, max_model_retries=2)).run_sync("go")
    assert result.outcome == "failed"
    assert result.error is not None and result.error.message == "overloaded" and result.error.status == 529
    assert result.trace.count("reason") == 3


def test_retry_waits_with_backoff() -> None:
    script = [ModelError("busy", status=503), "ok"]
    a = Agent(name="t", model=ScriptedModel(script), limits=Limits(retry_backoff_s=0.1))
    started = time.perf_counter()
    assert Runner(a).run_sync("go").outcome == "final"
    assert time.perf_counter() - started >= 0.1


def test_non_retryable_model_error_fails_at_once() -> None:
    result = Runner(agent([ModelError("bad request", status=400, retryable=False)])).run_sync("go")
    assert result.outcome == "failed" and result.trace[-2:] == ["reason", "failed"]
    assert result.error is not None and result.error.status == 400


def test_script_running_out_is_a_clear_failure() -> None:
    result = Runner(agent([[ToolCall(name="add", args={"a": 1, "b": 1})]])).run_sync("go")
    assert result.outcome == "failed"
    assert result.error is not None
    assert "ran out of script: it was asked for reply 2 but holds 1" in result.error.message


def test_model_returning_the_wrong_type_fails_clearly() -> None:
    class Wrong:
        async def complete(self, request: ModelRequest) -> object:
            return "just a string"

    result = Runner(Agent(name="t", model=Wrong())).run_sync("go")  # type: ignore[arg-type]
    assert result.outcome == "failed"
    assert result.error is not None and "returned str, not a ModelResponse" in result.error.message


def test_runner_cancel_interrupts_a_tool_and_keeps_what_was_done() -> None:
    async def scenario() -> None:
        runner = Runner(agent([[ToolCall(name="slow", args={"seconds": 10})], "never"]))
        task = asyncio.create_task(runner.run("go", run_id="r1"))
        await asyncio.sleep(0.05)
        assert runner.active_runs == ["r1"]
        assert runner.cancel("r1") is True
        result = await task
        assert result.outcome == "cancelled"
        assert result.trace[-2:] == ["act", "cancelled"]
        (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
        assert answer.is_error and answer.content == "tool 'slow' did not finish: the run was cancelled"
        assert runner.cancel("r1") is False and runner.active_runs == []

    run(scenario())


def test_cancelling_the_task_ends_the_run_then_propagates() -> None:
    async def scenario() -> None:
        seen = []
        runner = Runner(agent([[ToolCall(name="slow", args={"seconds": 10})], "never"]))
        handle = runner.start("go", sink=seen.append)
        task = asyncio.create_task(handle.run_to_end())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert handle.done and handle.state.outcome == "cancelled"
        assert isinstance(seen[-1], RunFinished) and seen[-1].outcome == "cancelled"

    run(scenario())


def test_stream_yields_events_as_they_happen() -> None:
    async def scenario() -> None:
        runner = Runner(agent([[ToolCall(name="slow", args={"seconds": 0.05})], "done"]))
        stream = runner.stream("go")
        seen = []
        async for event in stream:
            seen.append(event)
        assert seen == stream.result.events
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        assert stream.result.outcome == "final"

    run(scenario())


def test_leaving_a_stream_early_cancels_the_run() -> None:
    async def scenario() -> None:
        runner = Runner(agent([[ToolCall(name="slow", args={"seconds": 10})], "never"]))
        stream = runner.stream("go", run_id="s1")
        iterator = stream.__aiter__()
        async for event in iterator:
            if event.type == "tool_called":
                break
        await iterator.aclose()  # type: ignore[attr-defined]
        assert runner.active_runs == []
        assert stream.run.state.outcome == "cancelled"

    run(scenario())


def test_step_api_drives_a_run_by_hand() -> None:
    async def scenario() -> None:
        handle = Runner(agent([[ToolCall(name="add", args={"a": 1, "b": 2})], "three"])).start("go")
        taken = []
        while not handle.done:
            row = await handle.step()
            assert row is not None
            taken.append((row.source, row.dest, row.label))
        assert taken[:4] == [
            ("start", "preprocess", "else"),
            ("preprocess", "reason", "else"),
            ("reason", "postprocess", "has_response"),
            ("postprocess", "act", "has_tool_calls"),
        ]
        assert await handle.step() is None
        assert handle.result.output == "three"

    run(scenario())


@pytest.mark.parametrize("stage", ["preprocess", "reason", "postprocess", "act", "decide", "salvage"])
def test_every_working_stage_can_be_cancelled(stage: str) -> None:
    async def scenario() -> None:
        script = [[ToolCall(name="add", args={"a": 1, "b": 2})], "salvaged"]
        runner = Runner(agent(script, max_iterations=1))
        handle = runner.start("go")
        while handle.stage != stage:
            await handle.step()
        runner.cancel(handle.run_id)
        row = await handle.step()
        assert row is not None and (row.source, row.dest, row.label) == (stage, "cancelled", "cancel_requested")
        assert handle.result.outcome == "cancelled"

    run(scenario())


def test_run_state_round_trips_through_json_mid_run() -> None:
    async def scenario() -> None:
        handle = Runner(agent([[ToolCall(name="add", args={"a": 1, "b": 2})], "three"])).start("go")
        while handle.stage != "decide":
            await handle.step()
        state = handle.state
        loaded = type(state).from_json(state.to_json())
        assert loaded is not state
        not_saved = {"limits", "turn_limits", "request", "model_in_use"}  # the agents' budgets, what is rebuilt
        for name in set(state.__slots__) - not_saved:  # type: ignore[attr-defined]
            assert getattr(loaded, name) == getattr(state, name), name
        assert loaded.limits == type(state.limits)() and loaded.request is None

    run(scenario())


def test_instruction_placeholders_fill_from_session_state() -> None:
    model = ScriptedModel(["ok"])
    a = Agent(
        name="t", model=model, instruction="Help {user}. Plan: {plan?}. Braces: {{x}}", static_instruction="Be brief."
    )
    assert Runner(a).run_sync("go", state={"user": "Ada"}).outcome == "final"
    request = model.requests[0]
    assert [(i.text, i.cache) for i in request.instructions] == [
        ("Be brief.", True),
        ("Help Ada. Plan: . Braces: {x}", False),
    ]


def test_missing_placeholder_key_fails_naming_it() -> None:
    a = Agent(name="t", model=ScriptedModel(["never"]), instruction="Help {user}.")
    result = Runner(a).run_sync("go", state={"other": 1})
    assert result.outcome == "failed" and result.trace[-2:] == ["preprocess", "failed"]
    assert result.error is not None
    assert result.error.message == (
        "agent 't': the instruction's placeholder {user} names session state key 'user', which is not set "
        "(keys set: other); pass state={'user': ...} to run(), set it from a tool via ctx.state, or write "
        "{user?} if it may be missing"
    )


def test_callable_instruction_and_ctx_tools_share_session_state() -> None:
    @tool
    def remember(fact: str, ctx: object) -> str:
        """Remember a fact."""
        ctx.state["fact"] = fact  # type: ignore[attr-defined]
        return "noted"

    model = ScriptedModel([[ToolCall(name="remember", args={"fact": "sky is blue"})], "ok"])
    a = Agent(name="t", model=model, tools=[remember], instruction=lambda ctx: f"Known: {ctx.state.get('fact')}")
    result = Runner(a).run_sync("go")
    assert [r.instructions[-1].text for r in model.requests] == ["Known: None", "Known: sky is blue"]
    assert result.state == {"fact": "sky is blue"}
    assert "ctx" not in remember.spec.input_schema["properties"]


def test_model_callbacks_replace_request_and_response() -> None:
    model = ScriptedModel(["original"])

    def before(request: ModelRequest, ctx: object) -> ModelRequest:
        return request.model_copy(update={"settings": {"temperature": 0}})

    async def after(response: ModelResponse, ctx: object) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=response.text.upper()),))

    a = Agent(name="t", model=model, before_model=before, after_model=after)
    assert Runner(a).run_sync("go").output == "ORIGINAL"
    assert model.requests[0].settings == {"temperature": 0}


def test_before_model_can_answer_without_calling_the_model() -> None:
    model = ScriptedModel([])
    cached = ModelResponse(parts=(TextPart(text="from cache"),))
    a = Agent(name="t", model=model, before_model=lambda request, ctx: cached)
    assert Runner(a).run_sync("go").output == "from cache"
    assert model.requests == []


def test_a_raising_model_callback_fails_the_run_naming_it() -> None:
    def before(request: ModelRequest, ctx: object) -> None:
        raise RuntimeError("guardrail down")

    result = Runner(Agent(name="t", model=ScriptedModel(["x"]), before_model=before)).run_sync("go")
    assert result.outcome == "failed"
    assert (
        result.error is not None
        and result.error.message == "the before_model callback raised RuntimeError: guardrail down"
    )


def test_tool_callbacks() -> None:
    def before(call: ToolCall, ctx: object) -> object:
        return {"cached": True} if call.args.get("a") == 0 else None

    def after(call: ToolCall, result: ToolResult, ctx: object) -> ToolResult | None:
        if result.content == 3:
            return result.model_copy(update={"content": "three"})
        return None

    calls = [ToolCall(name="add", args={"a": 0, "b": 1}), ToolCall(name="add", args={"a": 1, "b": 2})]
    a = Agent(name="t", model=ScriptedModel([calls, "ok"]), tools=[add], before_tool=before, after_tool=after)
    result = Runner(a).run_sync("go")
    assert [e.content for e in result.events if isinstance(e, ToolAnswered)] == [{"cached": True}, "three"]


def test_a_raising_tool_callback_becomes_an_error_result() -> None:
    def before(call: ToolCall, ctx: object) -> None:
        raise PermissionError("not allowed")

    a = Agent(
        name="t",
        model=ScriptedModel([[ToolCall(name="add", args={"a": 1, "b": 1})], "ok"]),
        tools=[add],
        before_tool=before,
    )
    result = Runner(a).run_sync("go")
    (answer,) = [e for e in result.events if isinstance(e, ToolAnswered)]
    assert answer.is_error and answer.content == "the before_tool callback raised PermissionError: not allowed"


def test_max_tokens_reply_is_continued_not_truncated() -> None:
    first = ModelResponse(
        parts=(TextPart(text="The answer is"),), stop_reason="max_tokens", usage=Usage(output_tokens=5)
    )
    model = ScriptedModel([first, ModelResponse(parts=(TextPart(text=" 42."),), stop_reason="end_turn")])
    result = Runner(Agent(name="t", model=model)).run_sync("go")
    assert result.outcome == "final" and result.output == "The answer is 42."
    assert model.requests[1].messages[-1].role == "assistant"  # the model continues its own turn
    (note,) = [e for e in result.events if isinstance(e, ErrorOccurred)]
    assert note.error.kind == "max_tokens" and note.error.retryable


def test_transition_events_name_the_row() -> None:
    result = Runner(agent(["hi"])).run_sync("go")
    entered = [(e.source, e.state, e.guard) for e in result.events if isinstance(e, StateEntered)]
    assert entered[-1] == ("decide", "done", "is_final_response")


def test_run_sync_inside_a_loop_is_a_clear_error() -> None:
    async def scenario() -> None:
        with pytest.raises(ConfigurationError, match=r"use `await runner\.run"):
            Runner(agent(["x"])).run_sync("go")

    run(scenario())


def test_concurrent_runs_share_one_machine_and_stay_apart() -> None:
    async def scenario() -> None:
        async def reply(request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(0.01)
            return ModelResponse(parts=(TextPart(text=request.messages[0].text.upper()),))

        runner = Runner(Agent(name="t", model=ScriptedModel(reply)))
        results = await asyncio.gather(*(runner.run(f"run {i}") for i in range(50)))
        assert [r.output for r in results] == [f"RUN {i}" for i in range(50)]
        assert len({r.run_id for r in results}) == 50

    run(scenario())


def test_duplicate_run_id_is_refused() -> None:
    runner = Runner(agent(["x"]))
    runner.start("go", run_id="same")
    with pytest.raises(ConfigurationError, match="already running"):
        runner.start("go", run_id="same")


def test_cancel_from_outside_any_event_loop() -> None:
    runner = Runner(agent([[ToolCall(name="add", args={"a": 1, "b": 2})], "three"]))
    handle = runner.start("go")
    asyncio.run(handle.step())
    assert runner.cancel(handle.run_id) is True  # no running loop here: must not raise
    while not handle.done:
        asyncio.run(handle.step())
    assert handle.result.outcome == "cancelled"
