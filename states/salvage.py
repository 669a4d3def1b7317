"""salvage: a budget is spent; one last tool-less model call asks for the best answer from
what is known (KodeAgent's ``salvage_response``).

Reads the spent budget (from the guards), ``messages`` and ``request``; writes ``limit``,
``messages`` (the salvage prompt and the reply's text), ``response``, ``text``, ``usage`` and
``salvaged``. If that call fails, ``error`` keeps why and the run ends with outcome "limit".
Tools stay declared (providers require it once history holds tool calls) with
``tool_choice="none"``; tool calls in the reply are dropped.
"""

from __future__ import annotations

from loopwright.events import (
    ErrorOccurred,
    LimitReached,
    Message,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    TextPart,
    ThoughtPart,
    trusted,
)
from loopwright.guards import ping_pong_transfers, spent_budget
from loopwright.limits import LimitName
from loopwright.run_state import RunContext, RunState

from .reason import call_model, error_info

SALVAGE_PROMPT = (
    "You have run out of {budget} and cannot call any more tools. Using only what is already "
    "known from the conversation above, give your best final answer to the original request "
    "now. Say plainly what is incomplete or uncertain."
)
BUDGET_WORDS: dict[str, str] = {
    "max_iterations": "steps (max_iterations={value})",
    "max_tool_calls": "tool calls (max_tool_calls={value})",
    "max_total_tokens": "tokens (max_total_tokens={value})",
    "timeout_s": "time (timeout_s={value})",
    "max_transfers": "transfers between agents (max_transfers={value})",
    "max_ping_pong": "back-and-forth transfers between the same agents (max_ping_pong={value})",
}


def note_limit(rs: RunState, ctx: RunContext) -> LimitName | None:
    """Record which budget stopped the loop and emit ``limit_reached`` (once per run)."""
    if rs.limit is not None:
        return rs.limit
    limit = spent_budget(rs)
    if limit is None:
        return None
    rs.limit = limit
    used = {
        "max_iterations": rs.iteration,
        "max_tool_calls": rs.tool_calls_made,
        "max_total_tokens": rs.usage.total_tokens,
        "timeout_s": rs.limits.timeout_s or 0.0,
        "max_transfers": len(rs.transfers),
        "max_ping_pong": ping_pong_transfers(rs),
    }[limit]
    value = getattr(rs.limits, limit)
    ctx.emit(LimitReached, limit=limit, value=float(value), used=float(used))
    return limit


async def salvage(rs: RunState, ctx: RunContext) -> None:
    agent = ctx.agent
    limit = note_limit(rs, ctx) or "max_iterations"
    budget = BUDGET_WORDS[limit].format(value=getattr(rs.limits, limit))
    prompt = TextPart(text=SALVAGE_PROMPT.format(budget=budget))
    rs.messages.append(Message(role="user", parts=(prompt,), agent=rs.active_agent))
    instructions = rs.request.instructions if rs.request is not None else agent.static_instructions
    request = ModelRequest(
        instructions=instructions,
        messages=rs.messages,
        tools=agent.request_tools,
        tool_choice="none" if agent.request_tools else None,
        settings=agent.model_settings,
    )
    ctx.emit(ModelRequested, attempt=1, message_count=len(request.messages), tool_names=())
    try:
        response = await call_model(request, ctx)
    except Exception as exc:
        rs.error = error_info(exc).model_copy(update={"kind": "salvage"})
        ctx.emit(ErrorOccurred, error=rs.error, retrying=False)
        return
    kept = tuple(p for p in response.parts if isinstance(p, TextPart | ThoughtPart))
    reply = ModelResponse(parts=kept, usage=response.usage, stop_reason=response.stop_reason, model=response.model)
    ctx.emit(ModelResponded, response=reply)
    rs.usage = rs.usage + reply.usage
    rs.messages.append(trusted(Message, role="assistant", parts=kept, agent=rs.active_agent))
    rs.response = reply
    rs.text = reply.text
    rs.salvaged = True
