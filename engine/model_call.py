"""One model call: the model callbacks around it, streaming when the run streams, and the
error it comes to (``reason`` and ``salvage`` both call the model this way)."""

from __future__ import annotations

import inspect
from typing import Any

from .context import RunContext
from .errors import ModelError
from .events import ErrorInfo, ModelRequest, ModelResponse, TextDelta
from .models.base import StreamDelta
from .observers import enter_scopes


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
    scoped = enter_scopes(ctx.model_scopes, request) if ctx.model_scopes else None
    try:
        stream = getattr(model, "stream", None) if ctx.stream_deltas else None
        if stream is not None:
            response: Any = await _streamed(stream, request, ctx)
        else:
            response = await model.complete(request)
    finally:
        if scoped is not None:
            scoped.close()
    if not isinstance(response, ModelResponse):
        raise ModelError(
            f"model {type(model).__name__}.complete returned {type(response).__name__}, not a ModelResponse",
            retryable=False,
        )
    return response if ctx.agent.after_model is None else await _after(response, ctx)


async def _streamed(stream: Any, request: ModelRequest, ctx: RunContext) -> Any:
    """A streaming model's reply: its text deltas become events, its last item is the reply."""
    response: Any = None
    async for item in stream(request):
        if isinstance(item, StreamDelta):
            ctx.emit(TextDelta, text=item.text, thought=item.thought)
        else:
            response = item
    if response is None:
        raise ModelError("the model's stream ended without a final response", retryable=True)
    return response


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
        return ErrorInfo(
            kind="model",
            message=exc.message,
            status=exc.status,
            retryable=exc.retryable,
            retry_after=getattr(exc, "retry_after", None),
        )
    return ErrorInfo(kind="model", message=f"{type(exc).__name__}: {exc}", retryable=False)
