"""One model call: the model callbacks around it, streaming when the run streams, and the
error it comes to (``reason`` and ``salvage`` both call the model this way)."""

from __future__ import annotations

import inspect
from typing import Any

from .context import RunContext
from .errors import ModelError
from .events import ErrorInfo, ModelRequest, ModelResponse, TextDelta, ToolCall, new_call_id
from .limits import Expired, within
from .models.base import StreamDelta
from .models.scripted import ScriptedModel


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
    timeout = None if _instant(model) else ctx.limits.model_timeout_s
    try:
        if stream is not None:
            response = await within(timeout, _streamed(stream, request, ctx))
        elif timeout is None:
            response = await model.complete(request)
        else:
            response = await within(timeout, model.complete(request))
    except Expired:
        raise ModelError(
            f"the model call timed out after {timeout:g} s (model_timeout_s={timeout:g})", retryable=True
        ) from None
    if not isinstance(response, ModelResponse):
        raise ModelError(
            f"model {type(model).__name__}.complete returned {type(response).__name__}, not a ModelResponse",
            retryable=False,
        )
    return await _after(response, ctx)


def _instant(model: Any) -> bool:
    """A built-in model that answers without waiting (a ScriptedModel replaying a list)."""
    return type(model) is ScriptedModel and getattr(model, "_function", None) is None


async def _streamed(stream: Any, request: ModelRequest, ctx: RunContext) -> Any:
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
    if after is not None:
        replaced = await _callback("after_model", after, response, ctx)
        if replaced is not None and not isinstance(replaced, ModelResponse):
            raise CallbackError(
                f"the after_model callback returned {type(replaced).__name__}; return None or a ModelResponse"
            )
        response = replaced or response
    if len(response.parts) > 1:
        response = unique_call_ids(response)
    return response


def unique_call_ids(response: ModelResponse) -> ModelResponse:
    """``response`` with every tool call's id unique within it: the first call of an id keeps
    the provider's id; a later call with the same id gets a fresh one (``<id>_<n>``, still a
    valid provider id), so each call runs once and is answered once (providers have been seen
    to send one id twice in a reply). The history keeps the ids given here, so the provider
    sees each call and its answer under one id."""
    ids = [p.id for p in response.parts if type(p) is ToolCall]
    if len(ids) == len(set(ids)):
        return response
    seen: set[str] = set()
    parts: list[Any] = []
    for part in response.parts:
        if type(part) is ToolCall:
            if part.id in seen:
                fresh = f"{part.id}_{new_call_id().removeprefix('call_')}"
                part = part.model_copy(update={"id": fresh})
            seen.add(part.id)
        parts.append(part)
    return response.model_copy(update={"parts": tuple(parts)})


def error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, ModelError):
        return ErrorInfo(kind="model", message=exc.message, status=exc.status, retryable=exc.retryable)
    return ErrorInfo(kind="model", message=f"{type(exc).__name__}: {exc}", retryable=False)
