"""A call a person approved with edits (``approve(args=..., note=...)``): the edit checked
against the tool's schema, the call run with the person's arguments, and what the model is told
with its result (the edit and the note)."""

from __future__ import annotations

import json
from typing import Any

from ..data.events import ToolApproved, ToolCall, ToolResult, trusted
from .context import RunContext
from .tools import ArgumentsError


def shown(call_name: str, args: dict[str, Any]) -> str:
    return f"{call_name}({json.dumps(args, sort_keys=True, default=str)})"


def edit_problem(call_id: str, tool_name: str, args: dict[str, Any], ctx: RunContext) -> str | None:
    """Why ``approve(args=...)`` cannot run call ``call_id``: the edited arguments do not fit
    the tool's schema (None: they do)."""
    found = ctx.agent.tools.get(tool_name)
    if found is None:
        return None  # (the call is answered "unknown tool" when it runs, as the model's would be)
    try:
        found.validate(dict(args))
    except ArgumentsError as exc:
        return (
            f"call {call_id} ({tool_name}): approve(args=...) holds {exc}; nothing changed and the call still "
            "waits: resume again with arguments that fit the tool's schema, or approve() it as asked"
        )
    return None


def approved_as(call: ToolCall, approval: Any, ctx: RunContext) -> ToolCall:
    """The call an ``approve(args=..., note=...)`` runs: with the person's arguments. The edit
    is recorded (a ``tool_approved`` event) and the model reads it, and the note, with the
    result (:func:`answer`)."""
    args = call.args if approval.args is None else approval.args
    ctx.emit(ToolApproved, call.id, call.name, args, call.args, approval.note)
    lines = []
    if args != call.args:
        lines.append(
            f"The user approved this call with edited arguments: it ran as {shown(call.name, args)}, "
            f"not as you asked, {shown(call.name, call.args)}."
        )
    if approval.note:
        lines.append(f"Note from the user: {approval.note}")
    if lines:
        if ctx.told is None:
            ctx.told = {}
        ctx.told[call.id] = "\n".join(lines)
    return call if args is call.args else trusted(ToolCall, type="tool_call", id=call.id, name=call.name, args=args)


def told(outcome: ToolResult, preface: str | None) -> ToolResult:
    """``outcome`` with the person's words before it (its content, as text, after them)."""
    if preface is None:
        return outcome
    content = outcome.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    said = f"{preface}\n{'Error' if outcome.is_error else 'Result'}: {text}"
    return trusted(
        ToolResult,
        type="tool_result",
        call_id=outcome.call_id,
        name=outcome.name,
        content=said,
        is_error=outcome.is_error,
    )
