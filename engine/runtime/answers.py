"""Answers to tool calls: every call gets exactly one, and a step's answers go into the history as
one user turn. :func:`result` builds a call's result and :func:`record` logs it; when a pass of
calls is cut short (the deadline, a cancellation), :func:`interruption` says why and :func:`fill`
answers the calls that did not finish; :func:`answer_turn` appends the results in call order; and
when a run ends between postprocess and act, :func:`answer_unrun_calls` answers the calls that
never ran. :mod:`loopwright.runtime.calls`, which runs the calls, builds on these and re-exports them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..data.events import Message, ToolAnswered, ToolCall, ToolCalled, ToolResult, trusted
from ..data.run_state import RunState
from .context import RunContext


def result(call: ToolCall, content: Any, is_error: bool) -> ToolResult:
    return trusted(ToolResult, type="tool_result", call_id=call.id, name=call.name, content=content, is_error=is_error)


def record(call: ToolCall, answered: ToolResult, duration: float, ctx: RunContext) -> None:
    ctx.record(ToolAnswered, call.id, call.name, answered.content, answered.is_error, duration)


def interruption(rs: RunState) -> str:
    """Why a pass of tool calls was cut short: the deadline, or a cancellation."""
    if rs.cancel_requested:
        return "the run was cancelled"
    out_of_time = rs.deadline is not None and time.time() >= rs.deadline
    return "the run's time budget (timeout_s) ran out" if out_of_time else "the run was cancelled"


def fill(calls: Sequence[ToolCall], results: list[ToolResult | None], ctx: RunContext, why: str) -> list[ToolResult]:
    """Answer every call without a result with an error saying ``why`` it did not finish."""
    for i, call in enumerate(calls):
        if results[i] is None:
            results[i] = result(call, f"tool {call.name!r} did not finish: {why}", True)
            record(call, results[i], 0.0, ctx)  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def answer_turn(rs: RunState, results: Sequence[ToolResult]) -> None:
    """Append the user turn that answers a step's calls, in call order."""
    if results:
        rs.messages.append(trusted(Message, role="user", parts=tuple(results), agent=rs.active_agent))
    if rs.vetoes:
        rs.vetoes = {}


def answer_unrun_calls(rs: RunState, ctx: RunContext, why: str) -> None:
    """When a run ends: answer the calls of the last assistant turn that never ran (the run
    ended between postprocess and act) with error results, so every call has one answer."""
    last = rs.messages[-1] if rs.messages else None
    if last is None or last.role != "assistant":
        return
    calls = [p for p in last.parts if type(p) is ToolCall]
    if not calls:
        return
    results: list[ToolResult] = []
    for call in calls:
        ctx.emit(ToolCalled, call.id, call.name, call.args)
        answered = result(call, f"tool {call.name!r} was not run: {why}", True)
        record(call, answered, 0.0, ctx)
        results.append(answered)
    answer_turn(rs, results)
