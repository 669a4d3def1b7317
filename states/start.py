"""start: the run begins.

Reads ``input``; writes ``messages`` (appends the user's turn).
"""

from __future__ import annotations

from loopwright.context import RunContext
from loopwright.events import Message, TextPart, trusted
from loopwright.run_state import RunState


def start(rs: RunState, ctx: RunContext) -> None:
    text = trusted(TextPart, type="text", text=rs.input)
    rs.messages.append(trusted(Message, role="user", parts=(text,), agent=None))
