"""The two ways a model call is made come to the same: ``reason`` awaits a model that needs no
callback, scope or stream in its own frame (``model_call.ModelCall``), and ``call_model`` makes
every other call (here: a ``before_model`` callback that changes nothing). Each failure a model
can have (a transient error, a bug, its own retryable errors, a timeout, a malformed reply, a
secret in its message, call ids used twice, a cancellation from outside) ends the same way on
both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwright import Agent, Limits, ModelResponse, Runner, RunResult, TextPart, ToolCall, tool
from loopwright.data.events import Usage
from loopwright.testing import assert_run_invariants

SECRET = "sk-test-0123456789abcdef"


@tool
async def echo(x: int) -> int:
    """Returns x."""
    return x


class Model:
    """Replays ``steps``, one per call: an exception is raised, a float is slept before the
    plain answer, anything else is returned; past the steps, the plain answer."""

    api_key = SECRET

    def __init__(self, *steps: Any, retryable_errors: Any = None) -> None:
        self.steps = list(steps)
        self.calls = 0
        if retryable_errors is not None:
            self.retryable_errors = retryable_errors

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        step = self.steps.pop(0) if self.steps else None
        if isinstance(step, float):
            await asyncio.sleep(step)
            step = None
        if step is None:
            return ModelResponse(parts=(TextPart(text="ok"),))
        if isinstance(step, BaseException):
            raise step
        return step


def _call(call_id: str) -> ModelResponse:
    return ModelResponse(parts=(ToolCall(id=call_id, name="echo", args={"x": 1}),), stop_reason="tool_use")


SCENARIOS: dict[str, tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]] = {
    # name: (the model's steps, the model's options, limits)
    "transient": ((ConnectionResetError("reset"),), {}, {}),
    "a bug": ((ValueError("bug"),), {}, {}),
    "its own retryable": ((ValueError("flaky"),), {"retryable_errors": (ValueError,)}, {}),
    "none retryable": ((OSError("down"),), {"retryable_errors": ()}, {}),
    "timeout": ((1.0,), {}, {"model_timeout_s": 0.05, "max_model_retries": 0}),
    "timeout, then an answer": ((1.0,), {}, {"model_timeout_s": 0.05}),
    "malformed": ((ModelResponse.model_construct(parts=(TextPart(text="x"),), usage=None),), {}, {}),
    "negative usage": (
        (ModelResponse.model_construct(parts=(TextPart(text="x"),), usage=Usage.model_construct(input_tokens=-1)),),
        {},
        {},
    ),
    "a secret in the message": ((ValueError(f"refused key {SECRET}"),), {}, {}),
    "a secret, transient": ((ConnectionError(f"reset for {SECRET}"),), {}, {"max_model_retries": 0}),
    "an id used twice": ((_call("same"), _call("same")), {}, {}),
}


def _agent(model: Model, through_callback: bool, limits: dict[str, Any]) -> Agent:
    seen: list[int] = []

    def before_model(request: Any, ctx: Any) -> None:  # changes nothing: only makes it call_model's call
        seen.append(1)

    return Agent(
        name="m",
        model=model,
        tools=[echo],
        limits=Limits(retry_backoff_s=0, **limits),
        before_model=before_model if through_callback else None,
    )


def _outcome(result: RunResult) -> tuple[Any, ...]:
    calls = [p.id for m in result.messages for p in m.parts if isinstance(p, ToolCall)]
    error = None if result.error is None else (result.error.kind, result.error.message)
    kinds = [e.type for e in result.events if e.type != "state_entered"]
    return result.outcome, error, result.trace, len(calls), len(set(calls)), kinds


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_paths_end_the_same(name: str) -> None:
    steps, options, limits = SCENARIOS[name]
    ends = []
    for through_callback in (False, True):
        model = Model(*steps, **options)
        agent = _agent(model, through_callback, limits)
        result = Runner(agent).run_sync("go")
        assert_run_invariants(result, agent)
        assert SECRET not in result.model_dump_json() + repr(result.events)
        ends.append((_outcome(result), model.calls))
    assert ends[0] == ends[1]


def test_what_each_failure_comes_to() -> None:
    """The scenarios above mean what they say (on the plain path; the test above ties the other
    to it)."""

    def run(name: str) -> tuple[RunResult, Model]:
        steps, options, limits = SCENARIOS[name]
        model = Model(*steps, **options)
        return Runner(_agent(model, False, limits)).run_sync("go"), model

    for name, calls in (("transient", 2), ("its own retryable", 2), ("timeout, then an answer", 2)):
        result, model = run(name)
        assert result.outcome == "final" and model.calls == calls, name
    for name, words in (
        ("a bug", "ValueError: bug"),
        ("none retryable", "OSError: down"),
        ("timeout", "model_timeout_s=0.05"),
        ("malformed", "malformed reply"),
        ("negative usage", "input_tokens"),
        ("a secret in the message", "refused key"),
        ("a secret, transient", "reset for"),
    ):
        result, model = run(name)
        assert result.outcome == "failed" and result.error is not None, name
        assert words in result.error.message and model.calls == 1, (name, result.error.message)
    result, _ = run("an id used twice")
    ids = [p.id for m in result.messages for p in m.parts if isinstance(p, ToolCall)]
    assert result.outcome == "final" and len(ids) == 2 and len(set(ids)) == 2 and ids[0] == "same"


@pytest.mark.parametrize("through_callback", [False, True], ids=["plain", "call_model"])
def test_a_cancellation_from_outside_ends_the_run_cancelled_then_goes_on_up(through_callback: bool) -> None:
    model = Model(5.0)
    runner = Runner(_agent(model, through_callback, {}))

    async def scenario() -> None:
        task = asyncio.create_task(runner.run("go"))
        await asyncio.sleep(0.05)
        assert runner.active_runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert model.calls == 1 and not runner.active_runs
