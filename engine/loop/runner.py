"""Runner: holds the one loop of the engine.

::

    while run_state.stage is not terminal:               # Run.run_to_end
        HANDLERS[stage](run_state, ctx)                  # Run.step: the stage does the work,
        row = machine.choose(stage, run_state)           #   the table picks the edge
        machine.charge(row, run_state)                   #   a bounded row is charged to its budget
        run_state.stage = row.dest

``run``, ``stream`` and hand-driven runs (``start`` + ``Run.step``) share that one loop;
``run_sync`` wraps ``run``. The outcome of a run is the outcome of the terminal row it took.

Between transitions the loop lets the event loop run whenever anything else is ready (another
task, a due timer) and at least every millisecond, so ``cancel``, ``timeout_s`` and other tasks
land within one transition even when the model and the tools never suspend.

Cancellation: ``runner.cancel(run_id)`` interrupts the stage in progress and the run ends in
``cancelled`` and is returned normally. Cancelling the task that runs it also ends the run in
``cancelled`` (events and tool results kept), then re-raises ``CancelledError`` as asyncio
expects. A ``timeout_s`` deadline cuts the stage in progress short and the table ends the run.
A stage or a guard that raises ends the run in ``failed`` with the error named (the engine's
abort edge, ``state -> failed (raised)``); every tool call is still answered.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from pydantic import JsonValue

from ..data.errors import ConfigurationError, MachineError, NoTransitionError, ResumeError
from ..data.events import ErrorInfo, LimitReached, Paused, Resumed, RunFinished, RunStarted
from ..data.inputs import UserInput, user_input
from ..data.result import RunResult, copy_state
from ..data.run_state import RunState
from ..data.stage import Stage
from ..features import machine_for
from ..runtime import nesting
from ..runtime.agent import Agent, AgentTree
from ..runtime.calls import ANSWERED, answer_unrun_calls
from ..runtime.context import RunContext
from ..runtime.observers import INSTRUMENTS, EventSink, Observers
from ..table.budgets import TURN_BUDGETS, start_turn
from ..table.machine import LoopMachine, Row, abort_row

from loopwright.states import HANDLERS, Handler  # isort: skip

_clock = time.time
_perf = time.perf_counter
_monotonic = time.monotonic
_BASE_TIME = asyncio.BaseEventLoop.time
_FINISHED = object()
_OTHER_LOOP = object()
_SLICE_S = 0.001
"""A run that never suspends still lets the event loop run at least this often (seconds)."""
_HOLD = 4
"""A run goes on for at most this many more stages while another task waits (ready, or a timer
due), then lets it run: a waiting task runs within one loop iteration (five stages) of this run."""


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


_OPTIONS = frozenset(RunOptions.__annotations__)
_OPTION_NAMES = ", ".join(RunOptions.__annotations__)


class Runner:
    """Runs one agent (and its tree). Many runs may go at once on one Runner (and one machine).

    ``observers`` watch every run of this runner (see :mod:`loopwright.observers`)."""

    def __init__(
        self,
        agent: Agent,
        *,
        machine: LoopMachine | None = None,
        observers: Sequence[object] = (),
        store: Any = None,
        durability: str = "transition",
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"Runner takes an Agent, got {type(agent).__name__}")
        self.agent = agent
        self.tree = AgentTree(agent)
        self.machine = machine or machine_for(agent)
        self.observers = Observers(*observers)
        self._handlers: dict[str, Handler] = {**HANDLERS, **self.machine.handlers}
        for state in self.machine.states:
            if state not in self.machine.terminals and state not in self._handlers:
                rows = [str(r) for r in self.machine.rows if r.dest == state]
                raise MachineError(
                    f"state {state!r} is referenced by rows {rows} but has no handler; give it one in "
                    f"Extension(states={{{state!r}: your_async_handler}}) (or handlers= of LoopMachine)"
                )
        self._active: dict[str, Run] = {}
        self._paused: dict[str, tuple[RunState, float]] = {}
        """Runs paused in this process, by id, with when they paused."""
        self.store = store
        """Where runs are checkpointed (``SQLiteStore``, ``PostgresStore``; see :mod:`loopwright.stores`)."""
        self._durable: Any = None
        if store is not None:
            from ..durable.checkpoint import Durable

            self._durable = Durable(store, durability)

    @property
    def agents(self) -> dict[str, Agent]:
        return self.tree.agents

    # ------------------------------------------------------------------ public API

    def new_run(self, input: UserInput, **options: Unpack[RunOptions]) -> RunState:
        """A fresh run state in the initial state (not yet running); see :class:`RunOptions`.
        ``input`` is text, or parts: text, images, documents (:mod:`loopwright.inputs`)."""
        given = input if isinstance(input, str) else user_input(input)
        if not options.keys() <= _OPTIONS:
            unknown = ", ".join(repr(k) for k in options if k not in _OPTIONS)
            raise ConfigurationError(f"unknown run option {unknown}; the options are: {_OPTION_NAMES}")
        after = options.get("after")
        active = options.get("agent") or (after.answered_by if after is not None else self.agent.name)
        if active not in self.tree.agents:
            raise ConfigurationError(
                f"no agent named {active!r} in this runner's tree; the agents are: {', '.join(self.tree.agents)}"
            )
        run_id = options.get("run_id") or uuid.uuid4().hex
        if run_id in self._active:
            raise ConfigurationError(f"run id {run_id!r} is already running on this runner; use a new one")
        machine = self.machine
        rs = RunState(
            run_id=run_id,
            agent=self.agent.name,
            input=given,
            stage=machine.initial,
            state={**(copy_state(after.state) if after is not None else {}), **(options.get("state") or {})},
            trace=[machine.initial],
            active_agent=active,
            messages=list(after.messages) if after is not None else [],
            features={e.name: e.slice() for e in machine.extensions if e.slice is not None},
            limits=self.agent.limits,
        )
        self._own_limits(rs)
        if rs.limits.timeout_s is not None:  # the loop's deadline: the salvage call gets the reserve
            rs.deadline = _clock() + rs.limits.timeout_s - rs.limits.salvage_reserve
        up = nesting.parent()
        if up is not None:  # started inside a tool of another run: its child
            nesting.adopt(rs, up)
        return rs

    def _own_limits(self, rs: RunState) -> None:
        """The limits of the run come from the agents, never from a saved state."""
        rs.limits = self.agent.limits
        active = self.tree.agents.get(rs.active_agent)
        own = active.own_limits if active is not None and active is not self.agent else None
        if own is None:
            rs.turn_limits, rs.turn_start = None, {}
        elif not rs.turn_start:
            start_turn(rs, own)
        else:
            rs.turn_limits = own

    def start(
        self, input: UserInput, *, sink: Callable[[Any], None] | None = None, **options: Unpack[RunOptions]
    ) -> Run:
        """Begin a run to drive by hand: ``await run.step()`` takes one transition.
        ``sink`` also receives every event as it is emitted."""
        return Run(self, self.new_run(input, **options), sink=sink)

    async def run(self, input: UserInput, **options: Unpack[RunOptions]) -> RunResult:
        """Run the agent on ``input`` until a terminal (or waiting) state; return the result."""
        run = Run(self, self.new_run(input, **options))
        await run._steps(to_end=True)  # (Run.run_to_end, without its coroutine: one fewer a run keeps)
        return run._ended()

    def run_sync(self, input: UserInput, **options: Unpack[RunOptions]) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _sync(self.run(input, **options))
        raise ConfigurationError("run_sync() cannot be called inside a running event loop; use `await runner.run(...)`")

    def stream(self, input: UserInput, **options: Unpack[RunOptions]) -> RunStream:
        """Events as they happen: ``async for event in runner.stream(text)``. Text deltas
        arrive as ``text_delta`` events from models that stream. ``.result`` holds the
        RunResult once the stream is exhausted. Leaving the loop early cancels the run."""
        return RunStream(self, self.new_run(input, **options))

    # ------------------------------------------------------------------ the stepping protocol
    # Runners of another kind (the durable resume, the DBOS workflow, workflow agents, a server)
    # drive a run through these five and Run.choose/Run.take, never through private names:
    #
    #     rs = loaded_state(...)              # RunState.from_json, a store's load, a step's output
    #     runner.adopt(rs)                    # the agent's budgets, the saved clock capped
    #     run = runner.attach(rs)             # a Run for it (events, observers, the store's checkpointer)
    #     runner.register(run)                # pause/cancel/active_runs find it from here on
    #     while not run.done and not run.waiting:   # (a resumed run's first step is its waiting state's)
    #         waits = runner.handler(run.stage)(run.state, run.ctx)
    #         if waits is not None:
    #             await waits                 # a stage's work (I/O): yours to schedule, record, retry
    #         run.take(run.choose())          # the table's choice (pure), then the transition
    #
    # ``Run.step()``/``run_to_end()`` do the same with the deadline, cancellation and fairness.

    def handler(self, stage: str) -> Handler:
        """The handler that does ``stage``'s work: ``waits = handler(run.state, run.ctx)``, then
        ``await waits`` when it is not None (a handler may be a plain function)."""
        return self._handlers[stage]

    def adopt(self, rs: RunState) -> None:
        """Make a state from outside this runner's own runs (JSON, a store, a recorded step)
        its own: its budgets are the agent's, never the saved state's, and what it takes from
        its saved clock and turn counters is capped at them."""
        self._own_limits(rs)
        self._cap_saved(rs)

    def attach(self, rs: RunState) -> Run:
        """A :class:`Run` for ``rs``, not started and not yet registered: its context, its event
        log (a ``run_started`` event for a state that has none), its observers and, with a
        store, its checkpointer (:attr:`Run.checkpointer`)."""
        return Run(self, rs, register=False)

    def register(self, run: Run) -> None:
        """``run`` is running on this runner: :meth:`pause`, :meth:`cancel` and
        :meth:`active_runs` find it until it ends. A run id runs once at a time (ResumeError)."""
        if run.run_id in self._active:
            raise ResumeError(f"run {run.run_id!r} is already running on this runner")
        self._active[run.run_id] = run

    def is_running(self, run_id: str) -> bool:
        """A run with this id is running on this runner."""
        return run_id in self._active

    async def resume(
        self,
        target: RunResult | RunState | str,
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
        a pending request, raises :class:`ResumeError` and changes nothing. The run's budgets
        are this runner's agent's, whatever the saved state held, and the saved state is checked
        (:mod:`loopwright.trust`).

        ``target`` may also be a run id: a run stopped by :meth:`pause` in this process resumes
        where it stopped (it takes no decisions); with a store, a suspended run, or one whose
        worker crashed, continues from its last checkpoint (:mod:`loopwright.stores`)."""
        if isinstance(target, str) and target not in self._paused:
            if self._durable is None:
                raise ResumeError(
                    f"no run with id {target!r} is paused on this runner, and a stored run's id needs a store: "
                    "Runner(agent, store=SQLiteStore(path)); or pass its RunResult or RunState"
                )
            return await self._durable.resume(self, target, decisions, cancel)  # type: ignore[no-any-return]
        rs = self._resumable(target, decisions)
        from ..durable.trust import check_saved_state

        check_saved_state(rs, self.machine, self.tree.agents)
        self._own_limits(rs)
        run = self.attach(rs)
        outcome = rs.outcome
        if outcome == "paused":
            _, at = self._paused.pop(rs.run_id, (rs, None))
            if at is not None and rs.deadline is not None:  # the clock stopped while it was paused
                rs.deadline += _clock() - at
            run.ctx.emit(Resumed, decided=(), timed_out=False)
        else:
            for hook in self.machine.hooks("resume"):
                hook(rs, run.ctx, decisions or {})
        rs.outcome = None  # this state is claimed: from here a second resume of it is refused (_resumable)
        try:
            await self._reopen(run, outcome, decisions)
        except BaseException:
            rs.outcome = outcome
            raise
        self._cap_saved(rs)
        if cancel:
            rs.cancel_requested = True
        self.register(run)
        return await run.run_to_end()

    async def _reopen(self, run: Run, outcome: str | None, decisions: Mapping[str, Any] | None) -> None:
        """What a claimed state needs before it goes on: the store's claim (of a suspension; a
        paused run's new worker takes it over), and the request of a state paused in ``reason``
        (it is not saved: preprocess builds it again)."""
        rs = run.state
        if self._durable is not None:
            if outcome == "paused":
                await self._durable.continue_paused(run)
            else:
                await self._durable.claim_copy(run, decisions)
        if rs.stage == Stage.REASON and rs.request is None:
            attempt = rs.attempt
            waits = self._handlers[Stage.PREPROCESS](rs, run.ctx)
            if waits is not None:
                await waits
            rs.attempt = attempt

    def _resumable(self, target: RunResult | RunState | str, decisions: Mapping[str, Any] | None) -> RunState:
        """The run state ``resume`` continues (ResumeError, nothing changed, if it cannot)."""
        if isinstance(target, str):
            found = self._paused.get(target)
            if found is None:
                raise ResumeError(f"no run with id {target!r} is paused on this runner; pass its RunResult or RunState")
            target = found[0]
        rs = target.run_state if isinstance(target, RunResult) else target
        if not isinstance(rs, RunState):
            raise ResumeError(
                f"resume() takes a RunResult, a RunState or a paused run's id, got {type(target).__name__}"
            )
        if rs.agent != self.agent.name:
            raise ResumeError(f"run {rs.run_id!r} belongs to agent {rs.agent!r}, not {self.agent.name!r}")
        if rs.run_id in self._active:
            raise ResumeError(f"run {rs.run_id!r} is already running")
        paused = rs.outcome == "paused"
        if not paused and (rs.outcome != "suspended" or rs.stage not in self.machine.waiting):
            raise ResumeError(self._not_waiting(rs))
        if paused and decisions:
            raise ResumeError(f"run {rs.run_id!r} was paused, not suspended: it waits for no decision; resume it alone")
        return rs

    def _not_waiting(self, rs: RunState) -> str:
        """Why ``rs`` cannot be resumed: it never waited, or (it went through a waiting state,
        or it is running) this state was resumed already."""
        once = (
            "a suspension is resumed once. Each RunState.from_json copy is a state of its own and cannot be "
            "told from another: for exactly-once across copies and processes, give the runner a store, "
            "Runner(agent, store=SQLiteStore(path)), and resume the run by its id"
        )
        waiting = self.machine.waiting
        waited = any(stage in waiting for stage in rs.trace)
        if rs.outcome is None and (rs.stage in waiting or waited):
            return f"run {rs.run_id!r} is being resumed from this state already (it is in state {rs.stage!r}); {once}"
        if waited:
            return f"run {rs.run_id!r} is not waiting: it is in state {rs.stage!r}, resumed from this state; {once}"
        return (
            f"run {rs.run_id!r} is not waiting: it is in state {rs.stage!r}; only a suspended or paused run can be "
            "resumed"
        )

    def _cap_saved(self, rs: RunState) -> None:
        """What a resumed run takes from its saved state is capped at its agent's budgets: the
        time left of ``timeout_s`` (a state that says more, or nothing, gets the agent's whole
        budget from now) and the counters a sub-agent's turn started from (no later than now)."""
        limits = rs.limits
        if limits.timeout_s is not None:
            latest = _clock() + max(0.0, limits.timeout_s - limits.salvage_reserve)
            if rs.deadline is None or rs.deadline > latest:
                rs.deadline = latest
        if rs.turn_start:
            for budget in TURN_BUDGETS:
                started = rs.turn_start.get(budget.name)
                if started is not None and started > (now := budget.counter(rs)):
                    rs.turn_start[budget.name] = now

    def resume_sync(
        self, target: RunResult | RunState | str, decisions: Mapping[str, Any] | None = None, *, cancel: bool = False
    ) -> RunResult:
        """``resume`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _sync(self.resume(target, decisions, cancel=cancel))
        raise ConfigurationError(
            "resume_sync() cannot be called inside a running event loop; use `await runner.resume(...)`"
        )

    def pause(self, run_id: str) -> bool:
        """Pause a running run at its next transition: the stage in progress finishes, the run
        stops before the next one, and ``run`` returns its result with outcome ``"paused"``
        (nothing lost: its state is whole, ``to_json()`` saves it). ``resume`` continues it.
        The run clock (``timeout_s``) stops while it is paused in this process. False if no
        such run is in progress."""
        run = self._active.get(run_id)
        if run is None:
            return False
        run.pausing = True
        return True

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


class Run:
    """One run in progress. ``Runner.run`` drives it to the end; apps and tests may drive it
    by hand with :meth:`step` (one stage's work, then one transition) and inspect ``state``
    (the RunState), ``stage``, ``done``, ``events`` and, once done, ``result``."""

    __slots__ = (
        "_handlers",
        "_held",
        "_in_stage",
        "_loop",
        "_own",
        "_save",
        "_stops",
        "_terminals",
        "_timed_out",
        "_timer",
        "_waiter",
        "_yielded",
        "ctx",
        "machine",
        "pausing",
        "runner",
        "state",
        "task",
    )

    def __init__(
        self,
        runner: Runner,
        rs: RunState,
        *,
        sink: Callable[[Any], None] | None = None,
        stream_deltas: bool = False,
        register: bool = True,
    ) -> None:
        self.runner = runner
        self.state = rs
        machine = self.machine = runner.machine
        own = self._own = Observers(EventSink(sink)) if sink is not None else None
        if INSTRUMENTS.start or runner.observers.start:  # observers that watch this run alone
            own = self._own = runner.observers.start_run(self, INSTRUMENTS.start_run(self, own))
        watching = [o for o in (INSTRUMENTS, runner.observers, own) if o is not None and o.event]
        self.ctx = RunContext(
            runner.tree,
            rs,
            watchers=[_watcher(o) for o in watching],
            stream_deltas=stream_deltas,
            features=machine.features,
            hooks=machine.hooks,
            budgets=machine.budgets,
        )
        if own is not None:
            self.ctx.tool_scopes, self.ctx.model_scopes = own.scopes("tool_scope"), own.scopes("model_scope")
        self.task: asyncio.Task[Any] | None = None
        self._handlers = runner._handlers
        self._terminals = machine.terminals
        self._stops = machine.stops
        self._loop: Any = None
        self._yielded = 0.0
        self._waiter = 0
        """``id()`` of the waiter first in the loop's line when last looked (see _must_yield):
        an id, not the handle, so a run never keeps another task's finished step alive."""
        self._held = 0
        self._timer: asyncio.TimerHandle | None = None
        """The run's one deadline timer (armed at its first step when it has ``timeout_s``)."""
        self._in_stage = False
        self._timed_out = False
        """The deadline timer cancelled the stage in progress (the runner takes it back)."""
        self.pausing = False
        """``Runner.pause`` asked this run to stop at its next transition."""
        self._save = runner._durable.attach(self) if runner._durable is not None else None
        if register:
            runner._active[rs.run_id] = self
        if rs.seq == 0:
            self.ctx.emit(RunStarted, rs.input)

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
        return self.state.stage in self.machine.waiting

    @property
    def events(self) -> list[Any]:
        """This run's events so far (built from the compact log on demand)."""
        return self.ctx.log.events()

    @property
    def result(self) -> RunResult:
        return RunResult.of(self.state, self.ctx.log, self.machine)

    async def run_to_end(self) -> RunResult:
        """Step until a terminal state (or a waiting one); the result."""
        await self._steps(to_end=True)
        return self._ended()

    def _ended(self) -> RunResult:
        """The result once the steps to the end have returned (``Runner.pause``: paused here)."""
        if self.pausing and self.state.stage not in self._stops:
            return self._pause_here()
        return RunResult.of(self.state, self.ctx.log, self.machine)

    def _pause_here(self) -> RunResult:
        """``Runner.pause``: stop between two stages, with outcome ``"paused"``."""
        rs, runner = self.state, self.runner
        self.pausing = False
        self._disarm_deadline()
        runner._active.pop(rs.run_id, None)
        runner._paused[rs.run_id] = (rs, _clock())
        rs.outcome = "paused"
        self.ctx.emit(Paused)
        rs.legs = (*rs.legs, self.ctx.log)  # a resume's result carries this leg's events too
        self._notify_finish()
        return RunResult.of(rs, self.ctx.log, self.machine)

    async def step(self) -> Row | None:
        """Do the current stage's work, then take one transition. Returns the row taken
        (None if the run had already ended). If the task running this is cancelled, the run
        still moves to ``cancelled`` (results kept) before ``CancelledError`` propagates."""
        return await self._steps(to_end=False)

    def _must_yield(self) -> bool:
        """Whether to let the event loop run before the next stage (not before the run's first).

        Another task waits (ready, or its timer due): the first time this run sees that
        waiter it goes on; if the same waiter is still first in line ``_HOLD`` stages later,
        the loop has not run since, and the run yields. A waiter that changed means the loop
        ran in between (a stage suspended): counting starts again. So a run that suspends
        anyway (a model call) pays no extra round trip of the loop, and one that never
        suspends holds it for at most ``_HOLD`` + 1 stages. With nothing waiting, the run
        still yields once per ``_SLICE_S`` since its own last yield (I/O is polled then)."""
        if len(self.state.trace) < 2:
            return False
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._yielded = _monotonic()
            if not hasattr(loop, "_ready") or type(loop).time is not _BASE_TIME:
                loop = self._loop = _OTHER_LOOP  # not asyncio's own: yield at every transition
        if loop is _OTHER_LOOP:
            return True
        ready = loop._ready
        if ready:
            waiter = ready[0]
        else:
            now = _monotonic()  # asyncio's own loops keep time.monotonic(): read it without a Python frame
            scheduled = loop._scheduled
            if not scheduled or scheduled[0]._when > now:
                self._waiter = 0
                return now - self._yielded > _SLICE_S
            waiter = scheduled[0]
        if id(waiter) != self._waiter:  # (a reused id only makes the run yield sooner)
            self._waiter, self._held = id(waiter), 0
            return False
        self._held += 1
        return self._held >= _HOLD

    def _arm_deadline(self) -> None:
        """One timer per run (not one per stage): when ``timeout_s`` runs out it marks the
        deadline and cancels the stage in progress, which the table then ends."""
        rs = self.state
        if self._timer is not None or rs.deadline_hit or rs.deadline is None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + (rs.deadline - _clock()), self._deadline_passed)

    def _check_deadline(self, task: asyncio.Task[Any] | None) -> None:
        """After a stage: take back a deadline cancellation the stage swallowed; note a
        deadline that passed while the stage ran without waiting."""
        if self._timed_out:
            self._take_back_cancel(task)
        rs = self.state
        if rs.deadline is not None and not rs.deadline_hit and _clock() >= rs.deadline:
            rs.deadline_hit = True

    def _deadline_passed(self) -> None:
        self._timer = None
        self.state.deadline_hit = True
        task = self.task
        if self._in_stage and task is not None and not task.done():
            self._timed_out = True
            task.cancel()

    def _disarm_deadline(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _caught(
        self, stage: str, exc: BaseException, task: asyncio.Task[Any] | None
    ) -> tuple[BaseException | None, bool]:
        """What ``stage`` raising ``exc`` comes to: the exception the table's abort edge takes
        (None: none), and whether the task was cancelled from outside (the run ends cancelled,
        then the cancellation goes on up). A KeyboardInterrupt ends the run cancelled and goes
        on up; SystemExit and GeneratorExit are answered like any error; anything else (not
        :data:`loopwright.calls.ANSWERED`) goes on up, the run left as it was."""
        if isinstance(exc, asyncio.CancelledError):
            return None, self._cancelled_from_outside(task)
        if isinstance(exc, KeyboardInterrupt):
            self._interrupted(stage)
            raise exc
        return self._answerable(exc), False

    def _cancelled_from_outside(self, task: asyncio.Task[Any] | None) -> bool:
        """The stage was cancelled: by the engine itself (the deadline, ``runner.cancel``: the
        table ends the run), or from outside (True: the run ends cancelled, then re-raises)."""
        if self._take_back_cancel(task):
            return False
        self.state.cancel_requested = True
        return True

    def _take_back_cancel(self, task: asyncio.Task[Any] | None) -> bool:
        """Undo the cancellations that were the engine's own (the deadline's, ``runner.cancel``);
        whether those were all there were (False: someone else cancelled the task too)."""
        if self._timed_out:
            self._timed_out = False
            if task is None or task.uncancel() == 0:
                return True  # only the run's deadline
        if self.state.cancel_requested and task is not None and task.cancelling():
            task.uncancel()  # our own runner.cancel(): end normally
            return True
        return False

    async def _steps(self, to_end: bool) -> Row | None:  # noqa: C901 (the hot path, inlined on purpose: see below)
        """Do the current stage's work, then take one transition; with ``to_end``, go on until
        a terminal or waiting state (or ``Runner.pause``) — the first step always runs: a
        resumed run starts in its waiting state, and its first step resumes it. The last row
        taken (None if the run had already ended). One frame for the whole run: the hot path.
        The quiet case of the yield test and the table's choice are written out here rather
        than called (a Python call costs about a thousand instructions, five times a pass;
        ``bench/bench_instructions.py``); everything rare is a method of its own."""
        self.task = asyncio.current_task()
        self._arm_deadline()
        rs, ctx = self.state, self.ctx
        handlers, terminals, stops, choosers = self._handlers, self._terminals, self._stops, self.machine.choosers
        row: Row | None = None
        while True:
            stage = rs.stage
            if stage in terminals:
                return row
            task = self.task
            cancelled_from_outside = False
            raised: BaseException | None = None
            try:
                loop = self._loop  # (the quiet case of _must_yield, without its frame)
                if (
                    loop is None
                    or loop is _OTHER_LOOP
                    or loop._ready
                    or (now := _monotonic()) - self._yielded > _SLICE_S
                    or (loop._scheduled and loop._scheduled[0]._when <= now)
                ) and self._must_yield():
                    await asyncio.sleep(0)
                    self._yielded, self._waiter = _monotonic(), 0
                self._in_stage = True
                waits = handlers[stage](rs, ctx)
                if waits is not None:
                    await waits
            except BaseException as exc:  # a stage never stops the loop (see _caught)
                raised, cancelled_from_outside = self._caught(stage, exc, task)
            finally:
                self._in_stage = False
            if rs.deadline is not None:
                self._check_deadline(task)
            if raised is None:
                try:  # the table's choice (Run._choose, without its frame: this runs at every transition)
                    row = choosers[stage](rs)
                except Exception as exc:
                    row = self._unchosen(stage, exc)
            else:
                row = self._abort(stage, "stage", raised)
            self._take(row)
            flush = self._save(row) if self._save is not None else None
            if flush is not None or cancelled_from_outside:
                await self._saved(flush, cancelled_from_outside)
            if not to_end or rs.stage in stops or self.pausing:
                return row

    async def _saved(self, flush: Awaitable[None] | None, cancelled_from_outside: bool) -> None:
        """After a transition: the store's write, if it has one to make (it writes before the
        stages that have side effects); then a cancellation from outside goes on up."""
        if flush is not None:
            await flush
        if cancelled_from_outside:
            raise asyncio.CancelledError

    def _answerable(self, exc: BaseException) -> BaseException:
        """What a stage raised, for the abort edge; any other BaseException than those
        (:data:`loopwright.calls.ANSWERED`) propagates untouched, the run unregistered and left as
        it was (like a process that died: a store resumes it from its last checkpoint)."""
        if isinstance(exc, ANSWERED):
            return exc
        self.runner._active.pop(self.state.run_id, None)
        self._disarm_deadline()
        raise exc

    def _interrupted(self, stage: str) -> None:
        """A stage was interrupted (KeyboardInterrupt): the run ends cancelled (failed, if no
        row out of ``stage`` leads to a terminal), and the caller re-raises the interrupt."""
        self.ctx.interrupt = None
        self.state.cancel_requested = True
        row = self._choose(stage)
        if row.dest not in self._terminals:
            row = self._abort(stage, "stage", KeyboardInterrupt())
        self._take(row)

    def choose(self) -> Row:
        """The row the table takes out of the current stage, after its work (pure: the
        machine's guards on the run state). A guard that raises gives the abort row (the run
        fails, the error named); no row at all fails the run and raises NoTransitionError."""
        return self._choose(self.state.stage)

    def take(self, row: Row) -> None:
        """Take ``row``: its budget charged, the stage moved, the transition logged, observers
        told; a row into a terminal finishes the run, one into a waiting state suspends it."""
        self._take(row)

    @property
    def checkpointer(self) -> Any:
        """The store's checkpointer of this run (None without a store): a custom runner calls
        ``flush = run.checkpointer(row)`` after each :meth:`take` and awaits ``flush`` when it is
        not None (the store writes before the stages that have side effects)."""
        return self._save

    def _choose(self, stage: str) -> Row:
        try:
            return self.machine.choose(stage, self.state)
        except Exception as exc:
            return self._unchosen(stage, exc)

    def _unchosen(self, stage: str, exc: Exception) -> Row:
        """The table could not choose out of ``stage``: a guard raised ``exc`` (the abort edge),
        or no row matched (the run fails, and the NoTransitionError goes on up)."""
        if isinstance(exc, NoTransitionError):
            self._take(self._abort(stage, "table", None))
            raise exc
        return self._abort(stage, "guard", exc)

    def _abort(self, stage: str, where: str, exc: BaseException | None) -> Row:
        """The engine's abort edge: the run fails, the error named."""
        rs = self.state
        what = "no row matched" if exc is None else f"{type(exc).__name__}: {exc}"
        culprit = f"stage {stage!r} raised" if where == "stage" else f"a guard out of {stage!r} raised"
        if where == "table":
            culprit = f"the table out of {stage!r} failed:"
        rs.error = ErrorInfo(kind=where, message=f"{culprit} {what}")
        return abort_row(stage)

    def _take(self, row: Row) -> None:
        rs, ctx, machine = self.state, self.ctx, self.machine
        if row.bounded_by is not None:
            machine.charge(row, rs)
        rs.stage = row.dest
        rs.trace.append(row.dest)
        # the StateEntered event, kept as the row itself (RunContext.record's twin for a
        # transition, written out: it runs five times a pass; the entry shapes: context.LogEntry)
        log = ctx.log
        rs.seq += 1
        if rs.iteration == log.iteration and rs.active_agent == log.agent:
            log.entries.append(row)
        else:
            log.entries.append((row, rs.iteration, rs.active_agent))
            log.iteration, log.agent = rs.iteration, rs.active_agent
        log.stage = row.dest
        log.times.append(_clock())
        if ctx.watchers:
            ctx.tell_latest()
        if row.records_limit and rs.limit is None:
            self._record_limit(row)
        if INSTRUMENTS.transition:
            INSTRUMENTS.notify(INSTRUMENTS.transition, self, row)
        observers = self.runner.observers
        if observers.transition:
            observers.notify(observers.transition, self, row)
        own = self._own
        if own is not None and own.transition:
            own.notify(own.transition, self, row)
        if row.dest in self._stops:
            if row.dest in self._terminals:
                self._finish(row)
            else:
                self._pause()

    def _record_limit(self, row: Row) -> None:
        rs = self.state
        budget = self.machine.spent_budget(row, rs)
        if budget is None:
            return
        rs.limit = budget.name
        used, cap = budget.binding(rs)
        self.ctx.emit(LimitReached, limit=budget.name, value=float(cap or 0), used=float(used))

    def _pause(self) -> None:
        """The run entered a waiting state: the features pause it; the runner returns."""
        rs = self.state
        self._disarm_deadline()
        self.runner._active.pop(rs.run_id, None)
        for hook in self.machine.hooks("pause"):
            hook(rs, self.ctx)
        rs.outcome = "suspended"
        rs.legs = (*rs.legs, self.ctx.log)  # a resume's result carries this leg's events too
        self._notify_finish()

    def _finish(self, row: Row) -> None:
        rs, ctx = self.state, self.ctx
        self._disarm_deadline()
        self.runner._active.pop(rs.run_id, None)
        why = f"the run ended in {rs.stage!r}"
        for hook in self.machine.hooks("finish"):
            hook(rs, ctx, why)
        answer_unrun_calls(rs, ctx, why)
        rs.outcome = row.outcome
        if rs.outcome in ("final", "salvaged"):
            rs.output = rs.text
        elif rs.outcome == "failed" and rs.error is None:
            rs.error = rs.model_error or ErrorInfo(kind="failed", message=f"the run failed in {row.source!r}")
        ctx.emit(RunFinished, rs.outcome, rs.output, rs.error)
        nesting.charge(rs)
        self._notify_finish()
        rs.request = None  # an ended run makes no more requests: its result does not keep the last one
        if ctx.interrupt is not None:  # a tool was interrupted: the run has ended; on up it goes
            raise ctx.interrupt

    def _notify_finish(self) -> None:
        sets = [o for o in (INSTRUMENTS, self.runner.observers, self._own) if o is not None and o.finish]
        if sets:
            result = RunResult.of(self.state, self.ctx.log, self.machine)
            for observers in sets:
                observers.notify(observers.finish, result)


def _sync(work: Coroutine[Any, Any, RunResult]) -> RunResult:
    """``asyncio.run(work)``, the result kept out of the task (asyncio formats the main task
    when it restores the SIGINT handler: a large result would be rendered for nothing)."""
    kept: list[RunResult] = []

    async def main() -> None:
        kept.append(await work)

    asyncio.run(main())
    return kept[0]


def _watcher(observers: Observers) -> Callable[[Any], None]:
    def watch(event: Any) -> None:
        observers.notify(observers.event, event)

    return watch


def _current_task() -> asyncio.Task[Any] | None:
    """The running task, or None when called outside an event loop (cancel() may be)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


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

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
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


__all__ = ["Run", "RunOptions", "RunStream", "Runner"]
