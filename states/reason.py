"""reason: calls the model.

Reads ``request``, ``attempt`` and the agent's model and model callbacks; writes ``response``
(or ``model_error``), ``attempt`` and ``iteration`` (a pass's first attempt counts one).
A retry (the bounded ``reason -> reason`` row) first waits ``Limits.retry_delay(attempt)``, or the
failed call's ``retry_after`` (the provider's ``Retry-After``) when that is longer.
"""

from __future__ import annotations

import asyncio

from loopwright.data.events import ErrorOccurred, History, ModelRequested, ModelResponded
from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import call_model, error_info, model_call, plain


async def reason(rs: RunState, ctx: RunContext) -> None:
    rs.response = None
    failed, rs.model_error = rs.model_error, None
    if rs.deadline_hit:
        return
    if rs.attempt > 0:  # a retry: the backoff, or longer if the provider said (Retry-After, at most 60 s)
        asked = failed.retry_after if failed is not None and failed.retry_after else 0.0
        await asyncio.sleep(max(ctx.limits.retry_delay(rs.attempt), min(asked, 60.0)))
    rs.attempt += 1
    if rs.attempt == 1:
        rs.iteration += 1
    request = rs.request
    if request is None:  # the table only routes here after preprocess
        raise RuntimeError("reason entered without a request; preprocess must run first")
    if ctx.up is not None and ctx.up.refuses(rs, ctx):  # a nested run: the runs above must have room for it
        return
    tools = request.tools
    if ctx.tools_named is not tools:  # the agent's tools change rarely: their names are kept, not rebuilt
        ctx.tools_named, ctx.tool_names = tools, tuple([t.name for t in tools])
    messages = request.messages  # (a History's length without its __len__ frame)
    ctx.record(ModelRequested, rs.attempt, messages.n if type(messages) is History else len(messages), ctx.tool_names)
    try:
        if plain(ctx):  # the model alone: awaited in this frame (model_call.ModelCall)
            model = ctx.agent.model
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
        rs.model_error = error_info(exc)
        ctx.emit(ErrorOccurred, error=rs.model_error)
        return
    rs.response = response
    reply = response.__dict__  # the log keeps the reply's values, not the reply (events.reply_values)
    details = reply["details"] or None
    ctx.record(ModelResponded, reply["parts"], reply["usage"], reply["stop_reason"], reply["model"], details)
