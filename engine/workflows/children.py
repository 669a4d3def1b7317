"""Running a workflow's children: each as a nested run of the workflow's run, kept in its store.

A child runs as a child of the workflow's run (:mod:`loopwright.runtime.nesting`): it charges
the workflow's budgets as it goes, ends by its deadline and counts toward ``max_depth``. Its
run id is the workflow run's id, a dot and the step's key (``r1.research``, ``r1.critique.2``
for the third round of a loop, ``r1.each.4`` for the fifth item of a map), so with a store
(``Runner(workflow, store=...)``) each child is checkpointed under a name a resume finds:

- a child the store holds as ended is not run again: its output and state writes are read back;
- a child whose worker died (a crash inside step 3) is resumed from its own last checkpoint;
- a child that waits for a person (a confirmation) makes the workflow wait too: its pending
  requests are the workflow's, and the workflow's resume hands each decision to its child.

A resumed child is the workflow's child again (:func:`loopwright.runtime.nesting.rejoin`): it
charges the workflow's budgets, with the room left as its caps. What the workflow holds of its
spend decides what is sent up: all of it for a child that waited (sent when it suspended;
``Flow.had`` records how much, for a child that crashes after its resume), none for a child
resumed from its own checkpoint after a crash, and a child that ended before the crash is read
back with its spend (:func:`~loopwright.runtime.nesting.absorb`).

Without a store a waiting child's state is kept as JSON in the workflow's slice (it round-trips
with the workflow's own ``RunState.to_json``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from ..data.errors import ConfigurationError, ResumeError
from ..data.events import ErrorInfo, LimitReached, PendingRequest, Usage
from ..data.run_state import RunState, register_slice
from ..durable.codec import rebuild
from ..loop.runner import Runner
from ..runtime import nesting
from ..runtime.agent import Agent
from ..runtime.context import RunContext
from ..runtime.nesting import enter_tools, leave_tools, link

NAME = "workflow"
ANSWERED = frozenset({"final", "salvaged"})
"""The outcomes of a child that answered."""


@dataclass(slots=True)
class Flow:
    """A workflow run's slice (``RunState.features["workflow"]``): what its children did."""

    finished: dict[str, dict[str, JsonValue]] = field(default_factory=dict)
    """Children of the step in progress that ended, by key: ``outcome``, ``output``, ``writes``,
    ``error`` (a parallel's branches, a map's items: those finished are not run again)."""
    waiting: dict[str, str] = field(default_factory=dict)
    """Children that wait for people, by key: their saved state (JSON), or "" when the store keeps it."""
    pending: list[PendingRequest] = field(default_factory=list)
    """The requests the waiting children wait for (the workflow's ``RunResult.pending``)."""
    owners: dict[str, str] = field(default_factory=dict)
    """Which child (key) each pending call belongs to."""
    failures: dict[str, str] = field(default_factory=dict)
    """Children that failed under ``on_error="continue"``, by key: why."""
    exit: bool = False
    """A child asked to end the enclosing loop (``exit_loop``), or its ``until`` held."""
    had: dict[str, list[JsonValue]] = field(default_factory=dict)
    """What the workflow holds of each waiting child's spend, by key: its tool calls, usage and
    passes when it suspended (a child that crashes after its resume sends the rest from there)."""
    spent: str | None = None
    """A budget of the tree ran out (a child stopped on it, or could not start): its name. The
    workflow ends ``"limit"`` naming it (:func:`budget_spent_below`)."""

    def pending_requests(self) -> list[PendingRequest]:
        return list(self.pending)


register_slice(NAME, Flow)


def flow_of(rs: RunState) -> Flow:
    found = rs.features.get(NAME)
    if found is None:
        found = rs.features[NAME] = Flow()
    return found


@dataclass(slots=True)
class Ended:
    """How one child run stopped, as a workflow needs it."""

    outcome: str
    output: Any
    state: dict[str, JsonValue]
    error: str | None = None
    pending: list[PendingRequest] = field(default_factory=list)
    saved: str = ""
    """A waiting child's state as JSON (without a store)."""
    spent: list[JsonValue] | None = None
    """A waiting child's tool calls, usage (JSON) and passes (:attr:`Flow.had`)."""
    limit: str | None = None
    """The budget the child stopped on (outcome ``"limit"``), or ``"refused"``: it could not
    start (no room left above)."""

    @property
    def answered(self) -> bool:
        return self.outcome in ANSWERED

    @property
    def text(self) -> str:
        out = self.output
        if out is None:
            return ""
        if isinstance(out, str):
            return out
        dump = getattr(out, "model_dump_json", None)
        return dump() if dump is not None else json.dumps(out, default=str)

    def value(self) -> JsonValue:
        """The output as a state value (a structured output as its JSON form)."""
        out = self.output
        if out is None or type(out) is str or isinstance(out, str | int | float | bool | list | dict):
            return out
        dump = getattr(out, "model_dump", None)
        return dump(mode="json") if dump is not None else str(out)


def _ended_of(rs: RunState) -> Ended:
    pending = [p for part in rs.features.values() if (ask := getattr(part, "pending_requests", None)) for p in ask()]
    why = None
    if rs.error is not None:
        why = rs.error.message
    elif rs.outcome == "limit":
        why = f"out of budget ({rs.limit})"
    return Ended(rs.outcome or "failed", rs.output, dict(rs.state), why, pending, limit=rs.limit)


def writes(before: Mapping[str, JsonValue], after: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The keys a child set or changed (a child starts from a copy of the workflow's state)."""
    return {k: v for k, v in after.items() if k not in before or before[k] != v}


async def run_child(
    runner: Runner, rs: RunState, ctx: RunContext, key: str, task: Any, state: dict[str, JsonValue]
) -> Ended:
    """Run (or go on with) the child ``key`` of the workflow run ``rs`` on ``runner``."""
    flow = rs.features.get(NAME) or flow_of(rs)
    token = enter_tools(link(rs))  # (a resumed child is the workflow's child again: nesting.rejoin)
    try:
        if flow.waiting or ctx.store is not None:  # it may have run before: a resume goes on with it
            found = await _again(runner, rs, ctx, key, flow)
            if found is not None:
                return found
        try:
            result = await runner.run(task, run_id=f"{rs.run_id}.{key}", state=state)
        except ConfigurationError as exc:  # e.g. refused: no room left in the budgets above
            return Ended("failed", None, state, str(exc), limit="refused")
        except Exception as exc:
            return Ended("failed", None, state, str(exc))
    finally:
        leave_tools(token)
    return _of_result(result)


async def _again(runner: Runner, rs: RunState, ctx: RunContext, key: str, flow: Flow) -> Ended | None:
    """The child ``key`` waited (it is handed the decisions for its calls), or the store holds
    it (ended: read back; not ended: resumed); None: it has not run yet."""
    child_id = f"{rs.run_id}.{key}"
    store = ctx.store
    saved_json = flow.waiting.pop(key, None)
    if saved_json is not None:  # it waited: hand it the decisions for its calls
        decisions = {cid: d for cid, d in ctx.decisions.items() if flow.owners.get(cid) == key}
        flow.pending = [p for p in flow.pending if flow.owners.get(p.call_id) != key]
        for cid in [c for c, owner in flow.owners.items() if owner == key]:
            del flow.owners[cid]
        spent = flow.had.pop(key, None)  # (with a store, it may have crashed after a resume: the rest goes up)
        token = nesting.had(None if spent is None or store is None else _had(spent))
        try:
            if store is None:
                return _of_result(await runner.resume(RunState.from_json(saved_json), decisions))
            return await _go_on(runner, store, child_id, decisions)
        finally:
            nesting.had_reset(token)
    if store is not None:
        stored = await store.load(child_id)
        if stored is not None:
            if stored.stage in runner.machine.terminals:  # it ended before the crash: not run again
                child = rebuild(stored)
                nesting.absorb(rs, child)  # (the workflow, back from its checkpoint, holds none of its spend)
                return _ended_of(child)
            token = nesting.had(nesting.NOTHING)  # (nor of this one's, which goes on from its own checkpoint)
            try:
                return await _go_on(runner, store, child_id, None)
            finally:
                nesting.had_reset(token)
    return None


async def _go_on(runner: Runner, store: Any, child_id: str, decisions: Mapping[str, Any] | None) -> Ended:
    """A stored child that did not end: resume a waiting one with its decisions, a crashed one alone."""
    stored = await store.load(child_id)
    if stored is None:
        raise ResumeError(f"the store holds no run {child_id!r}; a workflow's child cannot be resumed")
    if stored.stage in runner.machine.terminals:
        return _ended_of(rebuild(stored))
    if stored.stage in runner.machine.waiting and decisions:
        return _of_result(await runner.resume(child_id, decisions))
    # its worker died: from its last checkpoint; or it waits and the workflow has no decisions
    # for it: a suspension a dead worker claimed goes on with the decisions it claimed (else it
    # waits again, and so does the workflow)
    return _of_result(await runner.resume(child_id))


def _of_result(result: Any) -> Ended:
    why = None
    if result.error is not None:
        why = result.error.message
    elif result.outcome == "limit":
        why = f"out of budget ({result.limit})"
    saved, spent = "", None
    if result.outcome == "suspended":
        child = result.run_state
        saved = child.to_json().decode()
        spent = [child.tool_calls_made, child.usage.model_dump(mode="json"), child.iteration]
    return Ended(result.outcome, result.output, result.state, why, result.pending, saved, spent, result.limit)


def _had(spent: list[JsonValue]) -> nesting.Had:
    calls, usage, passes = spent
    return nesting.Had(int(calls), Usage.model_validate(usage), int(passes))  # type: ignore[arg-type]


def note_waiting(rs: RunState, key: str, ended: Ended, store: Any) -> None:
    """The child ``key`` waits: the workflow waits with it."""
    flow = flow_of(rs)
    flow.waiting[key] = "" if store is not None else ended.saved
    if ended.spent is not None:
        flow.had[key] = ended.spent
    for request in ended.pending:
        flow.pending.append(request)
        flow.owners[request.call_id] = key


def budget_spent_below(rs: RunState) -> bool:
    """A budget of the tree ran out under this workflow (a child stopped on it, or could not
    start): the workflow ends ``"limit"``, naming it."""
    flow = rs.features.get(NAME)
    return flow is not None and flow.spent is not None


def out_of_budget(rs: RunState, ended: Ended, budgets: Any = None) -> str | None:
    """The budget of the tree the child ``ended`` stopped on (None: it stopped on its own, or
    for another reason): one the workflow ``rs`` or a run above it has spent, or the child's
    own ``limit`` where the workflow caps it and its agent does not (a cost or token budget
    the room above lowered)."""
    if ended.limit is None or ended.outcome not in ("limit", "failed"):
        return None
    found = nesting.tree_spent(rs)
    if found is not None:
        return found
    name = ended.limit
    lowered = name in ("max_total_tokens", "max_cost_usd", "max_tool_calls") and getattr(rs.limits, name) is not None
    return name if lowered and (budgets is None or getattr(budgets, name) is None) else None


def spend(rs: RunState, ctx: RunContext, name: str) -> None:
    """The workflow ends ``"limit"`` naming the budget ``name`` (the row ``budget_spent_below``)."""
    flow = flow_of(rs)
    if flow.spent is not None:
        return
    flow.spent = rs.limit = name
    budget = ctx.budgets.get(name)
    used, cap = budget.binding(rs) if budget is not None else (0, 0)
    ctx.emit(LimitReached, limit=name, value=float(cap or 0), used=float(used))


def fail(rs: RunState, message: str) -> None:
    rs.error = ErrorInfo(kind="workflow", message=message)


def runner_for(agent: Agent, store: Any, cache: dict[int, Runner], unverified: bool = False) -> Runner:
    """A runner of ``agent`` over ``store`` (kept: a workflow's steps reuse theirs); ``unverified``:
    the workflow opted in to children on machines ``verify`` rejects."""
    found = cache.get(id(store))
    if found is None or found.store is not store:
        found = cache[id(store)] = Runner(agent, store=store, unverified=unverified)
    return found
