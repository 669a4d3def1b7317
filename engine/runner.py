"""Runner: holds the one loop of the engine.

::

    while run_state.stage is not terminal:               # Run.run_to_end
        await HANDLERS[stage](run_state, ctx)            # Run.step: the stage does the work,
        row = machine.choose(stage, run_state)           #   the table picks the edge
        run_state.stage = row.dest

``run``, ``stream`` and hand-driven runs (``start`` + ``Run.step``) share that one loop;
``run_sync`` wraps ``run``.
Cancellation: ``runner.cancel(run_id)`` interrupts the stage in progress and the run ends in
``cancelled`` and is returned normally. Cancelling the task that runs it also ends the run in
``cancelled`` (events and tool results kept), then re-raises ``CancelledError`` as asyncio
expects. A ``timeout_s`` deadline cuts the stage in progress short and the table ends the run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypedDict, Unpack

from pydantic import JsonValue

from .agent import Agent
from .decisions import Approve, Deny
from .errors import ConfigurationError, MachineError, ResumeError
from .events import ErrorInfo, Event, PendingRequest, RunFinished, RunStarted, StateEntered, Suspended
from .guards import is_final_response
from .log import get_logger, logging_enabled
from .machine import LoopMachine, Row, coverage, machine_for
from .result import RunResult
from .run_state import RunContext, RunState
from .stage import Stage

from loopwright.states import HANDLERS, Handler  # isort: skip
from loopwright.states.act import answer_unrun_calls  # isort: skip
from loopwright.states.salvage import note_limit  # isort: skip

_clock = time.time
_FINISHED = object()


class RunOptions(TypedDict, total=False):
    """Options of a new run (``run``, ``run_sync``, ``stream``, ``start``, ``new_run``)."""

    run_id: str | None
    """The run's id (default: a new uuid); ``runner.cancel(run_id)`` uses it."""
    state: dict[str, JsonValue] | None
    """Session state: instruction placeholders read it, tools read and write it."""
    after: RunResult | None
    """A finished run of this conversation: continue its history and state, with the agent
    that answered last."""
    agent: str | None
    """Which agent of the tree takes this message (default: as ``after`` says, else the root)."""


class Runner:
    """Runs one agent. Many runs may go at once on one Runner (and one machine)."""

    def __init__(self, agent: Agent, *, machine: LoopMachine | None = None) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"Runner takes an Agent, got {type(agent).__name__}")
        self.agent = agent
        self.machine = machine or machine_for(agent)
        self.agents: dict[str, Agent] = {a.name: a for a in agent.root.walk()}
        self._handlers: dict[str, Handler] = {**HANDLERS, **self.machine.handlers}
        for state in self.machine.states:
            if state not in self.machine.terminals and state not in self._handlers:
                rows = [str(r) for r in self.machine.rows if r.dest == state]
                raise MachineError(
                    f"state {state!r} is referenced by rows {rows} but has no handler; pass "
                    f"handlers={{{state!r}: your_async_handler}} to LoopMachine"
                )
        self._active: dict[str, Run] = {}

    # ------------------------------------------------------------------ public API

    def new_run(self, input: str, **options: Unpack[RunOptions]) -> RunState:
        """A fresh run state in the initial state (not yet running); see :class:`RunOptions`."""
        if not isinstance(input, str):
            raise ConfigurationError(f"the user input must be a str, got {type(input).__name__}")
        after = options.get("after")
        active = options.get("agent") or (after.answered_by if after is not None else self.agent.name)
        if active not in self.agents:
            raise ConfigurationError(
                f"no agent named {active!r} in this runner's tree; the agents are: {', '.join(self.agents)}"
            )
        run_id = options.get("run_id") or uuid.uuid4().hex
        if run_id in self._active:
            raise ConfigurationError(f"run id {run_id!r} is already running on this runner; use a new one")
        limits = self.agent.limits
        rs = RunState(
            run_id=run_id,
            agent=self.agent.name,
            limits=limits,
            input=input,
            stage=self.machine.initial,
            state={**(after.state if after is not None else {}), **(options.get("state") or {})},
            trace=[self.machine.initial],
            active_agent=active,
            messages=list(after.messages) if after is not None else [],
        )
        if limits.timeout_s is not None:
            rs.deadline = _clock() + limits.timeout_s
        return rs

    def start(self, input: str, *, sink: Callable[[Event], None] | None = None, **options: Unpack[RunOptions]) -> Run:
        """Begin a run to drive by hand: ``await run.step()`` takes one transition.
        ``sink`` also receives every event as it is emitted."""
        return Run(self, self.new_run(input, **options), sink=sink)

    async def run(self, input: str, **options: Unpack[RunOptions]) -> RunResult:
        """Run the agent on ``input`` until a terminal (or waiting) state; return the result."""
        return await Run(self, self.new_run(input, **options)).run_to_end()

    def run_sync(self, input: str, **options: Unpack[RunOptions]) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, **options))
        raise ConfigurationError("run_sync() cannot be called inside a running event loop; use `await runner.run(...)`")

    def stream(self, input: str, **options: Unpack[RunOptions]) -> RunStream:
        """Events as they happen: ``async for event in runner.stream(text)``. Text deltas
        arrive as ``text_delta`` events from models that stream. ``.result`` holds the
        RunResult once the stream is exhausted. Leaving the loop early cancels the run."""
        return RunStream(self, self.new_run(input, **options))

    async def resume(
        self,
        target: RunResult | RunState,
        decisions: Mapping[str, Any] | None = None,
        *,
        cancel: bool = False,
    ) -> RunResult:
        """Continue a suspended run (a RunResult, or a RunState loaded from JSON in any process).

        ``decisions`` maps pending call ids to ``approve()`` or ``deny("reason")`` (for
        confirmations) or to the value itself (a credential, or a long-running tool's result).
        Approved calls run exactly once; denied ones become error results the model reads;
        calls without a decision stay pending (the run suspends again). ``cancel=True`` ends the
        run in ``cancelled`` instead. A run that is not waiting, or a decision that does not fit
        a pending request, raises :class:`ResumeError` and changes nothing."""
        rs = target.run_state if isinstance(target, RunResult) else target
        if not isinstance(rs, RunState):
            raise ResumeError(f"resume() takes a RunResult or a RunState, got {type(target).__name__}")
        if rs.agent != self.agent.name:
            raise ResumeError(f"run {rs.run_id!r} belongs to agent {rs.agent!r}, not {self.agent.name!r}")
        if rs.stage not in self.machine.waiting:
            raise ResumeError(
                f"run {rs.run_id!r} is not waiting: it is in state {rs.stage!r}; only a suspended run can be resumed"
            )
        if rs.run_id in self._active:
            raise ResumeError(f"run {rs.run_id!r} is already running")
        checked = _check_decisions(rs.pending, decisions or {})
        rs.outcome = None
        if cancel:
            rs.cancel_requested = True
        run = Run(self, rs)
        run.ctx.decisions = checked
        return await run.run_to_end()

    def resume_sync(
        self, target: RunResult | RunState, decisions: Mapping[str, Any] | None = None, *, cancel: bool = False
    ) -> RunResult:
        """``resume`` for code without an event loop."""
        return asyncio.run(self.resume(target, decisions, cancel=cancel))

    def cancel(self, run_id: str) -> bool:
        """Cancel a running run: the stage in progress is interrupted, the run ends in
        ``cancelled`` and ``run`` returns normally. False if no such run is in progress."""
        run = self._active.get(run_id)
        if run is None:
            return False
        rs = run.state
        if not rs.cancel_requested:
            rs.cancel_requested = True
            task = run.task
            if task is not None and not task.done() and task is not _current_task():
                task.cancel()
        return True

    @property
    def active_runs(self) -> list[str]:
        return list(self._active)

    # ------------------------------------------------------------------ internals

    def _log_transition(self, rs: RunState, row: Row) -> None:
        get_logger().info(
            "transition",
            run_id=rs.run_id,
            **{"from": row.source, "to": row.dest},
            iteration=rs.iteration,
            guard=row.label,
            rejected=[str(r) for r in self.machine.rejected_before(row)],
        )


class Run:
    """One run in progress. ``Runner.run`` drives it to the end; apps and tests may drive it
    by hand with :meth:`step` (one stage's work, then one transition) and inspect ``state``
    (the RunState), ``stage``, ``done``, ``events`` and, once done, ``result``."""

    __slots__ = ("_handlers", "_log", "_machine", "_stops", "_terminals", "ctx", "events", "runner", "state", "task")

    def __init__(
        self,
        runner: Runner,
        rs: RunState,
        *,
        sink: Callable[[Event], None] | None = None,
        stream_deltas: bool = False,
    ) -> None:
        self.runner = runner
        self.state = rs
        self.events: list[Event] = []
        if sink is None:
            emit: Callable[[Event], None] = self.events.append
        else:
            keep, forward = self.events.append, sink

            def emit(event: Event) -> None:
                keep(event)
                forward(event)

        self.ctx = RunContext(runner.agent, rs, emit, stream_deltas=stream_deltas, agents=runner.agents)
        self.task: asyncio.Task[Any] | None = None
        self._machine = runner.machine
        self._handlers = runner._handlers
        self._terminals = runner.machine.terminals
        self._stops = runner.machine.terminals | runner.machine.waiting
        self.ctx.can_wait = bool(runner.machine.waiting)
        self._log = logging_enabled()
        runner._active[rs.run_id] = self
        if rs.seq == 0:
            self.ctx.emit(RunStarted, input=rs.input)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def stage(self) -> str:
        return self.state.stage

    @property
    def done(self) -> bool:
        """The run has ended (a terminal state)."""
        return self.state.stage in self._terminals

    @property
    def waiting(self) -> bool:
        """The run is paused in a waiting state until ``Runner.resume``."""
        return self.state.stage in self._machine.waiting

    @property
    def result(self) -> RunResult:
        return RunResult.of(self.state, self.events)

    async def run_to_end(self) -> RunResult:
        """Step until a terminal state (or a waiting one); the result."""
        self.task = asyncio.current_task()
        step = self._step
        stops = self._stops
        await step()  # a resumed run starts in its waiting state: its first step resumes it
        while self.state.stage not in stops:
            await step()
        return RunResult.of(self.state, self.events)

    async def step(self) -> Row | None:
        """Do the current stage's work, then take one transition. Returns the row taken
        (None if the run had already ended). If the task running this is cancelled, the run
        still moves to ``cancelled`` (results kept) before ``CancelledError`` propagates."""
        self.task = asyncio.current_task()
        return await self._step()

    async def _step(self) -> Row | None:
        rs, ctx = self.state, self.ctx
        stage = rs.stage
        if stage in self._terminals:
            return None
        task = self.task
        cancelled_from_outside = False
        try:
            if rs.deadline is None:
                await self._handlers[stage](rs, ctx)
            else:
                await _until_deadline(self._handlers[stage], rs, ctx)
        except asyncio.CancelledError:
            if rs.cancel_requested and task is not None:
                task.uncancel()  # our own runner.cancel(): end normally
            else:
                cancelled_from_outside = True
                rs.cancel_requested = True
        if rs.deadline is not None and not rs.deadline_hit and _clock() >= rs.deadline:
            rs.deadline_hit = True
        try:
            row = self._machine.choose(stage, rs)
        except BaseException:
            self.runner._active.pop(rs.run_id, None)
            raise
        rs.stage = row.dest
        rs.trace.append(row.dest)
        ctx.emit(StateEntered, source=row.source, guard=row.label)
        if self._log:
            self.runner._log_transition(rs, row)
        if coverage.enabled:
            coverage.hit(self._machine, row)
        if row.dest in self._stops:
            if row.dest in self._terminals:
                self._finish()
            else:
                self._pause()
        if cancelled_from_outside:
            raise asyncio.CancelledError
        return row

    def _pause(self) -> None:
        """The run entered a waiting state: stop the clock, open the wait, report the requests."""
        rs, ctx = self.state, self.ctx
        self.runner._active.pop(rs.run_id, None)
        now = _clock()
        rs.suspensions += 1
        if rs.limits.wait_timeout_s is not None:
            rs.wait_deadline = now + rs.limits.wait_timeout_s
        if rs.deadline is not None:
            rs.time_left, rs.deadline = max(0.0, rs.deadline - now), None
        rs.outcome = "suspended"
        ctx.emit(Suspended, pending=tuple(rs.pending), wait_deadline=rs.wait_deadline)

    def _finish(self) -> None:
        rs, ctx = self.state, self.ctx
        self.runner._active.pop(rs.run_id, None)
        terminal = rs.stage
        answer_unrun_calls(rs, ctx, f"the run ended in {terminal!r}")
        if terminal == Stage.CANCELLED:
            rs.outcome = "cancelled"
        elif terminal == Stage.FAILED:
            rs.outcome = "failed"
            if rs.error is None:
                rs.error = rs.model_error or ErrorInfo(kind="failed", message=f"the run failed in {rs.trace[-2]!r}")
        elif rs.salvaged:
            rs.outcome = "salvaged"
            rs.output = rs.text
        elif is_final_response(rs):
            rs.outcome = "final"
            rs.output = rs.text
        else:
            rs.outcome = "limit"
            note_limit(rs, ctx)
        ctx.emit(RunFinished, outcome=rs.outcome, output=rs.output, error=rs.error)
        if logging_enabled():
            get_logger().info(
                "run_finished",
                run_id=rs.run_id,
                agent=rs.agent,
                outcome=rs.outcome,
                iterations=rs.iteration,
                tool_calls=rs.tool_calls_made,
                limit=rs.limit,
                error=rs.error.message if rs.error else None,
            )


def _check_decisions(pending: list[PendingRequest], decisions: Mapping[str, Any]) -> dict[str, Any]:
    """The decisions, if each fits a pending request; else ResumeError (nothing changed)."""
    by_id = {request.call_id: request for request in pending}
    for call_id, decision in decisions.items():
        request = by_id.get(call_id)
        if request is None:
            waiting = ", ".join(f"{r.call_id} ({r.tool}, {r.kind})" for r in pending) or "none"
            raise ResumeError(f"no pending request has call id {call_id!r}; pending: {waiting}")
        if request.kind == "confirmation" and not isinstance(decision, Approve | Deny):
            raise ResumeError(
                f"call {call_id} ({request.tool}) waits for a confirmation: pass approve() or deny('reason')"
            )
        if request.kind != "confirmation" and isinstance(decision, Approve):
            raise ResumeError(
                f"call {call_id} ({request.tool}) waits for a {request.kind}: pass the value itself, or deny('reason')"
            )
    return dict(decisions)


def _current_task() -> asyncio.Task[Any] | None:
    """The running task, or None when called outside an event loop (cancel() may be)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


async def _until_deadline(handler: Handler, rs: RunState, ctx: RunContext) -> None:
    assert rs.deadline is not None
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + (rs.deadline - _clock())):
            await handler(rs, ctx)
    except TimeoutError:
        rs.deadline_hit = True


class RunStream:
    """An async iterator over one run's events; ``result`` once it is exhausted."""

    def __init__(self, runner: Runner, rs: RunState) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.run = Run(runner, rs, sink=self._queue.put_nowait, stream_deltas=True)
        self.run_id = rs.run_id
        self._task: asyncio.Task[RunResult] | None = None
        self._result: RunResult | None = None

    @property
    def result(self) -> RunResult:
        if self._result is None:
            raise RuntimeError("the run has not finished: iterate the stream to its end first")
        return self._result

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        if self._task is not None:
            raise RuntimeError("a RunStream can be iterated once")
        queue = self._queue
        task = self._task = asyncio.create_task(self.run.run_to_end())
        task.add_done_callback(lambda _t: queue.put_nowait(_FINISHED))
        try:
            while (event := await queue.get()) is not _FINISHED:
                yield event
            self._result = await task
        finally:
            if not task.done():  # the consumer left early: end the run cleanly
                self.run.runner.cancel(self.run_id)
                await asyncio.gather(task, return_exceptions=True)
