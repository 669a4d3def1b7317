"""Runs on DBOS: each run is a DBOS workflow, each stage a DBOS step (``pip install 'loopwright[dbos]'``).

::

    workflow "loopwright.run" (run id = workflow id)        one process at a time runs it
      while the run is not terminal:
        waiting?  status event "suspended", decisions = recv("decisions")   (durable wait)
        out = step "loopwright.stage"(run_id, stage, decisions)
              │  the stage's handler does the work (model call, tool calls);
              │  its recorded output is what it added: the state's head (no history),
              │  the new messages, its events (the state = the fold of the outputs)
        row = machine.choose(stage, recorded state)      guards read only recorded outputs
        take(row)                                        the same transition on every replay
      status event "finished"; return the RunResult as JSON

A worker that dies mid-run loses only the step in flight: DBOS recovers the workflow on another
worker (or the same one restarted), recorded steps return their outputs without running again,
and the step in flight runs again (its tool calls get the same ``ctx.idempotency_key``,
``run_id:call_id``, the run id being the workflow id). Replaying recorded steps must give the same
transitions: when it does not (a guard that reads the clock, say), the workflow stops with
:class:`ReplayDivergence`; :func:`replay` checks a finished run the same way.

Setup, in every process that runs workflows (a worker) — or use ``loopwright worker``::

    register(my_agent)                        # the agents this process can run, by name
    launch("postgresql://...", queues={"loopwright": 8})

Apps that only enqueue and read results use :class:`Client` (no DBOS launch needed)::

    client = Client("postgresql://...")
    client.enqueue("support", "hello", run_id="r1")
    result = client.result("r1")              # a RunResult, from any process
    client.decide("r1", {"call-1": approve()})  # a suspended run resumes on whichever worker has it

In a launched process, ``await run(agent_name, text)`` runs one to its end and ``start`` /
``result`` start one and wait for it separately.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_json

from ..data.decisions import Approve, Deny
from ..data.errors import ConfigurationError, LoopwrightError, ResumeError
from ..data.events import EVENT_ADAPTER, ErrorInfo, EventBase, Message, ToolCall, ToolResult
from ..data.result import RunResult
from ..data.run_state import RunState
from ..data.stage import Stage
from ..durable.checkpoint import head_json, new_owner, owner_alive
from ..loop.runner import Run, Runner
from ..runtime.agent import Agent
from ..table.machine import Row, abort_row

try:
    from dbos import DBOS, DBOSClient, EnqueueOptions
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("loopwright.dbos_runner needs the dbos package: pip install 'loopwright[dbos]'") from _missing

APP = "loopwright"
"""The DBOS application name of loopwright's workflows and queues."""
QUEUE = "loopwright"
"""The default queue."""
WORKFLOW = "loopwright.run"
STEP = "loopwright.stage"
TOPIC = "decisions"
"""The ``DBOS.send`` topic a suspended run receives its decisions on."""
STATUS = "status"
"""The DBOS event a run sets when it suspends, is refused decisions, or ends."""
CANCEL = "loopwright_cancel"
"""The workflow attribute (and decisions message key) ``Client.cancel`` sets; each worker looks
for it among its runs every ``cancel_poll_s`` and cancels them."""
RESULT = "loopwright.result"
"""Each completed tool call's result is kept, as it completes, in the DBOS event
``loopwright.result:<step id>:<call id>`` (set from inside the step)."""

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_RESULT: TypeAdapter[ToolResult] = TypeAdapter(ToolResult)
_RUNNERS: dict[str, Runner] = {}
"""This process's agents by name (:func:`register`)."""
_LIVE: dict[str, _Live] = {}
"""The runs whose workflow is in progress in this process, by run id."""


class ReplayDivergence(LoopwrightError, RuntimeError):
    """Replaying a run's recorded steps chose a different transition than the run took."""


@dataclass(eq=False)
class _Live:
    run: Run
    executed: bool = False
    """The latest step ran here (else DBOS returned its recorded output)."""
    first: bool = True
    """No step has run yet in this execution of the workflow: the next one to run may be the
    one in flight when a worker died, and finds the results its calls kept."""
    cancel: bool = False
    """``Client.cancel`` asked for this run: its next step (or the one in progress) cancels it."""
    in_stage: bool = False
    """A stage's handler is running (in ``task``, on ``loop``): a cancel interrupts it."""
    task: asyncio.Task[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None


def register(*agents: Agent) -> None:
    """Make ``agents`` runnable by this process's workflows (by name). Call it in every worker
    before :func:`launch`; the same names everywhere."""
    for agent in agents:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"register() takes Agents, got {type(agent).__name__}")
        _RUNNERS[agent.name] = Runner(agent)


def runner_for(name: str) -> Runner:
    runner = _RUNNERS.get(name)
    if runner is None:
        known = ", ".join(sorted(_RUNNERS)) or "none"
        raise ConfigurationError(
            f"no agent named {name!r} is registered in this process (registered: {known}); call "
            "loopwright.dbos_runner.register(agent) in the worker's app module"
        )
    return runner


# ------------------------------------------------------------------ decisions on the wire


def encode_decisions(decisions: Mapping[str, Any]) -> dict[str, Any]:
    """Decisions as a JSON-able message (``approve()``, ``deny(reason)`` or a value)."""
    out: dict[str, Any] = {}
    for call_id, d in decisions.items():
        out[call_id] = d.model_dump() if isinstance(d, Approve | Deny) else {"type": "value", "value": d}
    return out


def decode_decisions(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for call_id, d in data.items():
        kind = d.get("type")
        out[call_id] = (
            Approve() if kind == "approve" else Deny(reason=d.get("reason", "")) if kind == "deny" else d["value"]
        )
    return out


# ------------------------------------------------------------------ the step


def _event_json(record: Any) -> str:
    """One logged event as JSON (a built event, or the plain dict ``EventLog.records`` gives)."""
    return record.model_dump_json() if isinstance(record, EventBase) else to_json(record).decode()


def _kept(before: list[Message], after: list[Message]) -> int:
    """How many messages of ``before`` begin ``after`` (all of them, unless the stage rewrote
    the history: compaction)."""
    n = len(before)
    if len(after) >= n and after[:n] == before:
        return n
    kept = 0
    for old, new in zip(before, after, strict=False):
        if old is not new and old != new:
            break
        kept += 1
    return kept


async def _work(handler: Any, rs: RunState, ctx: Any, live: _Live | None = None) -> None:
    """A stage's work (a handler may be a plain function), cut short by the run's deadline and,
    with ``live``, by a cancel (:func:`_cancel`: the run ends ``cancelled``, its calls answered)."""
    waits = handler(rs, ctx)
    if waits is None:
        return
    if live is None:
        await _within_deadline(waits, rs)
        return
    live.task, live.in_stage = asyncio.current_task(), True
    try:
        await _within_deadline(waits, rs)
    except asyncio.CancelledError:
        task = live.task
        if not live.cancel or task is None or task.uncancel() > 0:
            raise  # not (only) ours: whoever cancelled the task gets it
        rs.cancel_requested = True
    finally:
        live.in_stage = False


async def _within_deadline(waits: Any, rs: RunState) -> None:
    if rs.deadline is None:
        await waits
        return
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + (rs.deadline - time.time())):
            await waits
    except TimeoutError:
        rs.deadline_hit = True


def _cancel(live: _Live) -> None:
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
    the messages it added, and the events it emitted. :func:`_fold` rebuilds the state from it."""
    live = _LIVE[run_id]
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
    keep = _kept(before, after)
    records, _ = log.records(start, at)
    return {
        "stage": stage,
        "head": head_json(rs).decode(),
        "keep": keep,
        "messages": [_MESSAGE.dump_json(m).decode() for m in after[keep:]],
        "events": [_event_json(r) for r in records],
        "raised": raised,
    }


async def _prepare(live: _Live, run_id: str, stage: str) -> Any:
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


def _resume(live: _Live, decisions: dict[str, Any] | None) -> tuple[bool, str | None]:
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
                hook(rs, run.ctx, decode_decisions(decisions))
        except ResumeError as exc:
            return cancel, str(exc)
        run.runner.adopt(rs)
        rs.outcome = None
    if cancel:
        rs.cancel_requested = True
    return cancel, None


async def _keep_result(call: ToolCall, answered: ToolResult, ctx: Any) -> None:
    """``ctx.on_result``: a call of the step in progress completed; keep its result (a DBOS event
    written from the step) before it counts as done, so a re-run of the step does not run it again."""
    step = DBOS.step_id
    if step is not None:
        await DBOS.set_event_async(f"{RESULT}:{step}:{call.id}", _RESULT.dump_json(answered).decode())


async def _kept_results(run_id: str) -> dict[str, ToolResult]:
    """The results kept by an earlier execution of the step in progress (its worker died), by call id."""
    prefix = f"{RESULT}:{DBOS.step_id}:"
    events: dict[str, Any] = await DBOS.get_all_events_async(run_id)
    return {key[len(prefix) :]: _RESULT.validate_json(value) for key, value in events.items() if key.startswith(prefix)}


def _fold(rs: RunState, out: Mapping[str, Any]) -> RunState:
    """The run state after a recorded step, from the state before it (``rs``): the step's head,
    the messages it kept and those it added; the trace is the workflow's own (transitions are
    taken outside steps)."""
    if "state" in out:  # recorded by loopwright before step outputs were append-only
        return RunState.from_json(out["state"])
    keep = out["keep"]
    if keep > len(rs.messages):
        raise ReplayDivergence(
            f"the recorded step {out['stage']!r} kept {keep} messages of a history of {len(rs.messages)}: the "
            "recorded steps do not follow one another (replay them all, in order, from the run's first)"
        )
    new = RunState.from_json(out["head"])
    new.messages = [*rs.messages[:keep], *(_MESSAGE.validate_json(m) for m in out["messages"])]
    new.trace = rs.trace
    return new


def _adopt(live: _Live, out: dict[str, Any]) -> None:
    """A step's output came from the record: continue from the recorded state."""
    old = live.run
    rs = _fold(old.state, out)
    old.runner.adopt(rs)
    run = old.runner.attach(rs)
    run.ctx.on_result = _keep_result
    run.ctx.log = log = old.ctx.log
    for recorded in out["events"]:
        log.add(EVENT_ADAPTER.validate_json(recorded))
    live.run = run


def _row_after(run: Run, stage: str, out: Mapping[str, Any]) -> Row:
    """The transition out of ``stage`` given the step's recorded output (pure: the machine)."""
    if out.get("raised") is not None:
        run.state.error = ErrorInfo(kind="stage", message=f"stage {stage!r} raised {out['raised']}")
        return abort_row(stage)
    return run.choose()


# ------------------------------------------------------------------ the workflow


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(agent: str, input: str, state: dict[str, Any] | None = None) -> str:
    """One run, start to end (suspensions included); returns the RunResult as JSON."""
    run_id = DBOS.workflow_id
    assert run_id is not None
    runner = runner_for(agent)
    live = _LIVE[run_id] = _Live(runner.attach(runner.new_run(input, run_id=run_id, state=state)))
    live.run.ctx.on_result = _keep_result
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
                _adopt(live, out)
            run = live.run
            run.take(_row_after(run, stage, out))
        result = live.run.result
        await DBOS.set_event_async(STATUS, {"outcome": result.outcome, "trace": result.trace})
        return _result_json(result)
    finally:
        _LIVE.pop(run_id, None)


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


def _result_json(result: RunResult) -> str:
    data = json.loads(result.model_dump_json())
    data["run_state"] = result.run_state.to_json().decode()
    return json.dumps(data)


def result_from_json(text: str) -> RunResult:
    """A RunResult from a workflow's output (events included)."""
    data = json.loads(text)
    rs = RunState.from_json(data.pop("run_state"))
    events = data.pop("events", [])
    result = RunResult.model_validate({**data, "run_state": rs})
    result.__dict__["events"] = [EVENT_ADAPTER.validate_python(e) for e in events]
    return result


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
        live = dict(_LIVE)
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
                    one.loop.call_soon_threadsafe(_cancel, one)


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
    return result_from_json(await handle.get_result())


async def result(run_id: str) -> RunResult:
    """The finished run's result (waits for it), in a launched process."""
    handle: Any = await DBOS.retrieve_workflow_async(run_id)
    return result_from_json(await handle.get_result(polling_interval_sec=0.05))


# ------------------------------------------------------------------ from any process


class Client:
    """Enqueue runs, send decisions and read results from any process (no DBOS launch)."""

    def __init__(self, db: str) -> None:
        self.db = db
        write_ahead(db)
        self._client = DBOSClient(system_database_url=db, application_name=APP)

    def enqueue(
        self, agent: str, input: str, *, run_id: str, queue: str = QUEUE, state: dict[str, Any] | None = None
    ) -> str:
        """Enqueue a run of ``agent`` (by name) on ``queue``; a worker that listens to it runs it.
        The same ``run_id`` twice attaches to the first run."""
        if not isinstance(input, str):
            raise ConfigurationError(f"the user input must be a str, got {type(input).__name__}")
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": queue, "workflow_id": run_id}
        self._client.enqueue(options, agent, input, state)
        return run_id

    def status(self, run_id: str, timeout_s: float = 0.0) -> dict[str, Any] | None:
        """The run's latest status event (suspended with its pending requests, or ended)."""
        value: dict[str, Any] | None = self._client.get_event(run_id, STATUS, timeout_seconds=timeout_s)
        return value

    def decide(self, run_id: str, decisions: Mapping[str, Any]) -> None:
        """Send decisions to a suspended run; the worker that holds it resumes it."""
        self._client.send(run_id, encode_decisions(decisions), TOPIC)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run: the stage in progress is interrupted (within the worker's
        ``cancel_poll_s``), or a suspended run stops waiting; the run ends ``cancelled``, every
        call answered, its RunResult readable here as any other. False if it had already ended."""
        found = self._client.list_workflows(workflow_ids=[run_id], load_input=False, load_output=False)
        if not found:
            raise ConfigurationError(f"no run {run_id!r} in {self.db}; the run id is the id it was enqueued with")
        if str(found[0].status).rpartition(".")[2] in ("SUCCESS", "ERROR", "CANCELLED"):
            return False
        self._client.update_workflow_attributes(run_id, {CANCEL: True}, merge=True)
        self._client.send(run_id, {CANCEL: True}, TOPIC)  # a run waiting in recv takes it at once
        return True

    def result(self, run_id: str, poll_s: float = 0.1) -> RunResult:
        """The run's RunResult (waits for it to end, looking every ``poll_s`` seconds)."""
        handle: Any = self._client.retrieve_workflow(run_id)
        return result_from_json(handle.get_result(polling_interval_sec=poll_s))

    def state(self, run_id: str) -> str:
        """The workflow's DBOS status: ENQUEUED, PENDING, SUCCESS, ERROR, ..."""
        return str(self._client.retrieve_workflow(run_id).get_status().status)

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        """The run's recorded stage steps, in order, readable while the run goes on: ``stage``,
        ``head`` (the run state after the handler, without history and trace, JSON), ``keep``
        (messages of the history kept), ``messages`` (added, JSON), ``events`` (JSON), ``raised``
        (or ``stage`` and ``rejected``: decisions refused)."""
        steps = self._client.list_workflow_steps(run_id)
        return [dict(s["output"] or {}) for s in steps if s["function_name"] == STEP]

    def close(self) -> None:
        self._client.destroy()


# ------------------------------------------------------------------ determinism


def replay(steps: Sequence[Mapping[str, Any]], agent: Agent, trace: Sequence[str]) -> list[str]:
    """Replay a run's recorded steps (``Client.steps``) on ``agent``'s machine: each recorded
    state must lead, through the machine's guards, to the stage the next step ran (and the last
    to the run's end, ``trace[-1]``). Returns the replayed trace; ReplayDivergence if it differs."""
    runner = Runner(agent)
    replayed: list[str] = [trace[0]] if trace else []
    rs = RunState(run_id="", agent=agent.name, input="")
    for i, out in enumerate(steps):
        if "rejected" in out:
            continue
        rs = _fold(rs, out)
        rs.trace = list(replayed)
        runner.adopt(rs)
        run = runner.attach(rs)
        row = _row_after(run, out["stage"], out)
        replayed.append(row.dest)
        following = [s for s in steps[i + 1 :] if "rejected" not in s]
        expected = following[0]["stage"] if following else (trace[-1] if trace else row.dest)
        if row.dest != expected:
            raise ReplayDivergence(
                f"replaying step {i} ({out['stage']!r}) chose {row.dest!r} ({row}); the recorded run went to "
                f"{expected!r}: a guard is not a pure function of the recorded run state"
            )
    if list(trace) != replayed:
        raise ReplayDivergence(f"the replayed trace {replayed} differs from the run's trace {list(trace)}")
    return replayed


# ------------------------------------------------------------------ `loopwright worker`


def worker_parser() -> argparse.ArgumentParser:
    worker = argparse.ArgumentParser(
        prog="loopwright worker", description="Run agents' runs from DBOS queues (pip install 'loopwright[dbos]')."
    )
    worker.add_argument("--db", required=True, help="DBOS system database: sqlite:///runs.sqlite or postgresql://...")
    worker.add_argument("--app", required=True, action="append", help="module that registers the agents (repeatable)")
    worker.add_argument("--queue", default=[], action="append", help=f"queue to listen to (default {QUEUE})")
    worker.add_argument("--concurrency", type=int, default=8, help="runs at once on this worker, per queue")
    worker.add_argument("--executor-id", default=None, help="a stable id: restarted, it recovers its own runs")
    worker.add_argument(
        "--lease",
        type=float,
        default=None,
        help="take over another host's runs not updated for this many seconds (default: never; this host's "
        "dead workers are always taken over)",
    )
    return worker


def _cancel_main(argv: Sequence[str]) -> int:
    """``loopwright worker cancel --db URL RUN_ID...``: :meth:`Client.cancel` each run."""
    import sys

    parser = argparse.ArgumentParser(prog="loopwright worker cancel", description="Cancel runs on DBOS.")
    parser.add_argument("--db", required=True, help="DBOS system database: sqlite:///runs.sqlite or postgresql://...")
    parser.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    args = parser.parse_args(argv)
    client = Client(args.db)
    try:
        for run_id in args.run_ids:
            try:
                asked = client.cancel(run_id)
            except ConfigurationError as exc:
                print(f"loopwright worker cancel: {exc}", file=sys.stderr)
                return 2
            print(f"{run_id}: {'cancelling' if asked else 'already ended'}")
    finally:
        client.close()
    return 0


def worker_main(argv: Sequence[str]) -> int:
    """``loopwright worker --db URL --app module``: serve until SIGTERM/SIGINT (``loopwright
    worker cancel --db URL RUN_ID``: cancel runs)."""
    import importlib
    import signal
    import sys

    if list(argv[:1]) == ["cancel"]:
        return _cancel_main(argv[1:])
    args = worker_parser().parse_args(argv)

    if args.concurrency < 1:
        print(f"loopwright worker: --concurrency must be 1 or more, got {args.concurrency}", file=sys.stderr)
        return 2
    for module in args.app:
        try:
            importlib.import_module(module)
        except Exception as exc:  # one line naming the cause (the module's own error included)
            print(f"loopwright worker: cannot import --app {module!r}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    if not _RUNNERS:
        print("loopwright worker: the --app modules registered no agent (call dbos_runner.register)", file=sys.stderr)
        return 2
    queues = {name: args.concurrency for name in (args.queue or [QUEUE])}
    launch(args.db, queues=queues, executor_id=args.executor_id)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"loopwright worker {DBOS.executor_id}: agents {', '.join(sorted(_RUNNERS))}; queues {queues}", flush=True)
    while not stop.wait(0.5):
        try:
            dead = recover_dead(args.lease)
        except Exception as exc:  # a failed look is retried on the next tick
            print(f"loopwright worker: recovering dead workers failed: {exc}", file=sys.stderr, flush=True)
            continue
        if dead:
            print(f"recovered the runs of {', '.join(dead)}", flush=True)
    DBOS.destroy(workflow_completion_timeout_sec=5)
    return 0


__all__ = [
    "APP",
    "QUEUE",
    "Client",
    "ReplayDivergence",
    "launch",
    "recover_dead",
    "register",
    "replay",
    "result",
    "result_from_json",
    "run",
    "run_workflow",
    "start",
]
