"""salvage: a budget is spent; one last tool-less model call asks for the best answer from
what is known (KodeAgent's ``salvage_response``).

Reads ``limit`` (the engine recorded which budget ran out when the run took the row here),
``messages`` and ``request``; writes ``messages`` (the salvage prompt and the reply's text),
``response`` (None when that call fails: the table then ends the run with outcome "limit"),
``text``, ``usage`` and, on failure, ``error``. Tools stay declared (providers require it once
history holds tool calls) with ``tool_choice="none"``; tool calls in the reply are dropped.

After a request the model did not send because it would overspend ``max_total_tokens``
(``reason -> salvage if request_over_token_budget``), the salvage call must fit in what is left:
the tool results that request would have sent first are replaced, in the salvage request only,
by a note saying they were left out, and the model refuses it too if it still does not fit
(the run then ends with outcome "limit").

A reply cut because the model's context window was full (:class:`~loopwright.ContextWindowError`,
its text in ``model_error.partial``) comes here the same way; when the salvage call does not fit
either, that partial reply is the salvaged answer (it is what the model had said).
"""

from __future__ import annotations

from loopwright.data.errors import TokenBudgetError
from loopwright.data.events import (
    ErrorInfo,
    ErrorOccurred,
    History,
    Message,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    TextPart,
    ThoughtPart,
    ToolResult,
    trusted,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import call_model, charge_failed_call, error_info, salvage_over_cost

SALVAGE_PROMPT = (
    "You have run out of {budget} and cannot call any more tools. Using only what is already "
    "known from the conversation above, give your best final answer to the original request "
    "now. Say plainly what is incomplete or uncertain."
)


async def salvage(rs: RunState, ctx: RunContext) -> None:
    agent = ctx.agent
    last, rs.response = rs.response, None
    budget = ctx.budgets.get(rs.limit or "max_iterations")
    words = budget.describe(rs) if budget is not None else str(rs.limit)
    prompt = TextPart(text=SALVAGE_PROMPT.format(budget=words))
    refused = rs.model_error is not None and rs.model_error.kind == "token_budget"
    rs.messages.append(Message(role="user", parts=(prompt,), agent=rs.active_agent))
    cap = rs.limits.max_total_tokens
    request = ModelRequest(
        instructions=rs.request.instructions if rs.request is not None else agent.static_instructions,
        messages=_unsent_results_left_out(rs.messages) if refused else History(rs.messages),
        tools=agent.tool_specs,
        settings=agent.model_settings,
        tokens_left=cap - rs.usage.total_tokens if refused and cap is not None else None,
    )
    for process in ctx.request_hooks:
        request = process(request=request, rs=rs, ctx=ctx)
    request = request.model_copy(update={"tool_choice": "none" if request.tools else None})
    if rs.limits.max_cost_usd is not None or (ctx.up is not None and hasattr(ctx.up, "cost_room")):
        over = salvage_over_cost(rs, ctx, request, last)  # salvage's call is paid from the budget too
        if over is not None:
            ctx.emit(ErrorOccurred, error=ErrorInfo(kind="cost_budget", message=over))
            return  # (no reply: the run ends "limit", naming the budget)
    ctx.emit(ModelRequested, attempt=1, message_count=len(request.messages), tool_names=())
    partial = rs.model_error.partial if refused and rs.model_error is not None else None
    try:
        response = await call_model(request, ctx)
    except Exception as exc:
        charge_failed_call(rs, exc)
        rs.error = error_info(exc).model_copy(update={"kind": "salvage"})
        ctx.emit(ErrorOccurred, error=rs.error)
        if partial is None or not isinstance(exc, TokenBudgetError):
            return
        # the window is full for this call too: the reply the full window cut is the best answer known
        response = ModelResponse(parts=(TextPart(text=partial),), stop_reason="max_tokens")
    kept = tuple(p for p in response.parts if isinstance(p, TextPart | ThoughtPart))
    reply = ModelResponse(parts=kept, usage=response.usage, stop_reason=response.stop_reason, model=response.model)
    ctx.emit(ModelResponded, response=reply)
    rs.usage = rs.usage + reply.usage
    rs.messages.append(trusted(Message, role="assistant", parts=kept, agent=rs.active_agent))
    rs.response = reply
    rs.text = reply.text


LEFT_OUT = (
    "[left out: this result ({size} characters) made the request larger than what is left of the token "
    "budget (max_total_tokens)]"
)


def _unsent_results_left_out(messages: list[Message]) -> list[Message]:
    """The history with the tool results no request has sent yet (those after the last
    assistant turn) replaced by :data:`LEFT_OUT` (a new list; the history is not changed)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    if last < 0:
        return messages
    kept = messages[: last + 1]
    for message in messages[last + 1 :]:
        parts = tuple(
            ToolResult(call_id=p.call_id, name=p.name, content=LEFT_OUT.format(size=len(str(p.content))), is_error=True)
            if isinstance(p, ToolResult)
            else p
            for p in message.parts
        )
        kept.append(message.model_copy(update={"parts": parts}))
    return kept
