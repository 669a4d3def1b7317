"""A Temporal run's activities: each stage's work (``loopwright:reason``: the model call,
``loopwright:act``: the turn's tool calls, ...) on a run state handed in by the workflow, and
what the stage added handed back: the state's head (no history), how many messages of the
history it kept, the messages it added, its events. The workflow folds that into its state
(:func:`fold`) and lets the machine choose the next row.

While a stage runs, its activity heartbeats with the results of the calls that completed, so
that when its worker dies (no heartbeat for ``heartbeat_s``) the workflow schedules the stage
again with them: a completed call is answered from them, not run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from temporalio import activity

from ...data.errors import ResumeError
from ...data.events import ToolCall, ToolResult
from ...data.run_state import RunState
from ...data.stage import Stage
from ...durable.codec import (
    decisions_from_message,
    event_json,
    head_json,
    load_event,
    load_result,
    message_json,
    result_text,
)
from ...loop.runner import Run, Runner
from ..recorded import fold, messages_kept, within_deadline
from .host import Followed, Host
from .names import activity_name, host_for


async def _work(handler: Any, rs: RunState, ctx: Any) -> None:
    """A stage's work (a handler may be a plain function), cut short by the run's deadline."""
    waits = handler(rs, ctx)
    if waits is not None:
        await within_deadline(waits, rs)


def _resume(run: Run, decisions: Mapping[str, Any] | None) -> str | None:
    """A waiting run's decisions through the features' resume hooks; why they were refused (None: taken)."""
    if decisions is None:
        return None
    rs = run.state
    try:
        for hook in run.machine.hooks("resume"):
            hook(rs=rs, ctx=run.ctx, decisions=decisions_from_message(decisions))
    except ResumeError as exc:
        return str(exc)
    run.runner.adopt(rs)
    rs.outcome = None
    return None


async def _beat(every_s: float, results: dict[str, str]) -> None:
    """Heartbeat every ``every_s`` seconds with the results kept so far (also when none are)."""
    while True:
        activity.heartbeat(results)
        await asyncio.sleep(every_s)


def _noting(ran: list[str]) -> Callable[[ToolCall], contextlib.AbstractContextManager[None]]:
    """A tool scope that notes the id of each call that runs (entered as ``Runner``'s tracer's is)."""

    def scope(call: ToolCall) -> contextlib.AbstractContextManager[None]:
        ran.append(call.id)
        return contextlib.nullcontext()

    return scope


def _gate(kept: dict[str, ToolResult]) -> Callable[[ToolCall, RunState, Any], ToolResult | None]:
    """A call whose result an earlier attempt kept is answered with it (after the features' gates)."""

    def kept_result(call: ToolCall, rs: RunState, ctx: Any) -> ToolResult | None:
        return kept.pop(call.id, None)

    return kept_result


def _equip(host: Host, run: Run, stage: str, results: dict[str, str], ran: list[str]) -> None:
    """The stage's context: the children's store, the results an earlier attempt kept (answered
    from them), each completed call's result kept (heartbeats), the calls a resume runs noted."""
    ctx = run.ctx
    if host.has_children and host.store is not None:
        ctx.store = Followed(host.store)
    if results:
        ctx.gates = (*ctx.gates, _gate({k: load_result(v) for k, v in results.items()}))

    async def keep(call: ToolCall, answered: ToolResult, _ctx: Any) -> None:
        results[call.id] = result_text(answered)
        activity.heartbeat(results)

    ctx.on_result = keep
    if stage in run.machine.waiting:  # the calls a resume runs (their spans: legs.py)
        ctx.tool_scopes = (*ctx.tool_scopes, _noting(ran))


async def run_stage(stage: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """One stage's work on the run state ``args["state"]`` (the workflow's, as JSON)."""
    host = host_for(activity.info().task_queue, args["agent"])
    runner = host.runner
    rs = RunState.from_json(args["state"])
    runner.adopt(rs)
    run = runner.attach(rs)
    ctx, log = run.ctx, run.ctx.log
    results: dict[str, str] = dict(args.get("kept") or {})
    ran: list[str] = []
    _equip(host, run, stage, results, ran)
    before = list(rs.messages)
    if stage == Stage.REASON and rs.request is None:  # (the request is not saved: preprocess builds it again)
        attempt = rs.attempt
        await _work(runner.handler(Stage.PREPROCESS), rs, ctx)
        rs.attempt = attempt
    start, at = len(log.entries), (log.stage, log.iteration, log.agent)
    rejected = _resume(run, args.get("decisions"))
    if rejected is not None:
        return {"stage": stage, "rejected": rejected}
    cancel = bool(args.get("cancel"))
    if cancel:
        rs.cancel_requested = True
    raised: str | None = None
    beating = asyncio.ensure_future(_beat(max(0.05, host.heartbeat_s / 3), results))
    try:
        if not cancel or stage in run.machine.waiting:  # (a waiting state's handler settles its calls)
            await _work(runner.handler(stage), rs, ctx)
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    if rs.deadline is not None and not rs.deadline_hit and time.time() >= rs.deadline:
        rs.deadline_hit = True
    keep_n = messages_kept(before, rs.messages)
    records, _ = log.records(start, at)
    return {
        "stage": stage,
        "head": head_json(rs).decode(),
        "keep": keep_n,
        "messages": [message_json(m) for m in rs.messages[keep_n:]],
        "events": [event_json(r) for r in records],
        "raised": raised,
        **({"ran": ran} if ran else {}),
    }


def stage_activities(host: Host) -> list[Callable[..., Any]]:
    """An activity for each working state of ``host``'s machine (``loopwright:<state>``)."""
    machine = host.runner.machine
    return [_activity(stage) for stage in machine.states if stage not in machine.terminals]


def _activity(stage: str) -> Callable[..., Any]:
    async def stage_work(args: dict[str, Any]) -> dict[str, Any]:
        return await run_stage(stage, args)

    stage_work.__name__ = stage_work.__qualname__ = f"stage_{stage}"
    return activity.defn(name=activity_name(stage))(stage_work)


# ------------------------------------------------------------------ the workflow's side


def adopt(runner: Runner, run: Run, out: Mapping[str, Any]) -> Run:
    """The workflow's run after a stage's activity: its state folded, the stage's events added."""
    rs = fold(run.state, out)
    runner.adopt(rs)
    new = runner.attach(rs)
    new.ctx.log = log = run.ctx.log
    for recorded in out["events"]:
        log.add(load_event(recorded))
    return new
