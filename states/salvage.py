"""salvage: a budget is spent; one last tool-less model call asks for the best answer from
what is known (KodeAgent's ``salvage_response``).

Reads ``limit`` (the engine recorded which budget ran out when the run took the row here),
``messages`` and ``request``; writes ``messages`` (the salvage prompt and the reply's text),
``response`` (None when that call fails: the table then ends the run with outcome "limit"),
``text``, ``usage`` and, on failure, ``error``. Tools stay declared (providers require it once
history holds tool calls) with ``tool_choice="none"``; tool calls in the reply are dropped.
"""

from __future__ import annotations

from loopwright.context import RunContext
from loopwright.events import (
    ErrorOccurred,
    Message,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    TextPart,
    ThoughtPart,
    trusted,
)
from loopwright.model_call import call_model, error_info
from loopwright.run_state import RunState

SALVAGE_PROMPT = (
    "You have run out of {budget} and cannot call any more tools. Using only what is already "
    "known from the conversation above, give your best final answer to the original request "
    "now. Say plainly what is incomplete or uncertain."
)


async def salvage(rs: RunState, ctx: RunContext) -> None:
    agent = ctx.agent
    rs.response = None
    budget = ctx.budgets.get(rs.limit or "max_iterations")
    words = budget.describe(rs) if budget is not None else str(rs.limit)
    prompt = TextPart(text=SALVAGE_PROMPT.format(budget=words))
    rs.messages.append(Message(role="user", parts=(prompt,), agent=rs.active_agent))
    request = ModelRequest(
        instructions=rs.request.instructions if rs.request is not None else agent.static_instructions,
        messages=rs.messages,
        tools=agent.tool_specs,
        settings=agent.model_settings,
    )
    for process in ctx.request_hooks:
        request = process(request, rs, ctx)
    request = request.model_copy(update={"tool_choice": "none" if request.tools else None})
    ctx.emit(ModelRequested, attempt=1, message_count=len(request.messages), tool_names=())
    try:
        response = await call_model(request, ctx)
    except Exception as exc:
        rs.error = error_info(exc).model_copy(update={"kind": "salvage"})
        ctx.emit(ErrorOccurred, error=rs.error)
        return
    kept = tuple(p for p in response.parts if isinstance(p, TextPart | ThoughtPart))
    reply = ModelResponse(parts=kept, usage=response.usage, stop_reason=response.stop_reason, model=response.model)
    ctx.emit(ModelResponded, response=reply)
    rs.usage = rs.usage + reply.usage
    rs.messages.append(trusted(Message, role="assistant", parts=kept, agent=rs.active_agent))
    rs.response = reply
    rs.text = reply.text
