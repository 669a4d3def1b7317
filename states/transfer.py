"""transfer: hands the run to another agent of the tree.

Reads ``transfer_to`` and ``transfer_task`` (set by act when it accepted a
``transfer_to_agent`` call); writes ``active_agent``, ``transfers``, ``messages`` (the task,
as a user turn addressed to the target) and, for a target with the isolated history policy,
``branch_start``. The context's agent becomes the target.
"""

from __future__ import annotations

import json

from loopwright.events import Message, TextPart, ToolCall, ToolResult, Transferred
from loopwright.run_state import RunContext, RunState


async def transfer(rs: RunState, ctx: RunContext) -> None:
    target = rs.transfer_to
    if target is None:  # the table only routes here with a transfer pending
        return
    source = rs.active_agent
    task = rs.transfer_task
    rs.transfers.append((source, target))
    rs.transfer_to = None
    rs.transfer_task = ""
    rs.active_agent = target
    ctx.agent = ctx.agents[target]
    if ctx.agent.history == "isolated":
        rs.branch_start[target] = len(rs.messages)
    text = f"[{source} handed this conversation to you] {task}"
    rs.messages.append(Message(role="user", parts=(TextPart(text=text),), agent=target))
    ctx.emit(Transferred, from_agent=source, to_agent=target, task=task)


def view_for(agent: str, isolated: bool, rs: RunState) -> list[Message]:
    """The history as ``agent`` sees it: its own turns and the user's as they are, other
    agents' turns as marked context (``[billing] ...``) in user turns. With the isolated
    policy, only its branch (from the task it was handed)."""
    start = rs.branch_start.get(agent, 0) if isolated else 0
    view: list[Message] = []
    for message in rs.messages[start:]:
        if message.agent is None or message.agent == agent:
            view.append(message)
            continue
        lines = []
        for part in message.parts:
            if isinstance(part, TextPart) and part.text:
                lines.append(f"[{message.agent}] {part.text}")
            elif isinstance(part, ToolCall):
                lines.append(f"[{message.agent}] called {part.name}({json.dumps(part.args, default=str)})")
            elif isinstance(part, ToolResult):
                outcome = "failed" if part.is_error else "returned"
                lines.append(f"[{message.agent}] {part.name} {outcome}: {json.dumps(part.content, default=str)}")
        if lines:
            view.append(Message(role="user", parts=(TextPart(text="\n".join(lines)),), agent=message.agent))
    return view
