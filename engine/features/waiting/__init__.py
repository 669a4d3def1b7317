"""waiting: tool calls that wait for people (confirmations, credentials, long-running results).

An agent with a tool that can wait (``@tool(requires_confirmation=...)``, ``credentials=True``,
``long_running=True``) runs on the core composed with this feature. It adds:

- the waiting state ``suspended``: the runner pauses a run that enters it and returns its
  result (outcome ``"suspended"`` with the pending requests); its handler runs when the run is
  resumed, applies the decisions (denials and supplied values answer their calls, approved
  calls run exactly once) and answers the step in one turn once nothing is left waiting. A
  call of an ``agent_tool`` waits on each request of its nested run (compound ids, ``d1/r1``):
  every decision for it is handed down, denials too, and the call runs once; the requests a
  resume leaves undecided are asked again (a partial resume goes on with what was decided, as
  a workflow's does);
- the rows ``decide -> suspended`` (``has_pending_requests``, bounded by ``max_suspensions``),
  ``suspended -> cancelled`` and ``suspended -> decide``;
- act's ``hold`` hook (a step whose calls wait is kept while the run may still wait), the
  runner's ``pause``/``resume`` hooks (the run clock stops while a run waits; ``resume``
  checks the decisions), and ``finish`` (a run that ends while waiting answers its calls);
- its slice :class:`Waiting` and its budget ``max_suspensions``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopwright.data.decisions import Approve, Deny
from loopwright.data.errors import ResumeError
from loopwright.data.events import PendingRequest, Resumed, Suspended, ToolApproved, ToolCall, ToolResult
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.approvals import HandsDown
from loopwright.runtime.calls import (
    CallOutcome,
    Job,
    answer_turn,
    approved_as,
    asks_of,
    edit_problem,
    fill,
    hands_down,
    interruption,
    owner,
    record,
    result,
    run_jobs,
    tool_calls,
)
from loopwright.runtime.context import RunContext
from loopwright.runtime.tools import to_json_value
from loopwright.table.budgets import Budget
from loopwright.table.machine import DECIDE, DONE, Extension, Row, cancellable

NAME = "waiting"
SUSPENDED = "suspended"


@dataclass(slots=True)
class Waiting:
    """The waiting slice of a run's state (``RunState.features["waiting"]``)."""

    pending: list[PendingRequest] = field(default_factory=list)
    """Tool calls waiting on the outside world (the run suspends while any are left)."""
    step: list[ToolResult | None] = field(default_factory=list)
    """The held step's results so far, in call order (None: not answered yet)."""
    wait_deadline: float | None = None
    time_left: float | None = None
    """While suspended: what was left of ``timeout_s`` (the clock stops while a run waits)."""

    def pending_requests(self) -> list[PendingRequest]:
        """What the run waits for (``RunResult.pending`` collects it from every slice that says)."""
        return list(self.pending)


def waiting(rs: RunState) -> Waiting:
    return rs.features[NAME]  # type: ignore[no-any-return]


def has_pending_requests(rs: RunState) -> bool:
    """Tool calls wait for a confirmation, a credential or a long-running result."""
    return bool(waiting(rs).pending)


SUSPENSIONS = Budget(
    "max_suspensions", "waits for people (max_suspensions={value})", "within_suspension_budget", cycle=True
)
within_suspension_budget = SUSPENSIONS.guard


def _cannot_wait(rs: RunState) -> str | None:
    if within_suspension_budget(rs):
        return None
    return f"the run has already waited max_suspensions={rs.limits.max_suspensions} times"


# ------------------------------------------------------------------ hooks


def hold_step(
    rs: RunState, ctx: RunContext, calls: Sequence[ToolCall], results: list[ToolResult | None], waits: list[Any]
) -> str | None:
    """act's hold hook: keep a step whose calls wait while the run may still wait."""
    refused = _cannot_wait(rs)
    if refused is None:
        w = waiting(rs)
        w.pending, w.step = [r for wait in waits for r in asks_of(wait)], results
    return refused


def pause(rs: RunState, ctx: RunContext) -> None:
    """The run enters ``suspended``: stop the clock, open the wait, report the requests."""
    w = waiting(rs)
    now = time.time()
    if rs.limits.wait_timeout_s is not None:
        w.wait_deadline = now + rs.limits.wait_timeout_s
    if rs.deadline is not None:
        w.time_left, rs.deadline = max(0.0, rs.deadline - now), None
    ctx.emit(Suspended, pending=tuple(w.pending), wait_deadline=w.wait_deadline)


def check_decisions(rs: RunState, ctx: RunContext, decisions: Mapping[str, Any]) -> None:
    """``Runner.resume``'s hook: each decision must fit a pending request (else ResumeError,
    nothing changed); they are handed to the ``suspended`` handler in ``ctx.decisions``. The
    run clock starts again from what was left of it (``time_left``; the runner caps it)."""
    pending = waiting(rs).pending
    by_id = {request.call_id: request for request in pending}
    for call_id, decision in decisions.items():
        request = by_id.get(call_id)
        if request is None:
            waits = ", ".join(f"{r.call_id} ({r.tool}, {r.kind})" for r in pending) or "none"
            raise ResumeError(f"no pending request has call id {call_id!r}; pending: {waits}")
        if request.kind == "confirmation" and not isinstance(decision, Approve | Deny):
            raise ResumeError(
                f"call {call_id} ({request.tool}) waits for a confirmation: pass approve() or deny('reason')"
            )
        if request.kind != "confirmation" and isinstance(decision, Approve):
            raise ResumeError(
                f"call {call_id} ({request.tool}) waits for a {request.kind}: pass the value itself, or deny('reason')"
            )
        if isinstance(decision, Approve) and decision.args is not None:
            problem = edit_problem(call_id, request.tool, decision.args, ctx)
            if problem is not None:
                raise ResumeError(problem)
    ctx.decisions = dict(decisions)
    w = waiting(rs)
    if w.time_left is not None:  # the clock starts again (the runner caps it at the agent's timeout_s)
        rs.deadline = time.time() + w.time_left


def finish(rs: RunState, ctx: RunContext, why: str) -> None:
    """The run ends while a step is held: answer its calls (what ran keeps its result)."""
    w = waiting(rs)
    if not (w.step or w.pending):
        return
    calls = tool_calls(rs)
    answer_turn(rs, fill(calls, w.step or [None] * len(calls), ctx, why))
    w.pending, w.step = [], []


# ------------------------------------------------------------------ the suspended state


async def suspended(rs: RunState, ctx: RunContext) -> None:
    """A resumed run: apply the decisions handed to ``resume`` (past the wait deadline every
    pending call is denied, timed out), run the approved calls exactly once, and answer the
    step once nothing is left waiting."""
    w = waiting(rs)
    now = time.time()
    timed_out = w.wait_deadline is not None and now > w.wait_deadline
    if timed_out:
        ctx.decisions = {
            r.call_id: Deny(reason=f"timed out: no decision within wait_timeout_s={rs.limits.wait_timeout_s:g}")
            for r in w.pending
        }
    w.time_left = w.wait_deadline = None  # (the resume hook started the clock again)
    ctx.emit(Resumed, decided=tuple(sorted(ctx.decisions)), timed_out=timed_out)
    calls = tool_calls(rs)
    jobs = _apply_decisions(rs, ctx, calls)
    outcomes: dict[int, CallOutcome] = {}
    try:
        await run_jobs(jobs, ctx, outcomes)
    except (Exception, asyncio.CancelledError):
        _settle(rs, ctx, calls, outcomes, interruption(rs))
        raise
    _settle(rs, ctx, calls, outcomes, None)


def _apply_decisions(rs: RunState, ctx: RunContext, calls: list[ToolCall]) -> list[Job]:
    """Denials and supplied results answer their calls here; approved calls (and calls given
    their credential) are returned to run; calls without a decision stay pending. A call whose
    nested run waits (an ``agent_tool``'s, its requests' ids compound) gets every decision for
    it handed down, denials too, and runs once; what it left undecided its nested run asks
    again (the call's new requests replace them)."""
    w = waiting(rs)
    index = {call.id: i for i, call in enumerate(calls)}
    decided = {index[owner(r.call_id, index)] for r in w.pending if r.call_id in ctx.decisions}  # type: ignore[index]
    jobs: list[Job] = []
    still: list[PendingRequest] = []
    for request in w.pending:
        i = index[owner(request.call_id, index)]  # type: ignore[index]
        call = calls[i]
        decision = ctx.decisions.pop(request.call_id, None)
        down = hands_down(ctx.agent.tools.get(call.name)) if request.call_id != call.id else None
        if down is not None:  # an agent_tool's run waits: it takes the decisions
            if i not in decided:
                still.append(request)
            elif decision is not None:
                _hand_down(rs, ctx, down, request, decision)
                if not any(job[0] == i for job in jobs):
                    jobs.append((i, call, True))
        elif decision is None:
            still.append(request)
        elif isinstance(decision, Deny):
            w.step[i] = result(call, f"denied by the user: {decision.reason or 'no reason given'}", True)
            record(call, w.step[i], 0.0, ctx)  # type: ignore[arg-type]
        elif isinstance(decision, Approve):
            edited = decision.args is not None or decision.note
            jobs.append((i, approved_as(call, decision, ctx) if edited else call, True))
        elif request.kind == "credential":
            ctx.credentials[request.credential_key or ""] = decision
            jobs.append((i, call, True))
        else:  # a long-running tool's result, used as given
            w.step[i] = result(call, to_json_value(decision), False)
            record(call, w.step[i], 0.0, ctx)  # type: ignore[arg-type]
    w.pending = still
    return jobs


def _hand_down(rs: RunState, ctx: RunContext, down: HandsDown, request: PendingRequest, decision: Any) -> None:
    """One decision on a nested call, kept for the call's nested run (an edit recorded in this
    run's log; a credential in the run's credentials, never saved)."""
    if isinstance(decision, Approve) and (decision.args is not None or decision.note):
        edit = request.args if decision.args is None else decision.args
        ctx.emit(ToolApproved, request.call_id, request.tool, edit, request.args, decision.note)
    elif request.kind == "credential" and not isinstance(decision, Deny):
        ctx.credentials[request.credential_key or ""] = decision
    down.hand_down(request, decision, rs)


def _settle(
    rs: RunState, ctx: RunContext, calls: list[ToolCall], outcomes: dict[int, CallOutcome], interrupted: str | None
) -> None:
    """Fold this pass into the held step: keep what still waits (if the run may wait again),
    or answer the whole step in one turn."""
    w = waiting(rs)
    for i, outcome in outcomes.items():
        if isinstance(outcome, PendingRequest):
            w.pending.extend(asks_of(outcome))
        else:
            w.step[i] = outcome
    if interrupted is None and w.pending:
        refused = _cannot_wait(rs)
        if refused is None:
            return  # the run waits again
        index = {call.id: i for i, call in enumerate(calls)}
        for request in w.pending:
            i = index[owner(request.call_id, index)]  # type: ignore[index]
            if w.step[i] is None:  # (a call whose nested run waits on several: answered once)
                w.step[i] = result(calls[i], f"tool {calls[i].name!r} needs {request.kind} but {refused}", True)
                record(calls[i], w.step[i], 0.0, ctx)  # type: ignore[arg-type]
    answer_turn(rs, fill(calls, w.step, ctx, interrupted or "interrupted"))
    w.pending, w.step = [], []


def has_tools_that_wait(agent: Agent) -> bool:
    """Some agent of the tree has a tool (or toolset) that may wait for a person."""
    tree = list(agent.walk())
    return any(t.can_wait for a in tree for t in a.tools.values()) or any(
        ts.can_wait for a in tree for ts in a.toolsets
    )


WAITING = Extension(
    name=NAME,
    applies_to=has_tools_that_wait,
    states={SUSPENDED: suspended},
    rows_before={
        (DECIDE, DONE): [
            Row(DECIDE, SUSPENDED, (has_pending_requests, within_suspension_budget), bounded_by="max_suspensions")
        ]
    },
    rows=[cancellable(SUSPENDED), Row(SUSPENDED, DECIDE)],
    waiting=frozenset({SUSPENDED}),
    budgets=[SUSPENSIONS],
    guards={g.__name__: g for g in (has_pending_requests, within_suspension_budget)},
    slice=Waiting,
    hold=hold_step,
    pause=pause,
    resume=check_decisions,
    finish=finish,
)
"""Tools that wait for people: the ``suspended`` state and its rows, as one feature."""
