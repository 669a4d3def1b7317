"""One model call: the model callbacks around it, streaming when the run streams, and the
error it comes to (``reason`` and ``salvage`` both call the model this way)."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Sequence
from typing import Any

from ..data.errors import ModelError, TokenBudgetError, redact
from ..data.events import (
    ErrorInfo,
    ErrorOccurred,
    Instruction,
    Message,
    ModelRequest,
    ModelResponse,
    ProviderPart,
    TextPart,
    ThoughtPart,
    ToolCall,
    Usage,
    new_call_id,
)
from ..data.limits import Watched, watch
from ..data.run_state import RunState
from ..data.values import ValueTooLarge
from ..data.values import storable_reply as storable_reply  # (a reply as a saved run holds it)
from ..models.scripted import ScriptedModel
from .context import RunContext
from .model_choice import current_model as current_model
from .model_choice import fallback_target as fallback_target
from .model_choice import model_name as model_name
from .model_choice import note_model as note_model
from .model_choice import priced as priced
from .model_choice import refuses_cost as refuses_cost
from .model_choice import salvage_over_cost as salvage_over_cost
from .model_choice import switch_model as switch_model
from .observers import enter_scopes
from .streamed import streamed as _streamed

_new = object.__new__


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
    after_model. Raises ModelError (or whatever the model raised): a transient error made
    retryable, a timeout (``model_timeout_s``) retryable, an untrusted reply checked.
    ``reason`` makes a call that needs none of these callbacks, scopes or streams itself
    (with :class:`ModelCall`): one coroutine fewer between the run and the model."""
    agent = ctx.agent
    if agent.before_model is not None:
        replaced = await _before(agent.before_model, request, ctx)
        if isinstance(replaced, ModelResponse):
            return await _after(replaced, ctx)
        if request is ctx.run_state.request and replaced.tools is not request.tools:  # act runs only what it offers
            ctx.tools_named, ctx.tool_names = replaced.tools, tuple([t.name for t in replaced.tools])
        request = replaced
    scoped = enter_scopes(ctx.model_scopes, request) if ctx.model_scopes else None
    rs = ctx.run_state
    model = agent.model if not rs.fallbacks else current_model(rs, ctx)
    if model is not rs.model_in_use:
        note_model(rs, model)
    stream = getattr(model, "stream", None) if ctx.stream_deltas else None
    call = model_call(model, ctx)
    try:
        response = await (model.complete(request) if stream is None else _streamed(stream, request, ctx))
    except BaseException as exc:
        call.failed(exc)
        raise
    finally:
        call.close()
        if scoped is not None:
            scoped.close()
    if agent.after_model is not None:
        return await _after(call.check(response), ctx)
    return call.received(response)


class ModelCall(Watched):
    """One model call: its time bound (``model_timeout_s``) and what its failures come to,
    kept around the awaited model by the frame that awaits it (no coroutine of its own)::

        call = model_call(model, ctx)
        try:
            response = await model.complete(request)
        except BaseException as exc:
            call.failed(exc)  # a timeout, or the model's exception, raised as what it comes to
            raise  # (the rest as they are)
        finally:
            call.close()
        response = call.received(response)
    """

    __slots__ = ("ctx", "instant", "model", "timeout")
    ctx: RunContext
    model: Any
    timeout: float | None
    instant: bool

    def failed(self, exc: BaseException) -> None:
        """Raise what the model call's ``exc`` comes to: the bound's own cancellation a
        retryable timeout, an exception as :func:`_model_error` makes it (transient ones
        retryable, known secrets redacted); return if ``exc`` goes on up as it is."""
        if isinstance(exc, asyncio.CancelledError):
            if self.expired():
                raise _timed_out(self.timeout, self.ctx) from None
        elif isinstance(exc, Exception):
            failure = _model_error(exc, self.model, self.ctx)
            if failure is not exc:
                raise failure from None

    def check(self, response: Any) -> ModelResponse:
        """A reply is a ModelResponse; one from a model the engine does not trust holds together
        (a built-in model replaying a list, and a model with ``trusted_replies``, are trusted),
        and comes back as a saved run holds it (:func:`storable_reply`), priced (:func:`priced`)."""
        if self.instant and type(response) is ModelResponse:
            return response if response.__dict__["model"] is None else priced(response, None)
        model = self.model
        if not isinstance(response, ModelResponse):
            raise ModelError(
                f"model {type(model).__name__}.complete returned {type(response).__name__}, not a ModelResponse",
                retryable=False,
            )
        if not self.instant and not getattr(model, "trusted_replies", False) and not _sound(response):
            wrong = malformed(response) or "it does not hold together"
            raise ModelError(f"model {type(model).__name__} returned a malformed reply: {wrong}", retryable=False)
        try:
            return priced(storable_reply(response), model)
        except ValueTooLarge as exc:
            raise ModelError(
                f"model {type(model).__name__} returned a malformed reply: {exc}, which a saved run could not read "
                "back",
                retryable=False,
            ) from None

    def received(self, response: Any) -> ModelResponse:
        """The reply, checked, its tool calls' ids unique in the run. The usual reply of a model
        the engine does not trust (one part, a call or a text, sound usage, no price to add, an
        id not seen) is taken here: :meth:`check`, :func:`_sound`, :func:`priced` and
        :func:`unique_call_ids` written out, one frame for the four (``storable_reply`` still
        called); any other goes through them."""
        ctx = self.ctx
        if not self.instant and type(response) is ModelResponse:
            fields = response.__dict__
            parts, usage = fields["parts"], fields["usage"]
            if type(parts) is tuple and len(parts) == 1 and type(usage) is Usage and usage.cost_usd is None:
                part = parts[0]
                kind, ident = type(part), None
                if (
                    kind is ToolCall
                    and type(ident := part.__dict__.get("id")) is str
                    and ident
                    and type(part.__dict__.get("name")) is str
                    and type(part.__dict__.get("args")) is dict
                ) or ((kind is TextPart or kind is ThoughtPart) and type(part.__dict__.get("text")) is str):
                    try:  # (_counts_sound)
                        sound = min(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                                    usage.cache_creation_tokens, usage.requests) >= 0  # fmt: skip
                    except TypeError:
                        sound = False
                    if sound and fields["model"] is None and not isinstance(getattr(self.model, "model", None), str):
                        try:
                            reply = storable_reply(response)
                        except ValueTooLarge:
                            return self.check(response)  # (it says what is wrong)
                        seen = ctx.call_ids or _ids_of(ctx)
                        if reply.parts[0] is part and (kind is not ToolCall or ident not in seen):
                            if kind is ToolCall:
                                seen.add(ident)  # type: ignore[arg-type]  # (a str: tested above)
                            return reply
                        return unique_call_ids(reply, seen)
        return unique_call_ids(self.check(response), ctx.call_ids or _ids_of(ctx))


def model_call(model: Any, ctx: RunContext) -> ModelCall:
    """The bound and error mapping for one call of ``model`` (see :class:`ModelCall`). A built-in model
    replaying a list answers at once: no bound, and its replies are not checked."""
    instant = type(model) is ScriptedModel and model.instant
    timeout = None if instant else _timeout(ctx) if ctx.run_state.deadline_hit else ctx.limits.model_timeout_s
    if timeout is None:
        call = _new(ModelCall)
        call.fired, call.shared, call.handle = False, None, None
    else:
        call = watch(timeout, ModelCall)
    call.ctx, call.model, call.timeout, call.instant = ctx, model, timeout, instant
    return call


async def _before(callback: Any, request: ModelRequest, ctx: RunContext) -> ModelRequest | ModelResponse:
    """What ``before_model`` makes of the request: the request (its own or a new one) or a reply."""
    replaced = await _callback("before_model", callback, request, ctx)
    if replaced is None:
        return request
    if isinstance(replaced, (ModelResponse, ModelRequest)):
        return replaced
    raise CallbackError(
        f"the before_model callback returned {type(replaced).__name__}; return None, a ModelRequest or a ModelResponse"
    )


def _timeout(ctx: RunContext) -> float | None:
    """``model_timeout_s``; for the salvage call, at most the time kept for it."""
    timeout = ctx.limits.model_timeout_s
    rs = ctx.run_state
    if rs.deadline_hit:
        reserve = rs.limits.salvage_reserve
        timeout = reserve if timeout is None else min(timeout, reserve)
    return timeout


def _timed_out(timeout: float | None, ctx: RunContext) -> ModelError:
    bound = "the time kept for salvage" if ctx.run_state.deadline_hit else f"model_timeout_s={timeout:g}"
    return ModelError(f"the model call timed out after {timeout:g} s ({bound})", retryable=True)


def _model_error(exc: Exception, model: Any, ctx: RunContext) -> Exception:
    """What a model's exception becomes: known secrets redacted from its message, and a
    transient one (``TRANSIENT``, or the model's ``retryable_errors``) a retryable ModelError."""
    if isinstance(exc, ModelError):
        clean = redact(exc.message, known_secrets(ctx))
        return exc if clean == exc.message else ModelError(clean, status=exc.status, retryable=exc.retryable)
    retry = isinstance(exc, getattr(model, "retryable_errors", TRANSIENT))
    text = f"{type(exc).__name__}: {exc}"
    clean = redact(text, known_secrets(ctx))
    if clean != text or retry:
        return ModelError(clean, retryable=retry)
    return exc


def known_secrets(ctx: RunContext) -> list[str]:
    """Secrets the run knows of, which must never leave it in a message: credentials supplied
    on resume, the model's (or its client's) ``api_key``, and ``ANTHROPIC_API_KEY``."""
    found = [v for v in ctx.credentials.values() if isinstance(v, str)]
    for model in ctx.agent.models:
        for holder in (model, getattr(model, "_client", None)):
            key = getattr(holder, "api_key", None)
            if isinstance(key, str):
                found.append(key)
    env = os.environ.get("ANTHROPIC_API_KEY")
    if env:
        found.append(env)
    return found


TRANSIENT: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)
"""Exceptions from a model that a retry may fix. A model chooses its own with a
``retryable_errors`` attribute (a tuple of exception types; ``()`` retries none); raising
``ModelError(retryable=...)`` always says it plainly."""

_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "requests")


def _sound(response: ModelResponse) -> bool:
    """The quick check of :func:`malformed` (which then says what is wrong)."""
    parts = response.parts
    if type(parts) is not tuple:
        return False
    for part in parts:
        if not _sound_part(part):
            return False
    usage = response.usage
    return type(usage) is Usage and _counts_sound(usage)


def _counts_sound(usage: Usage) -> bool:
    """The usage's counts are numbers >= 0 (None, a str: not sound)."""
    try:  # counts that are not numbers (None, str) fail the comparison
        return min(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_creation_tokens,
                   usage.requests) >= 0  # fmt: skip
    except TypeError:
        return False


def _sound_part(part: Any) -> bool:
    kind = type(part)
    if kind is ToolCall:
        fields = part.__dict__
        ident = fields.get("id")
        return (
            type(ident) is str and bool(ident) and type(fields.get("name")) is str and type(fields.get("args")) is dict
        )
    if kind is TextPart or kind is ThoughtPart:
        return type(part.__dict__.get("text")) is str
    return _malformed_part(part) is None  # a provider's block, or not a part of a reply at all


def malformed(response: ModelResponse) -> str | None:
    """What is wrong with a reply built without validation (``model_construct``), or None.
    Replies of models the engine does not trust are checked (a built-in ScriptedModel
    replaying a list, and a model with ``trusted_replies = True``, are not)."""
    parts = response.parts
    if type(parts) is not tuple:
        return f"parts is {type(parts).__name__}, not a tuple of TextPart, ThoughtPart, ToolCall and ProviderPart"
    for i, part in enumerate(parts):
        wrong = _malformed_part(part)
        if wrong is not None:
            return f"parts[{i}] {wrong}"
    usage = response.usage
    if type(usage) is not Usage:
        return f"usage is {type(usage).__name__}, not Usage"
    for name in _COUNTS:
        value = getattr(usage, name, None)
        if type(value) is not int or value < 0:
            return f"usage.{name} is {value!r}, not a whole number >= 0"
    return None


async def _after(response: ModelResponse, ctx: RunContext) -> ModelResponse:
    after = ctx.agent.after_model
    if after is not None:
        replaced = await _callback("after_model", after, response, ctx)
        if replaced is not None and not isinstance(replaced, ModelResponse):
            raise CallbackError(
                f"the after_model callback returned {type(replaced).__name__}; return None or a ModelResponse"
            )
        response = replaced or response
    return unique_call_ids(response, ctx.call_ids or _ids_of(ctx))


def _ids_of(ctx: RunContext) -> set[str]:
    """The run's set of call ids (``ctx.call_ids``), made on first use from the history (a
    resumed run's too); a non-empty set is returned as it is."""
    ids = ctx.call_ids
    if ids is None:
        ids = ctx.call_ids = {p.id for m in ctx.run_state.messages for p in m.parts if type(p) is ToolCall}
    return ids


def unique_call_ids(response: ModelResponse, seen: set[str] | None = None) -> ModelResponse:
    """``response`` with every tool call's id unique in the run: a call whose id an earlier call
    of this reply, or (with ``seen``, the ids of the run so far, which this adds to) of an earlier
    reply, already has gets a fresh one (``<id>_<n>``, still a valid provider id); the first call
    of an id keeps the provider's. So each call runs once and is answered once: providers have
    been seen to send one id twice in a reply, and to reuse an id of an earlier turn. The
    history keeps the ids given here, so the provider sees each call and its answer under one id."""
    if seen is None:
        seen = set()
    parts = response.parts
    if len(parts) == 1:  # the common reply: one part
        part = parts[0]
        if type(part) is not ToolCall or part.id not in seen:
            if type(part) is ToolCall:
                seen.add(part.id)
            return response
    renamed: list[Any] | None = None
    for i, part in enumerate(parts):
        if type(part) is ToolCall:
            ident = part.id
            if ident in seen:
                if renamed is None:
                    renamed = list(parts)
                ident = f"{ident}_{new_call_id().removeprefix('call_')}"
                renamed[i] = part.model_copy(update={"id": ident})
            seen.add(ident)
    return response if renamed is None else response.model_copy(update={"parts": tuple(renamed)})


def charge_failed_call(rs: RunState, exc: BaseException) -> None:
    """A model call failed: the usage of the attempts billed before it (``ModelError.usage``, e.g.
    a cut reply whose retry failed) is added to the run's."""
    spent = exc.usage if isinstance(exc, ModelError) else None
    if spent is not None:
        rs.usage = rs.usage + spent


def error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, ModelError):
        return ErrorInfo(
            kind="token_budget" if isinstance(exc, TokenBudgetError) else "model",
            message=exc.message,
            status=exc.status,
            retryable=exc.retryable,
            retry_after=getattr(exc, "retry_after", None),
            partial=getattr(exc, "partial", None),
        )
    return ErrorInfo(kind="model", message=f"{type(exc).__name__}: {exc}", retryable=False)


_PART_FIELDS: dict[type[Any], tuple[tuple[str, type[Any]], ...]] = {
    ToolCall: (("id", str), ("name", str), ("args", dict)),
    TextPart: (("text", str),),
    ThoughtPart: (("text", str),),
    ProviderPart: (("provider", str), ("kind", str), ("block", dict), ("text", str)),
}


def _malformed_part(part: Any) -> str | None:
    fields = _PART_FIELDS.get(type(part))
    if fields is None:
        return f"is a {type(part).__name__}, not a TextPart, ThoughtPart, ToolCall or ProviderPart"
    for name, want in fields:
        value = getattr(part, name, None)
        if not isinstance(value, want) or (type(part) is ToolCall and want is str and not value):
            return f"({type(part).__name__}) has {name}={value!r}"
    return None


async def side_call(
    ctx: RunContext, instructions: tuple[Instruction, ...], messages: Sequence[Message], kind: str
) -> ModelResponse | None:
    """One model call a feature makes beside the loop (a plan, an observation, a summary): the
    agent's tools are listed (so the history's calls read right) but none may be called; its
    usage is charged to the run. A failed call is an ``error_occurred`` event of ``kind`` and
    None (the feature goes on without it)."""
    tools = ctx.agent.tool_specs
    request = ModelRequest(
        instructions=instructions,
        messages=list(messages),
        tools=tools,
        tool_choice="none" if tools else None,
        settings=ctx.agent.model_settings,
    )
    try:
        response = await call_model(request, ctx)
    except Exception as exc:
        ctx.emit(ErrorOccurred, error=error_info(exc).model_copy(update={"kind": kind}))
        return None
    rs = ctx.run_state
    rs.usage = rs.usage + response.usage
    return response
