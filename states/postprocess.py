"""postprocess: takes in the model's reply.

Reads ``response``; writes ``usage`` (adds the reply's), ``messages`` (appends the assistant
turn, thought parts included: some providers need them back), and ``text`` (the visible text,
thought parts excluded).
"""

from __future__ import annotations

from loopwright.events import Message, TextPart, trusted
from loopwright.run_state import RunContext, RunState


async def postprocess(rs: RunState, ctx: RunContext) -> None:
    response = rs.response
    if response is None:  # the table only routes here with a response
        return
    rs.usage = rs.usage + response.usage
    rs.messages.append(trusted(Message, role="assistant", parts=response.parts))
    rs.text = "".join(p.text for p in response.parts if type(p) is TextPart)
