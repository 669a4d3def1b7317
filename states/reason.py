"""reason: calls the model.

Reads ``request``, ``attempt`` and the agent's model and model callbacks; writes ``response``
(or ``model_error``, and ``next_model`` when a fallback model could take over), ``attempt`` and
``iteration`` (a pass's first attempt counts one). A retry (the bounded ``reason -> reason [...
retries_left]`` row) first waits ``Limits.retry_delay(attempt)``, or the failed call's
``retry_after`` (the provider's ``Retry-After``) when that is longer. After the fallback row
(``reason -> reason [has_failed_model & fallback_left]``) the agent's next model is called at
once, with retries of its own, in the same pass.
"""

from __future__ import annotations

import asyncio

from loopwright.data.events import ErrorInfo, ErrorOccurred, History, ModelRequested, ModelResponded, Usage
from loopwright.data.parts import USAGE_COUNTS, ZERO_USAGE, usage_counts
from loopwright.data.run_state import RunState
from loopwright.models.http_errors import MAX_RETRY_AFTER_S
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import (
    call_model,
    charge_failed_call,
    current_model,
    error_info,
    fallback_target,
    model_call,
    model_name,
    note_model,
    refuses_cost,
    switch_model,
)


async def reason(rs: RunState, ctx: RunContext) -> None:  # noqa: C901, PLR0912 (the hot path: the usage kept as counts written out)
    last, rs.response = rs.response, None  # (the last step's reply: a cost budget's estimate of this call)
    failed, rs.model_error = rs.model_error, None
    if rs.deadline_hit:
        return
    if rs.attempt > 0:  # the bounded reason -> reason rows: a retry, or the next model
        await _again(rs, ctx, failed)
    else:
        rs.attempt = 1
        rs.iteration += 1
    request = rs.request
    if request is None:  # the table only routes here after preprocess
        raise RuntimeError("reason entered without a request; preprocess must run first")
    if (ctx.up is not None and ctx.up.refuses(rs, ctx, last)) or (  # a nested run: the runs above must have room
        rs.limits.max_cost_usd is not None and refuses_cost(rs, ctx, request, last)  # it would overspend: not sent
    ):
        _not_made(rs)
        return
    tools = request.tools
    if ctx.tools_named is not tools:  # the agent's tools change rarely: their names are kept, not rebuilt
        ctx.tools_named, ctx.tool_names = tools, tuple([t.name for t in tools])
    messages = request.messages  # (a History's length without its __len__ frame)
    ctx.record(ModelRequested, rs.attempt, messages.n if type(messages) is History else len(messages), ctx.tool_names)
    try:
        agent = ctx.agent
        if (  # the model alone (no model callbacks, scopes or stream), awaited in this frame (model_call.ModelCall)
            agent.before_model is None and agent.after_model is None and not ctx.model_scopes and not ctx.stream_deltas
        ):
            model = agent.model if not rs.fallbacks else current_model(rs, ctx)
            if model is not rs.model_in_use:
                note_model(rs, model)
            call = model_call(model, ctx)
            try:
                response = await model.complete(request)
            except BaseException as exc:
                call.failed(exc)
                raise
            finally:
                call.close()
            response = call.received(response)
        else:
            response = await call_model(request, ctx)
    except Exception as exc:
        _failed(rs, ctx, exc)
        return
    rs.response = response
    reply = response.__dict__  # the log keeps the reply's values, not the reply (events.reply_values)
    details = reply["details"] or None
    named = reply["model"] or (model_name(rs.model_in_use) if ctx.agent.fallback_models else None)  # who answered
    usage = reply["usage"]
    if usage is not ZERO_USAGE and type(usage) is Usage:  # (parts.usage_counts, without its frame when built)
        names = usage.__pydantic_fields_set__
        usage = USAGE_COUNTS(usage.__dict__) + (names,) if type(names) is not set else usage_counts(usage)  # noqa: RUF005
    ctx.record(ModelResponded, reply["parts"], usage, reply["stop_reason"], named, details)


def _not_made(rs: RunState) -> None:
    """The call was refused before it was sent: a pass not made is not counted (``result.iterations``
    is what was done)."""
    if rs.attempt == 1:
        rs.iteration -= 1


def _failed(rs: RunState, ctx: RunContext, exc: Exception) -> None:
    """The call failed: the error recorded (and, when the agent's fallback models cover it, the
    model the fallback row would switch to)."""
    charge_failed_call(rs, exc)
    rs.model_error = error_info(exc)
    ctx.emit(ErrorOccurred, error=rs.model_error)
    if ctx.agent.fallback_models:
        rs.next_model = fallback_target(exc, rs, ctx)


async def _again(rs: RunState, ctx: RunContext, failed: ErrorInfo | None) -> None:
    """Another attempt in this pass: after the fallback row, the next model's first (at once);
    after the retry row, a retry, once the backoff has passed, or longer if the provider said
    (Retry-After, at most 60 s)."""
    if rs.next_model is not None:
        rs.next_model = None
        if switch_model(rs, ctx, failed):
            rs.attempt = 1
            return
    asked = failed.retry_after if failed is not None and failed.retry_after else 0.0
    await asyncio.sleep(max(ctx.limits.retry_delay(rs.attempt), min(asked, MAX_RETRY_AFTER_S)))
    rs.attempt += 1
