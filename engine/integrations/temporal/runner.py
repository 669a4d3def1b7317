"""``TemporalRunner``: an agent's runs as Temporal workflows, from the app's side (start, wait,
resume, pause, cancel, query) and the worker's (:meth:`TemporalRunner.worker`)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.service import RPCError
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ...data.errors import ConfigurationError, ResumeError
from ...data.result import RunResult
from ...data.stage import Stage
from ...durable.codec import decisions_message, run_result_from_json
from ...loop.options import new_run_id
from ...runtime.agent import Agent
from ...stores.base import RunStore
from .activities import stage_activities
from .host import DrivenRunner, Host
from .names import DECIDE, HOSTS, PAUSE, QUEUE, RESULT, STATE, WAIT, WORKFLOW, ReplayDivergence, hold, let_go
from .workflow import RunWorkflow

LOCAL = frozenset({Stage.START, Stage.PREPROCESS, Stage.POSTPROCESS, Stage.DECIDE})
"""The core's stages that call no model and no tool: local activities (``reason``, ``act``,
``salvage`` and every feature's own state are activities of their own, seen by any worker)."""


def workflow_runner() -> SandboxedWorkflowRunner:
    """Temporal's sandbox, loopwright passed through (imported once per process, not per run;
    what it runs in the workflow is the machine and the fold of recorded outputs)."""
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("loopwright"))


class TemporalRunner:
    """Runs ``agent`` on Temporal: each run a workflow on ``task_queue`` (the run id its id),
    each stage's work an activity. Make one in the app (to start runs) and in each worker
    process (``async with runner.worker():``), with the same agent.

    ``deps``: the runs' dependencies in this worker (never saved). ``store``: where a workflow
    agent's children are checkpointed (a worker lost mid-stage then goes on from them).
    ``heartbeat_s``: a stage's worker is taken for dead after this long without a heartbeat.
    ``observers``: watch this worker's runs as ``Runner(agent, observers=...)`` does; OpenTelemetry's
    ``Tracing`` (here or ``instrument()``-ed) gets each leg of a run once, when it stops."""

    def __init__(
        self,
        agent: Agent,
        *,
        client: Client,
        task_queue: str = QUEUE,
        deps: Any = None,
        store: RunStore | None = None,
        heartbeat_s: float = 10.0,
        activity_timeout_s: float = 3600.0,
        observers: Sequence[object] = (),
        unverified: bool = False,
    ) -> None:
        if not isinstance(client, Client):
            raise ConfigurationError(
                f"client= takes a temporalio.client.Client, got {type(client).__name__}: "
                "client=await Client.connect('localhost:7233')"
            )
        if heartbeat_s <= 0:
            raise ConfigurationError(f"heartbeat_s must be more than 0 seconds, got {heartbeat_s}")
        runner = DrivenRunner(agent, observers=observers, unverified=unverified)
        runner.deps = deps
        self.agent = agent
        self.client = client
        self.task_queue = task_queue
        local = frozenset(LOCAL & set(runner.machine.states)) - runner.machine.waiting
        self.host = Host(
            runner, heartbeat_s=heartbeat_s, activity_timeout_s=activity_timeout_s, store=store, local=local
        )

    # ------------------------------------------------------------------ the worker

    def worker(self, **options: Any) -> Worker:
        """A Temporal Worker for this agent's workflow and activities (``async with`` it, or
        ``await worker.run()``); ``options`` go to :class:`temporalio.worker.Worker`. One
        process runs one agent of a name on a task queue: a worker of another TemporalRunner for
        an agent of the same name on the same queue, not stopped yet, is a ConfigurationError."""
        hold(self.task_queue, self.agent.name, self.host)
        return _Worker(
            (self.task_queue, self.agent.name, self.host),
            self.client,
            task_queue=self.task_queue,
            workflows=[RunWorkflow],
            activities=stage_activities(self.host),
            workflow_runner=workflow_runner(),
            workflow_failure_exception_types=[ConfigurationError],  # (an agent this worker lacks: the run fails)
            **options,
        )

    # ------------------------------------------------------------------ runs

    async def start(self, input: str, *, run_id: str | None = None, state: Mapping[str, Any] | None = None) -> str:
        """Start a run (a workflow with id ``run_id``; default: a new id); returns the run id. A
        run id that ran before is refused (ConfigurationError): run ids name one run."""
        run_id = run_id or new_run_id()
        if not isinstance(input, str):
            raise ConfigurationError(f"the user input must be a str, got {type(input).__name__}")
        args = {"agent": self.agent.name, "input": input, "state": dict(state) if state else None}
        try:
            await self.client.start_workflow(
                WORKFLOW,
                args,
                id=run_id,
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except Exception as exc:
            if type(exc).__name__ == "WorkflowAlreadyStartedError":
                raise ConfigurationError(
                    f"run id {run_id!r} has been used on this Temporal namespace; use a new one"
                ) from exc
            raise
        return run_id

    async def run(self, input: str, *, run_id: str | None = None, state: Mapping[str, Any] | None = None) -> RunResult:
        """Run the agent on ``input`` until it ends or waits (suspended: :meth:`resume` it); its RunResult."""
        run_id = await self.start(input, run_id=run_id, state=state)
        return await self.result(run_id)

    async def result(self, run_id: str) -> RunResult:
        """The run's result once it stops (ended, suspended or paused), from any process."""
        handle = self._handle(run_id)
        stopped = asyncio.ensure_future(handle.execute_update(WAIT, result_type=str))
        ended = asyncio.ensure_future(self._ended(handle))  # (a run that fails never answers the update)
        try:
            await asyncio.wait({stopped, ended}, return_when=asyncio.FIRST_COMPLETED)
            if stopped.done() and stopped.exception() is None:
                return run_result_from_json(stopped.result())
            return await ended
        finally:
            for waiting in (stopped, ended):
                if not waiting.done():
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):  # (its own error: not ours)
                        await waiting

    async def resume(self, run_id: str, decisions: Mapping[str, Any] | None = None) -> RunResult:
        """Hand a suspended run its ``decisions`` (``{call_id: approve()}``...), or let a paused
        run go on (no decisions); its result at its next stop. A run that is not waiting (ended,
        running, or resumed already) raises :class:`~loopwright.ResumeError`, as do decisions
        that do not fit its pending requests."""
        handle = self._handle(run_id)
        try:
            text = await handle.execute_update(DECIDE, decisions_message(decisions or {}), result_type=str)
        except WorkflowUpdateFailedError as exc:
            raise ResumeError(str(exc.cause or exc)) from exc
        except RPCError as exc:
            raise ResumeError(f"run {run_id!r} is not waiting: {exc}") from exc
        return run_result_from_json(text)

    async def pause(self, run_id: str) -> None:
        """Pause the run at its next transition (its result then says ``paused``); ``resume(run_id)`` goes on."""
        await self._handle(run_id).signal(PAUSE)

    async def cancel(self, run_id: str) -> None:
        """Cancel the run (Temporal's cancel): the stage in progress is cut short, the run ends
        ``cancelled``, every call answered; its RunResult is read as any other."""
        await self._handle(run_id).cancel()

    async def state(self, run_id: str) -> dict[str, Any]:
        """The run's state and its place in the machine (a query): ``stage``, ``outcome``,
        ``trace``, ``pending``, ``stopped``, ``paused``."""
        found: dict[str, Any] = await self._handle(run_id).query(STATE)
        return found

    def _handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(run_id)

    async def _ended(self, handle: WorkflowHandle[Any, Any]) -> RunResult:
        try:
            return run_result_from_json(await handle.result())
        except WorkflowFailureError as exc:
            described = await handle.describe()
            if described.status == WorkflowExecutionStatus.CANCELED:
                raise ResumeError(f"run {handle.id!r} was cancelled before it started") from exc
            raise

    # ------------------------------------------------------------------ determinism

    async def replay(self, run_id: str) -> None:
        """Replay the finished run's recorded history with this agent's current machine
        (Temporal's Replayer): ReplayDivergence, naming what differs, when it does not follow."""
        history = await self._handle(run_id).fetch_history()
        await self.replay_history(history)

    async def replay_history(self, history: Any) -> None:
        """:meth:`replay` of a history already fetched (``WorkflowHistory``, maybe from JSON)."""
        build = f"loopwright-{new_run_id()}"
        key = (f"replay-{build}", self.agent.name)  # (the queue Temporal's Replayer runs it on)
        HOSTS[key] = self.host
        try:
            replayer = Replayer(workflows=[RunWorkflow], workflow_runner=workflow_runner(), build_id=build)
            found = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        finally:
            del HOSTS[key]
        if found.replay_failure is not None:
            said = str(found.replay_failure)
            raise ReplayDivergence(self._diverged(history, said)) from found.replay_failure

    def _diverged(self, history: Any, failure: str) -> str:
        """Why a replay failed, the states named (activity ids are ``<transitions>.<state>``)."""
        core = re.search(r"Nondeterminism error: ([^\"]*)", failure)
        said = core.group(1) if core else failure
        where = re.search(r"'(\d+)\.([^'.]+)[^']*' does not match [^']*'(\d+)\.([^'.]+)", said)
        if where:
            states = (
                f"after {where.group(1)} states the recorded run went to state {where.group(2)!r}, where the "
                f"machine now chooses {where.group(4)!r}; "
            )
        else:
            recorded = _recorded_stage(history, said)
            states = (
                f"after {recorded[0]} states the recorded run went to state {recorded[1]!r}, which the machine "
                "no longer chooses there; "
                if recorded
                else ""
            )
        return (
            f"run {history.workflow_id!r} does not replay on agent {self.agent.name!r}'s machine "
            f"{self.host.runner.machine.name!r}: {states}{said}. Runs recorded on the old machine must finish on "
            "workers that still run it (a new task queue for the new machine), or be reset"
        )


async def read_result(client: Client, run_id: str) -> RunResult:
    """Run ``run_id``'s RunResult as it stands, read from Temporal alone (no agent needed): the
    workflow's result once it has ended (from its history: no worker needed), else the run so far
    (the ``loopwright:result`` query, answered by a worker). What ``loopwright trace RUN_ID
    --temporal HOST:PORT`` draws. A run id Temporal does not know, or a run that failed outside the
    machine (an agent its worker lacks), is a ConfigurationError saying so."""
    handle = client.get_workflow_handle(run_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        raise ConfigurationError(f"Temporal knows no run {run_id!r} on this namespace ({exc})") from exc
    status = described.status
    try:
        if status == WorkflowExecutionStatus.COMPLETED:
            return run_result_from_json(await handle.result())
        if status == WorkflowExecutionStatus.RUNNING:
            return run_result_from_json(await handle.query(RESULT, result_type=str))
    except (WorkflowFailureError, RPCError) as exc:
        raise ConfigurationError(f"run {run_id!r} has no result to read: {exc}") from exc
    said = status.name.lower() if status is not None else "unknown"
    raise ConfigurationError(
        f"run {run_id!r}'s workflow is {said}: it ended outside the machine (no RunResult); its history says why "
        f"(temporal workflow show --workflow-id {run_id})"
    )


class _Worker(Worker):
    """A Temporal Worker that frees its agent's name on its queue in this process when it stops."""

    def __init__(self, held: tuple[str, str, Host], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = held

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            let_go(*self._held)


def _recorded_stage(history: Any, said: str) -> tuple[str, str] | None:
    """The recorded stage of the history event a replay failure names (``HistoryEvent(id: N``)."""
    found = re.search(r"HistoryEvent\(id: (\d+)", said)
    if found is None:
        return None
    event_id = int(found.group(1))
    for event in history.events:
        if event.event_id == event_id and event.HasField("activity_task_scheduled_event_attributes"):
            n, _, stage = event.activity_task_scheduled_event_attributes.activity_id.partition(".")
            return n, stage.partition(".")[0]
    return None
