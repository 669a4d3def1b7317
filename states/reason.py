"""reason: calls the model.

Reads ``request``, ``attempt`` and the agent's model and model callbacks; writes ``response``
(or ``model_error``), ``attempt`` and ``iteration`` (a pass's first attempt counts one).
A retry (the bounded ``reason -> reason`` row) first waits ``Limits.retry_delay(attempt)``.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from loopwright.errors import ModelError
from loopwright.events import (
    ErrorInfo,
    ErrorOccurred,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    TextDelta,
)
from loopwright.guards import has_retryable_model_error, retries_left
from loopwright.models.base import StreamDelta
from loopwright.run_state import RunContext, RunState


class CallbackError(ModelError):
    """A model callback raised or returned something it may not."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _callback(name: str, fn: Any, *args: Any) -> Any:
    try:
        return await _maybe_await(fn(*args))
    except Exception as exc:
        raise CallbackError(f"the {name} callback raised {type(exc).__name__}: {exc}") from exc


async def call_model(request: ModelRequest, ctx: RunContext) -> ModelResponse:
    """Run before_model, the model (streamed when the run streams and the model can), and
    after_model. Raises ModelError (or whatever the model raised)."""
    agent = ctx.agent
    if agent.before_model is not None:
        replaced = await _callback("before_model", agent.before_model, request, ctx)
        if isinstance(replaced, ModelResponse):
            return await _after(replaced, ctx)
        if isinstance(replaced, ModelRequest):
            request = replaced
        elif replaced is not None:
            raise CallbackError(
                f"the before_model callback returned {type(replaced).__name__}; "
                "return None, a ModelRequest or a ModelResponse"
            )
    model: Any = agent.model
    stream = getattr(model, "stream", None) if ctx.stream_deltas else None
    if stream is not None:
        response: Any = None
        async for item in stream(request):
            if isinstance(item, StreamDelta):
                ctx.emit(TextDelta, text=item.text, thought=item.thought)
            else:
                response = item
        if response is None:
            raise ModelError("the model's stream ended without a final response", retryable=True)
    else:
        response = await model.complete(request)
    if not isinstance(response, ModelResponse):
        raise ModelError(
            f"model {type(model).__name__}.complete returned {type(response).__name__}, not a ModelResponse",
            retryable=False,
        )
    return await _after(response, ctx)


async def _after(response: ModelResponse, ctx: RunContext) -> ModelResponse:
    after = ctx.agent.after_model
    if after is None:
        return response
    replaced = await _callback("after_model", after, response, ctx)
    if replaced is None:
        return response
    if not isinstance(replaced, ModelResponse):
        raise CallbackError(
            f"the after_model callback returned {type(replaced).__name__}; return None or a ModelResponse"
        )
    return replaced


def error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, ModelError):
        return ErrorInfo(kind="model", message=exc.message, status=exc.status, retryable=exc.retryable)
    return ErrorInfo(kind="model", message=f"{type(exc).__name__}: {exc}", retryable=False)


async def reason(rs: RunState, ctx: RunContext) -> None:
    rs.response = None
    rs.model_error = None
    if rs.deadline_hit:
        return
    if rs.attempt > 0:
        await asyncio.sleep(rs.limits.retry_delay(rs.attempt))
    rs.attempt += 1
    if rs.attempt == 1:
        rs.iteration += 1
    request = rs.request
    if request is None:  # the table only routes here after preprocess
        raise RuntimeError("reason entered without a request; preprocess must run first")
    ctx.emit(
        ModelRequested,
        attempt=rs.attempt,
        message_count=len(request.messages),
        tool_names=tuple(t.name for t in request.tools),
    )
    try:
        response = await call_model(request, ctx)
    except Exception as exc:
        rs.model_error = error_info(exc)
        ctx.emit(ErrorOccurred, error=rs.model_error, retrying=has_retryable_model_error(rs) and retries_left(rs))
        return
    rs.response = response
    ctx.emit(ModelResponded, response=response)
