"""A DBOS run's step: one stage's work on the live run of this process, recorded as what it
added (the head, the messages, the events), and the fold of a recorded step back into a state.

A step's record: ``stage``, ``head`` (the run state after the handler, without history and
trace, JSON), ``keep`` (how many messages of the history it kept), ``messages`` (added, JSON),
``events`` (JSON), ``raised`` (or ``stage`` and ``rejected``: decisions refused); every JSON of
it is :mod:`loopwright.durable.codec`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

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
from ..recorded import fold as fold_recorded
from ..recorded import messages_kept, within_deadline
from .registry import CANCEL, DBOS, LIVE, RESULT, STEP, Live


async def _work(handler: Any, rs: RunState, ctx: Any, live: Live | None = None) -> None:
    """A stage's work (a handler may be a plain function), cut short by the run's deadline and,
    with ``live``, by a cancel (:func:`cancel_live`: the run ends ``cancelled``, its calls answered)."""
    waits = handler(rs, ctx)
    if waits is None:
        return
    if live is None:
        await within_deadline(waits, rs)
        return
    live.task, live.in_stage = asyncio.current_task(), True
    try:
        await within_deadline(waits, rs)
    except asyncio.CancelledError:
        task = live.task
        if not live.cancel or task is None or task.uncancel() > 0:
            raise  # not (only) ours: whoever cancelled the task gets it
        rs.cancel_requested = True
    finally:
        live.in_stage = False


def cancel_live(live: Live) -> None:
    """On the run's event loop: cancel it (the handler in progress is interrupted; between
    stages, the next step cancels it). The run state changes only inside steps (recorded)."""
    live.cancel = True
    task = live.task
    if live.in_stage and task is not None and not task.done():
        live.run.state.cancel_requested = True
        task.cancel()


@DBOS.step(name=STEP)
async def stage_step(run_id: str, stage: str, decisions: dict[str, Any] | None) -> dict[str, Any]:
    """One stage's work on the live run of this process. The recorded output is what the stage
    added, so its size does not grow with the run: the state's head (everything but the history
    and the trace), how many messages of the history it kept (all, unless it rewrote the history),
    the messages it added, and the events it emitted. :func:`fold` rebuilds the state from it."""
    live = LIVE[run_id]
    run = live.run
    rs, ctx = run.state, run.ctx
    log = ctx.log
    before = list(rs.messages)
    gates = await _prepare(live, run_id, stage)
    start, at = len(log.entries), (log.stage, log.iteration, log.agent)
    raised: str | None = None
    cancel, rejected = _resume(live, decisions)
    try:
        if rejected is not None:
            live.executed = True
            return {"stage": stage, "rejected": rejected}
        if not cancel or stage in run.machine.waiting:  # (a waiting state's handler settles its calls)
            await _work(run.runner.handler(stage), rs, ctx, live)
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    finally:
        ctx.gates = gates
    if rs.deadline is not None and not rs.deadline_hit and time.time() >= rs.deadline:
        rs.deadline_hit = True
    live.executed = True
    after = rs.messages
    keep = messages_kept(before, after)
    records, _ = log.records(start, at)
    return {
        "stage": stage,
        "head": head_json(rs).decode(),
        "keep": keep,
        "messages": [message_json(m) for m in after[keep:]],
        "events": [event_json(r) for r in records],
        "raised": raised,
    }


async def _prepare(live: Live, run_id: str, stage: str) -> Any:
    """Before a step: rebuild the request (not recorded) for ``reason``. Before the first step of
    a workflow's execution (a recovery, maybe): answer the calls whose results an execution that
    died kept; note a cancel asked before. Returns the run's gates as they were (restored after
    the step)."""
    run = live.run
    rs, ctx = run.state, run.ctx
    if stage == Stage.REASON and rs.request is None:
        attempt = rs.attempt
        await _work(run.runner.handler(Stage.PREPROCESS), rs, ctx)
        rs.attempt = attempt
    gates = ctx.gates
    if live.first:
        live.first = False
        kept = await _kept_results(run_id)
        if kept:
            ctx.gates = (*gates, lambda call, rs, ctx: kept.pop(call.id, None))  # after the features' gates
        live.cancel = live.cancel or await _cancel_asked(run_id)  # (cancelled while queued, or its worker dead)
    return gates


async def _cancel_asked(run_id: str) -> bool:
    found = await asyncio.to_thread(DBOS.list_workflows, workflow_ids=[run_id], load_input=False, load_output=False)
    return bool(found and (found[0].attributes or {}).get(CANCEL))


def _resume(live: Live, decisions: dict[str, Any] | None) -> tuple[bool, str | None]:
    """A waiting run's decisions (or Client.cancel's message) through the features' resume hooks;
    whether the run is cancelled, and why the decisions were refused (None: they were not)."""
    run = live.run
    rs = run.state
    cancel = live.cancel
    if decisions is not None and CANCEL in decisions:  # Client.cancel reached a suspended run
        cancel, decisions = True, {}
    if decisions is not None:
        try:
            for hook in run.machine.hooks("resume"):
                hook(rs=rs, ctx=run.ctx, decisions=decisions_from_message(decisions))
        except ResumeError as exc:
            return cancel, str(exc)
        run.runner.adopt(rs)
        rs.outcome = None
    if cancel:
        rs.cancel_requested = True
    return cancel, None


async def keep_result(call: ToolCall, answered: ToolResult, ctx: Any) -> None:
    """``ctx.on_result``: a call of the step in progress completed; keep its result (a DBOS event
    written from the step) before it counts as done, so a re-run of the step does not run it again."""
    step = DBOS.step_id
    if step is not None:
        await DBOS.set_event_async(f"{RESULT}:{step}:{call.id}", result_text(answered))


async def _kept_results(run_id: str) -> dict[str, ToolResult]:
    """The results kept by an earlier execution of the step in progress (its worker died), by call id."""
    prefix = f"{RESULT}:{DBOS.step_id}:"
    events: dict[str, Any] = await DBOS.get_all_events_async(run_id)
    return {key[len(prefix) :]: load_result(value) for key, value in events.items() if key.startswith(prefix)}


def fold(rs: RunState, out: Mapping[str, Any]) -> RunState:
    """The run state after a recorded step, from the state before it (``rs``): the step's head,
    the messages it kept and those it added; the trace is the workflow's own (transitions are
    taken outside steps)."""
    if "state" in out:  # recorded by loopwright before step outputs were append-only
        return RunState.from_json(out["state"])
    return fold_recorded(rs, out)


def adopt(live: Live, out: dict[str, Any]) -> None:
    """A step's output came from the record: continue from the recorded state."""
    old = live.run
    rs = fold(old.state, out)
    old.runner.adopt(rs)
    run = old.runner.attach(rs)
    run.ctx.on_result = keep_result
    run.ctx.store = old.ctx.store  # (a workflow agent's children's store)
    run.ctx.log = log = old.ctx.log
    for recorded in out["events"]:
        log.add(load_event(recorded))
    live.run = run
