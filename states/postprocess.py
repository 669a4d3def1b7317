"""postprocess: takes in the model's reply.

Reads ``response`` (handed first through the features' reply processors, which may replace
it); writes ``usage`` (adds the reply's), ``messages`` (appends the assistant
turn, thought parts included: some providers need them back), ``text`` (the visible text,
thought parts excluded) and ``continuing``.

A reply cut short (stop reason ``max_tokens`` or ``pause_turn``) without tool calls is not
final: an ``error`` event of kind ``max_tokens``/``pause_turn`` says so, the loop goes round
(bounded like any pass) with the partial turn last in the history, the model continues it,
and the continuation's text is appended to ``text``.
"""

from __future__ import annotations

from loopwright.data.build import all_fields, new_object, set_dict, set_extra, set_fields_set, set_private
from loopwright.data.events import ZERO_USAGE, ErrorInfo, ErrorOccurred, Message, TextPart, ToolCall, kept
from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext
from loopwright.table.guards import TRUNCATED

_MESSAGE_FIELDS = all_fields(Message)


def postprocess(rs: RunState, ctx: RunContext) -> None:
    response = rs.response
    if response is None:  # the table only routes here with a response
        return
    for process in ctx.response_hooks:
        response = rs.response = process(response=response, rs=rs, ctx=ctx)
    if type(response.__pydantic_fields_set__) is set:  # (kept already: a reply built with build_reply)
        kept(response)
    if response.usage is not ZERO_USAGE:  # (a reply that reports no usage adds none)
        rs.usage = rs.usage + response.usage
    turn = new_object(Message)  # (trusted(Message, ...) written out: once an iteration)
    set_dict(turn, {"role": "assistant", "parts": response.parts, "agent": rs.active_agent})
    set_fields_set(turn, _MESSAGE_FIELDS)
    set_extra(turn, None)
    set_private(turn, None)
    rs.messages.append(turn)
    parts = response.parts
    if len(parts) == 1:  # the usual reply: one part (no generator for it)
        text = parts[0].text if type(parts[0]) is TextPart else ""
    else:
        text = "".join([p.text for p in parts if type(p) is TextPart])
    rs.text = (rs.text or "") + text if rs.continuing else text
    stop = response.stop_reason
    rs.continuing = stop in TRUNCATED and not any(type(p) is ToolCall for p in response.parts)
    if rs.continuing:
        ctx.emit(
            ErrorOccurred,
            error=ErrorInfo(
                kind=str(stop),
                message=f"the reply stopped early ({stop}, {response.usage.output_tokens} output tokens); "
                "the loop goes round so the model can continue it",
                retryable=True,
            ),
        )
