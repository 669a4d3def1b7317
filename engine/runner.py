"""Runner: holds the one loop of the engine.

::

    stage = start
    while stage is not terminal:
        await HANDLERS[stage](run_state, ctx)      # the stage does the work
        row = machine.choose(stage, run_state)     # the table picks the edge
        stage = row.dest

``run`` and ``stream`` share that loop (``_drive``); ``run_sync`` wraps ``run``.
Cancellation: ``runner.cancel(run_id)`` interrupts the stage in progress and the run ends in
``cancelled`` and is returned normally. Cancelling the task that runs it also ends the run in
``cancelled`` (events and tool results kept), then re-raises ``CancelledError`` as asyncio
expects. A ``timeout_s`` deadline cuts the stage in progress short and the table ends the run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import JsonValue

from .agent import Agent
from .errors import ConfigurationError, MachineError
from .events import ErrorInfo, Event, RunFinished, RunStarted, StateEntered
from .guards import is_final_response
from .log import get_logger, logging_enabled
from .machine import DEFAULT_MACHINE, LoopMachine, Row, coverage
from .result import RunResult
from .run_state import RunContext, RunState
from .stage import Stage

from loopwright.states import HANDLERS, Handler  # isort: skip
from loopwright.states.salvage import note_limit  # isort: skip

_clock = time.time
_FINISHED = object()


class Runner:
    """Runs one agent. Many runs may go at once on one Runner (and one machine)."""

    def __init__(self, agent: Agent, *, machine: LoopMachine | None = None) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"Runner takes an Agent, got {type(agent).__name__}")
        self.agent = agent
        self.machine = machine or agent.machine or DEFAULT_MACHINE
        self._handlers: dict[str, Handler] = {**HANDLERS, **self.machine.handlers}
        for state in self.machine.states:
            if state not in self.machine.terminals and state not in self._handlers:
                rows = [str(r) for r in self.machine.rows if r.dest == state]
                raise MachineError(
                    f"state {state!r} is referenced by rows {rows} but has no handler; pass "
                    f"handlers={{{state!r}: your_async_handler}} to LoopMachine"
                )
        self._active: dict[str, tuple[RunState, asyncio.Task[Any] | None]] = {}

    # ------------------------------------------------------------------ public API

    def new_run(self, input: str, *, run_id: str | None = None, state: dict[str, JsonValue] | None = None) -> RunState:
        """A fresh run state in ``start`` (not yet running)."""
        if not isinstance(input, str):
            raise ConfigurationError(f"the user input must be a str, got {type(input).__name__}")
        run_id = run_id or uuid.uuid4().hex
        if run_id in self._active:
            raise ConfigurationError(f"run id {run_id!r} is already running on this runner; use a new one")
        limits = self.agent.limits
        rs = RunState(
            run_id=run_id,
            agent=self.agent.name,
            limits=limits,
            input=input,
            stage=self.machine.initial,
            state=dict(state or {}),
            trace=[self.machine.initial],
        )
        if limits.timeout_s is not None:
            rs.deadline = _clock() + limits.timeout_s
        return rs

    async def run(
        self, input: str, *, run_id: str | None = None, state: dict[str, JsonValue] | None = None
    ) -> RunResult:
        """Run the agent on ``input`` until a terminal state; return the result."""
        rs = self.new_run(input, run_id=run_id, state=state)
        events: list[Event] = []
        await self._drive(rs, RunContext(self.agent, rs, events.append))
        return RunResult.of(rs, events)

    def run_sync(
        self, input: str, *, run_id: str | None = None, state: dict[str, JsonValue] | None = None
    ) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, run_id=run_id, state=state))
        raise ConfigurationError("run_sync() cannot be called inside a running event loop; use `await runner.run(...)`")

    def stream(
        self, input: str, *, run_id: str | None = None, state: dict[str, JsonValue] | None = None
    ) -> RunStream:
        """Events as they happen: ``async for event in runner.stream(text)``. Text deltas
        arrive as ``text_delta`` events from models that stream. ``.result`` holds the
        RunResult once the stream is exhausted. Leaving the loop early cancels the run."""
        rs = self.new_run(input, run_id=run_id, state=state)
        return RunStream(self, rs)

    def cancel(self, run_id: str) -> bool:
        """Cancel a running run: it ends in ``cancelled`` and ``run`` returns normally.
        Returns False if no such run is in progress."""
        entry = self._active.get(run_id)
        if entry is None:
            return False
        rs, task = entry
        if rs.cancel_requested:
            return True
        rs.cancel_requested = True
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        return True

    @property
    def active_runs(self) -> list[str]:
        return list(self._active)

    # ------------------------------------------------------------------ the loop

    async def _drive(self, rs: RunState, ctx: RunContext) -> None:
        task = asyncio.current_task()
        self._active[rs.run_id] = (rs, task)
        machine, handlers, terminals = self.machine, self._handlers, self.machine.terminals
        log = logging_enabled()
        record = coverage.enabled
        cancelled_from_outside = False
        if rs.seq == 0:
            ctx.emit(RunStarted, agent=rs.agent, input=rs.input)
        stage = rs.stage
        try:
            while stage not in terminals:
                try:
                    if rs.deadline is None:
                        await handlers[stage](rs, ctx)
                    else:
                        await self._until_deadline(handlers[stage], rs, ctx)
                except asyncio.CancelledError:
                    if rs.cancel_requested and task is not None:
                        task.uncancel()  # our own runner.cancel(): end normally
                    else:
                        cancelled_from_outside = True
                        rs.cancel_requested = True
                if rs.deadline is not None and not rs.deadline_hit and _clock() >= rs.deadline:
                    rs.deadline_hit = True
                row = machine.choose(stage, rs)
                stage = rs.stage = row.dest
                rs.trace.append(stage)
                ctx.emit(StateEntered, source=row.source, guard=row.label)
                if log:
                    self._log_transition(rs, row)
                if record:
                    coverage.hit(machine, row)
            self._finish(rs, ctx)
        finally:
            self._active.pop(rs.run_id, None)
        if cancelled_from_outside:
            raise asyncio.CancelledError

    async def _until_deadline(self, handler: Handler, rs: RunState, ctx: RunContext) -> None:
        assert rs.deadline is not None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + (rs.deadline - _clock())):
                await handler(rs, ctx)
        except TimeoutError:
            rs.deadline_hit = True

    def _finish(self, rs: RunState, ctx: RunContext) -> None:
        terminal = rs.stage
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

    def _log_transition(self, rs: RunState, row: Row) -> None:
        get_logger().info(
            "transition",
            run_id=rs.run_id,
            **{"from": row.source, "to": row.dest},
            iteration=rs.iteration,
            guard=row.label,
            rejected=[str(r) for r in self.machine.rejected_before(row)],
        )


class RunStream:
    """An async iterator over one run's events; ``result`` once it is exhausted."""

    def __init__(self, runner: Runner, rs: RunState) -> None:
        self._runner = runner
        self.run_state = rs
        self.run_id = rs.run_id
        self._events: list[Event] = []
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._result: RunResult | None = None

    def _sink(self, event: Event) -> None:
        self._events.append(event)
        self._queue.put_nowait(event)

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
        ctx = RunContext(self._runner.agent, self.run_state, self._sink, stream_deltas=True)
        self._task = asyncio.create_task(self._runner._drive(self.run_state, ctx))
        self._task.add_done_callback(lambda _t: self._queue.put_nowait(_FINISHED))
        try:
            while (event := await self._queue.get()) is not _FINISHED:
                yield event
            await self._task
            self._result = RunResult.of(self.run_state, self._events)
        finally:
            if not self._task.done():  # the consumer left early: end the run cleanly
                self._runner.cancel(self.run_id)
                await asyncio.gather(self._task, return_exceptions=True)
