"""Hardening: transient exceptions from custom models are retried; malformed replies from
models the engine does not trust are refused at the boundary; Usage refuses negative counts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall
from loopwright.data.events import Usage
from loopwright.testing import assert_run_invariants


class Flaky:
    """Raises the given exceptions, one per call, then answers."""

    def __init__(self, *errors: BaseException, retryable_errors: Any = None) -> None:
        self.errors = list(errors)
        self.calls = 0
        if retryable_errors is not None:
            self.retryable_errors = retryable_errors

    async def complete(self, request: Any) -> ModelResponse:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return ModelResponse(parts=(TextPart(text="ok"),), stop_reason="end_turn")


def _run(model: Any, **limits: Any) -> Any:
    agent = Agent(name="m", model=model, instruction="T.", limits=Limits(retry_backoff_s=0, **limits))
    result = Runner(agent).run_sync("go")
    assert_run_invariants(result, agent)
    return result


@pytest.mark.parametrize(
    "error", [ConnectionResetError("reset"), TimeoutError("slow"), OSError("network down"), ConnectionError("x")]
)
def test_transient_exceptions_are_retried(error: BaseException) -> None:
    model = Flaky(error)
    result = _run(model)
    assert result.outcome == "final" and model.calls == 2


def test_other_exceptions_are_not_retried() -> None:
    model = Flaky(ValueError("bug"))
    result = _run(model)
    assert result.outcome == "failed" and model.calls == 1


def test_a_model_chooses_which_exceptions_are_retried() -> None:
    model = Flaky(ValueError("flaky"), retryable_errors=(ValueError,))
    assert _run(model).outcome == "final" and model.calls == 2
    model = Flaky(OSError("fatal"), retryable_errors=())
    assert _run(model).outcome == "failed" and model.calls == 1


class Returns:
    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def complete(self, request: Any) -> Any:
        return self.reply


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (ModelResponse.model_construct(parts=None), "parts"),
        (ModelResponse.model_construct(parts=(TextPart(text="x"),), usage=None, stop_reason="end_turn"), "usage"),
        (ModelResponse.model_construct(parts=("text",), usage=Usage(), stop_reason="end_turn"), "parts"),
        (
            ModelResponse.model_construct(
                parts=(TextPart(text="x"),), usage=Usage.model_construct(input_tokens=-50), stop_reason="end_turn"
            ),
            "input_tokens",
        ),
        (
            ModelResponse.model_construct(
                parts=(ToolCall.model_construct(id=None, name="x", args={}),), usage=Usage(), stop_reason="tool_use"
            ),
            "id",
        ),
    ],
    ids=["parts None", "usage None", "a str part", "negative usage", "call id None"],
)
def test_malformed_replies_are_refused_at_the_boundary(reply: Any, words: str) -> None:
    result = _run(Returns(reply))
    assert result.outcome == "failed" and result.error is not None
    assert "malformed reply" in result.error.message and words in result.error.message


def test_usage_refuses_negative_counts() -> None:
    with pytest.raises(ValidationError):
        Usage(input_tokens=-1)


def test_scripted_models_stay_on_the_fast_path() -> None:
    """A ScriptedModel's replies are built (validated) by the test itself: not checked again."""
    reply = ModelResponse(parts=(TextPart(text="fine"),), stop_reason="end_turn")
    result = asyncio.run(Runner(Agent(name="s", model=ScriptedModel([reply]), instruction="T.")).run("go"))
    assert result.output == "fine"
