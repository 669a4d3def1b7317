"""start: the run begins.

Reads ``input`` (text, or parts: text, images, documents); writes ``messages`` (appends the user's turn).
"""

from __future__ import annotations

from loopwright.data.events import Message, TextPart, trusted
from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext


def start(rs: RunState, ctx: RunContext) -> None:
    given = rs.input
    parts = (trusted(TextPart, type="text", text=given),) if isinstance(given, str) else given
    rs.messages.append(trusted(Message, role="user", parts=parts, agent=None))
