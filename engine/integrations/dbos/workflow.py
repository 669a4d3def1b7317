"""A DBOS run's workflow (one run, start to end, suspensions included) and the process that
runs workflows: :func:`launch`, cancels watched, dead workers' runs recovered, and
:func:`start`, :func:`run`, :func:`result` in a launched process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from ...data.result import RunResult
from ...durable.codec import run_result_from_json, run_result_json
from ...durable.ownership import new_owner, owner_alive
from ...loop.runner import Run
from ..recorded import row_after
from .children import DB, children_store, has_children
from .registry import (
    APP,
    CANCEL,
    DBOS,
    LIVE,
    QUEUE,
    STATUS,
    TOPIC,
    WORKFLOW,
    Live,
    ReplayDivergence,
    runner_for,
)
from .step import adopt, cancel_live, keep_result, stage_step


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(agent: str, input: str, state: dict[str, Any] | None = None) -> str:
    """One run, start to end (suspensions included); returns the RunResult as JSON."""
    run_id = DBOS.workflow_id
    assert run_id is not None
    runner = runner_for(agent)
    await runner.open_toolsets()  # (MCP servers: opened once per runner, their tools listed; not a step)
    live = LIVE[run_id] = Live(runner.attach(runner.new_run(input, run_id=run_id, state=state)))
    live.run.ctx.on_result = keep_result
    if has_children(runner):  # a workflow agent: its children are checkpointed beside DBOS's tables
        live.run.ctx.store = await children_store()
    live.loop = asyncio.get_running_loop()
    try:
        decisions: dict[str, Any] | None = None
        rejected: str | None = None
        while True:
            run = live.run
            stage = run.state.stage
            if stage in run.machine.terminals:
                break  # (had the recorded run gone on, DBOS refuses the set_event below: DBOSUnexpectedStepError)
            if stage in run.machine.waiting and decisions is None:
                decisions = await _wait(run, rejected)
                continue
            live.executed = False
            out = await stage_step(run_id, stage, decisions)
            decisions = None
            if out["stage"] != stage:
                raise ReplayDivergence(
                    f"run {run_id}: the machine chose state {stage!r} where the recorded run had {out['stage']!r}; "
                    "a guard or a stage outside the recorded steps is not deterministic (a clock, a random "
                    "number, an outside read): keep guards pure, do such reads inside a stage"
                )
            rejected = out.get("rejected")
            if rejected is not None:
                continue
            if not live.executed:
                adopt(live, out)
            run = live.run
            run.take(row_after(run, stage, out))
        result = live.run.result
        await DBOS.set_event_async(STATUS, {"outcome": result.outcome, "trace": result.trace})
        return run_result_json(result)
    finally:
        LIVE.pop(run_id, None)


async def _wait(run: Run, rejected: str | None) -> dict[str, Any]:
    """A suspended run: say so (with why the latest decisions were refused, if they were), then
    wait durably for decisions (``Client.decide``); past the agent's ``wait_timeout_s`` the run
    goes on without them (its calls are denied, timed out)."""
    pending = [p.model_dump(mode="json") for p in run.result.pending]
    status: dict[str, Any] = {"outcome": "suspended", "seq": run.state.seq, "pending": pending}
    if rejected is not None:
        status["rejected"] = rejected
    await DBOS.set_event_async(STATUS, status)
    timeout = run.state.limits.wait_timeout_s
    while True:
        message = await DBOS.recv_async(TOPIC, timeout_seconds=timeout if timeout is not None else 3600.0)
        if message is not None:
            return dict(message)
        if timeout is not None:
            return {}


# ------------------------------------------------------------------ in a launched process


def launch(
    db: str,
    *,
    queues: Mapping[str, int] | None = None,
    executor_id: str | None = None,
    polling_interval_s: float = 0.1,
    cancel_poll_s: float = 0.25,
    **config: Any,
) -> None:
    """Start DBOS in this process on ``db`` (``sqlite:///path`` or ``postgresql://...``) and
    listen to ``queues`` (name -> this worker's concurrency; default ``{"loopwright": 8}``).
    Workflows of a worker that died on this host are recovered here (see :func:`recover_dead`).
    Every ``cancel_poll_s`` seconds the process looks for cancels (``Client.cancel``) of its runs."""
    queues = dict(queues) if queues is not None else {QUEUE: 8}
    write_ahead(db)
    DB[:] = [db]
    DBOS(
        config={
            "name": APP,
            "system_database_url": db,
            "executor_id": executor_id or new_owner(),
            "notification_listener_polling_interval_sec": 0.05,
            "log_level": "WARNING",
            **config,  # type: ignore[typeddict-item]
        }
    )
    DBOS.listen_queues(list(queues))
    DBOS.launch()
    for name, concurrency in queues.items():
        DBOS.register_queue(
            name, worker_concurrency=concurrency, polling_interval_sec=polling_interval_s, on_conflict="always_update"
        )
    if not _WATCHING:
        watcher = threading.Thread(target=_watch_cancels, args=(cancel_poll_s,), name="loopwright-cancels", daemon=True)
        watcher.start()
        _WATCHING.append(watcher)


_WATCHING: list[threading.Thread] = []


def _watch_cancels(every_s: float) -> None:
    """A daemon thread of each launched process: every ``every_s`` seconds, one query for the
    runs in progress here that ``Client.cancel`` asked to cancel; each is cancelled on its loop."""
    while True:
        time.sleep(every_s)
        live = dict(LIVE)
        if not live:
            continue
        try:
            found = DBOS.list_workflows(workflow_ids=list(live), load_input=False, load_output=False)
        except Exception:  # DBOS destroyed, or the database away for a moment: look again later
            continue
        for wf in found:  # (DBOS filters by attributes on PostgreSQL only)
            one = live.get(wf.workflow_id) if (wf.attributes or {}).get(CANCEL) else None
            if one is not None and not one.cancel and one.loop is not None:
                with contextlib.suppress(RuntimeError):  # its loop has closed
                    one.loop.call_soon_threadsafe(cancel_live, one)


def write_ahead(db: str) -> None:
    """Put a SQLite system database in WAL mode (kept in the file): a commit is one append to the
    log instead of a rollback journal written, synced and deleted, and readers do not block the
    writer — DBOS on SQLite runs 2-3x as many runs/s here. Workers must share the file on one
    host (WAL needs shared memory: not on a network file system). Not SQLite: nothing to do."""
    if not db.startswith("sqlite:///"):
        return
    import sqlite3

    path = db.removeprefix("sqlite:///").partition("?")[0]
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def recover_dead(lease_s: float | None = None) -> list[str]:
    """Hand the pending workflows of workers that died to the queues (any live worker takes
    them). A worker on this host is dead when its process is gone. Workers on other hosts are
    left alone unless ``lease_s`` is given: then one whose runs were not updated for
    ``lease_s`` seconds counts as dead (DBOS does not heartbeat: choose it longer than your
    longest step and wait). Returns the executor ids taken over."""
    pending = DBOS.list_workflows(status="PENDING", load_input=False, load_output=False)
    me = DBOS.executor_id
    here = new_owner().partition("|")[0]
    dead: set[str] = set()
    for wf in pending:
        owner = wf.executor_id
        if not owner or owner == me or owner in dead or owner.count("|") != 2:
            continue  # not a loopwright worker's id (host|pid|token): leave it to its owner
        if owner.partition("|")[0] != here and lease_s is None:
            continue
        updated = (wf.updated_at or 0) / 1000
        if not owner_alive(owner, updated, lease_s if lease_s is not None else float("inf")):
            dead.add(owner)
    if dead:
        DBOS._recover_pending_workflows(sorted(dead))
    return sorted(dead)


async def start(agent: str, input: str, *, run_id: str | None = None, state: dict[str, Any] | None = None) -> str:
    """Start a run as a workflow in this (launched) process; returns the run id."""
    from dbos import SetWorkflowID

    runner_for(agent)
    with SetWorkflowID(run_id) if run_id else contextlib.nullcontext():
        handle: Any = await DBOS.start_workflow_async(run_workflow, agent, input, state)
    return str(handle.get_workflow_id())


async def run(agent: str, input: str, *, run_id: str | None = None, state: dict[str, Any] | None = None) -> RunResult:
    """Run ``agent`` on ``input`` as a workflow in this (launched) process; its RunResult."""
    from dbos import SetWorkflowID

    runner_for(agent)
    with SetWorkflowID(run_id) if run_id else contextlib.nullcontext():
        handle: Any = await DBOS.start_workflow_async(run_workflow, agent, input, state)
    return run_result_from_json(await handle.get_result())


async def result(run_id: str) -> RunResult:
    """The finished run's result (waits for it), in a launched process."""
    handle: Any = await DBOS.retrieve_workflow_async(run_id)
    return run_result_from_json(await handle.get_result(polling_interval_sec=0.05))
