"""act: runs every tool call of the latest reply, concurrently.

Reads ``response`` (its tool calls), ``vetoes`` (calls refused by an earlier stage: answered
with an error, not run) and the active agent's tools and tool callbacks; writes
``messages`` (one user turn answering every call, in the model's call order) and
``tool_calls_made`` (the calls run). Calls past the room left in ``max_tool_calls`` (the
run's, or the active agent's own) are answered "not run: tool-call budget spent" unrun.
Calls that wait (a confirmation, a credential, a result later) are offered to the features'
``hold`` hooks: one that keeps the step answers it later (``waiting``); if none does, they are
answered with an error saying why they cannot wait.
"""

from __future__ import annotations

import asyncio

from loopwright.data.events import PendingRequest, ToolCall, ToolResult
from loopwright.data.run_state import RunState
from loopwright.runtime.calls import (
    CallOutcome,
    answer,
    answer_turn,
    budget_spent,
    fill,
    interruption,
    record,
    result,
    run_jobs,
    tool_call_room,
    tool_calls,
)
from loopwright.runtime.context import RunContext

NO_WAITING = (
    "this agent's loop has no waiting state; declare the tool with requires_confirmation=, long_running= or "
    "credentials= so the run can wait"
)


async def act(rs: RunState, ctx: RunContext) -> None:
    calls = tool_calls(rs)
    for call in calls:
        ctx.record_call(call)  # (kept as the call itself: data.event_log.LogEntry)
    results: list[ToolResult | None] = [None] * len(calls)
    no_cap = rs.limits.max_tool_calls is None and rs.turn_limits is None  # (the usual case: nothing to count)
    runs = len(calls) if no_cap else _within_budget(rs, ctx, calls, results)
    rs.tool_calls_made += runs
    outcomes: dict[int, CallOutcome] = {}
    try:
        if runs == 1:  # the common case: one call, no job list, no task
            outcome = outcomes[0] = await answer(calls[0], ctx)
            if type(outcome) is ToolResult and len(calls) == 1 and ctx.interrupt is None:
                answer_turn(rs, (outcome,))
                return
        else:
            await run_jobs([(i, calls[i], False) for i in range(runs)], ctx, outcomes)
    except (Exception, asyncio.CancelledError):
        # cancelled, or the run's deadline passed: still answer every call
        _fold(outcomes, results)
        answer_turn(rs, fill(calls, results, ctx, interruption(rs)))
        raise
    waits = _fold(outcomes, results)
    if ctx.interrupt is not None:  # a tool was interrupted: the run is cancelled, nothing waits
        answer_turn(rs, fill(calls, results, ctx, interruption(rs)))
        return
    if waits:
        why = NO_WAITING
        for hold in ctx.holds:
            refused = hold(rs=rs, ctx=ctx, calls=calls, results=results, waits=waits)
            if refused is None:
                return  # the feature keeps the step and answers it when the waits are over
            why = refused
        for request in waits:
            i = next(i for i, c in enumerate(calls) if c.id == request.call_id)
            results[i] = result(calls[i], f"tool {calls[i].name!r} needs {request.kind} but {why}", True)
            record(calls[i], results[i], 0.0, ctx)  # type: ignore[arg-type]
    answer_turn(rs, [r for r in results if r is not None])


def _within_budget(rs: RunState, ctx: RunContext, calls: list[ToolCall], results: list[ToolResult | None]) -> int:
    """How many of ``calls`` may run (the first ones); the others are answered here."""
    room = tool_call_room(rs)
    if ctx.up is not None:  # a run nested in a tool: the room of the runs above too, charged the calls now
        room = ctx.up.run_calls(room, len(calls))
    if room is None or room[0] >= len(calls):
        return len(calls)
    runs = max(room[0], 0)
    for i in range(runs, len(calls)):
        results[i] = result(calls[i], budget_spent(calls[i], room[1]), True)
        record(calls[i], results[i], 0.0, ctx)  # type: ignore[arg-type]
    return runs


def _fold(outcomes: dict[int, CallOutcome], results: list[ToolResult | None]) -> list[PendingRequest]:
    """Results into their places; the requests of calls that wait, in call order."""
    waits: list[PendingRequest] = []
    for i in sorted(outcomes):
        outcome = outcomes[i]
        if isinstance(outcome, PendingRequest):
            waits.append(outcome)
        else:
            results[i] = outcome
    return waits
