"""A call a person approved with edits (``approve(args=..., note=...)``): the edit checked
against the tool's schema, the call run with the person's arguments, and what the model is told
with its result (the edit and the note).

A call of a tool that runs an agent (``agent_tool``) waits for what its nested run waits for:
its pending request shows the nested run's call (``tool`` is the path ``billing.refund``, the
``args`` are that call's). The tool hands the person's decision down to its nested run
(:class:`HandsDown`, found on the tool's function, so a copy made with ``functools.wraps`` keeps
it): an edit is checked against the innermost tool's schema and that call runs with it.

A nested run may wait on several calls at once: the call then waits on all of them, each shown
as a request of its own whose id is compound, the call's id and the nested run's request's
(``d1/r1``, ``d1/r2``; two levels down ``f1/d1/r1``), as the tool is a path (:func:`owner`). The
tool returns them together (:class:`Asks`)."""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from typing import Any, Protocol, runtime_checkable

from ..data.events import PendingRequest, ToolApproved, ToolCall, ToolResult, trusted
from ..data.run_state import RunState
from .context import RunContext
from .tools import ArgumentsError, Tool


@runtime_checkable
class HandsDown(Protocol):
    """What a tool that runs an agent (``agent_tool``) does with a person's decision on a call
    whose nested run waits (its function's ``hands_down``)."""

    def edit_problem(self, call_id: str, args: dict[str, Any], rs: RunState) -> str | None:
        """Why ``approve(args=...)`` cannot run the nested call the run ``rs``'s request
        ``call_id`` (compound: ``d1/r1``) shows (the innermost tool's schema rejects it); None: it fits."""

    def hand_down(self, request: PendingRequest, decision: Any, rs: RunState) -> None:
        """Keep ``decision`` (an approval, a denial, a credential's arrival, a long-running
        tool's result) in ``rs`` for the nested call ``request`` shows: the call, run again,
        resumes its nested run with every decision kept for it."""

    def shown_problem(self, request: PendingRequest, rs: RunState) -> str | None:
        """Why the run ``rs``, loaded from a saved state, cannot be waiting on ``request``
        (its compound id names no request its nested run waits on, or it shows another tool);
        None: it can."""


class Asks(PendingRequest):
    """What a call whose nested run waits comes to: a request for the call itself (the first of
    its nested requests, with the call's id) carrying every request it waits on (``asks``, each
    with a compound id). The waiting feature keeps the ``asks``; anything that knows only a
    call's one request (a guardrail, a run that cannot wait) sees the call's."""

    asks: tuple[PendingRequest, ...]


def owner(request_id: str, ids: Container[str]) -> str | None:
    """The call of ``ids`` whose request ``request_id`` is: the call itself, or the call
    whose nested run waits on it (``d1/r1`` -> ``d1``; the longest such prefix); None: none."""
    head = request_id
    while True:
        if head in ids:
            return head
        if "/" not in head:
            return None
        head = head.rpartition("/")[0]


def asks_of(outcome: PendingRequest) -> tuple[PendingRequest, ...]:
    """The requests a call's wait stands for (an :class:`Asks`: all it carries)."""
    return outcome.asks if type(outcome) is Asks else (outcome,)


def hands_down(found: Tool | None) -> HandsDown | None:
    """The nested run behind the tool ``found`` (None: a plain tool)."""
    down = getattr(found.fn, "hands_down", None) if found is not None else None
    return down if isinstance(down, HandsDown) else None


def problem_in(
    tools: Mapping[str, Tool], call_id: str, tool_name: str, args: dict[str, Any], rs: RunState
) -> str | None:
    """Why ``args`` do not fit the call ``call_id`` of ``tool_name`` among ``tools`` (a path
    ``a.b``: the call of tool ``a`` whose nested run waits on ``b``); None: they fit, or the
    tool is not found (the call is answered "unknown tool" when it runs)."""
    head, dot, _ = tool_name.partition(".")
    found = tools.get(head)
    down = hands_down(found) if dot else None
    if down is not None:
        return down.edit_problem(call_id, args, rs)
    if found is None:
        return None
    try:
        found.validate(dict(args))
    except ArgumentsError as exc:
        return str(exc)
    return None


def shown(call_name: str, args: dict[str, Any]) -> str:
    return f"{call_name}({json.dumps(args, sort_keys=True, default=str)})"


def edit_problem(call_id: str, tool_name: str, args: dict[str, Any], ctx: RunContext) -> str | None:
    """Why ``approve(args=...)`` cannot run call ``call_id``: the edited arguments do not fit
    the tool's schema (a nested call's: the innermost tool's) (None: they do)."""
    problem = problem_in(ctx.agent.tools, call_id, tool_name, args, ctx.run_state)
    if problem is None:
        return None
    return (
        f"call {call_id} ({tool_name}): approve(args=...) holds {problem}; nothing changed and the call still "
        "waits: resume again with arguments that fit the tool's schema, or approve() it as asked"
    )


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
