"""Runner: the facade of the engine's one loop (the loop itself: :mod:`loopwright.loop.run`).

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

Resuming: ``resume`` (and ``resume_sync``) take a suspended run's result or state, or the id of
a run paused in this process or kept in a store, check it can go on (waiting, not claimed
already, this runner's agent, its saved state trusted), claim it, cap what it takes from its
saved clock and turn counters at the agent's budgets, and run it to its end; a run in a session
saves it there. :func:`sync_run` is how ``run_sync`` and ``resume_sync`` drive a run without an
event loop, closing the toolsets opened on the way.

Every machine that runs is bounded: a Runner refuses a machine that
:func:`~loopwright.machines.verify` rejects (a cycle no budget bounds, a state no run leaves, ...),
with the report, unless it is made with ``unverified=True``. Every other runner (a store's resume,
DBOS workflows, workflow agents, the server) runs through a Runner, so refuses the same. The
verdict is kept per machine (machines are cached per feature set): a run pays nothing for it.
Whatever the machine, the loop itself ends a run by its ``timeout_s``, on ``cancel`` and at
``Limits.max_transitions`` (:mod:`loopwright.loop.run`).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Unpack

from ..data.errors import ConfigurationError, MachineError, ResumeError
from ..data.events import Resumed
from ..data.inputs import UserInput, user_input
from ..data.result import RunResult, copy_state
from ..data.run_state import RunState, fresh_run_state
from ..data.stage import Stage
from ..features import machine_for
from ..features.guardrails import run_agents_with
from ..machines.verify import Report, verify
from ..runtime import nesting
from ..runtime.agent import Agent, AgentTree
from ..runtime.observers import Observers
from ..stores.sessions import RunSession
from ..table.budgets import TURN_BUDGETS, start_turn
from ..table.machine import LoopMachine
from .options import OPTION_NAMES, OPTIONS, RunOptions, new_run_id
from .run import Run, RunHost
from .stream import RunStream

from loopwright.states import HANDLERS, Handler  # isort: skip

_clock = time.time

_VERDICTS: weakref.WeakKeyDictionary[LoopMachine, Report] = weakref.WeakKeyDictionary()
"""``verify``'s report of each machine a Runner was made with (one verification per machine)."""


def verdict(machine: LoopMachine) -> Report:
    """``verify(machine)``, once per machine."""
    report = _VERDICTS.get(machine)
    if report is None:
        report = _VERDICTS[machine] = verify(machine)
    return report


def refusal(machine: LoopMachine, report: Report, agent: str) -> str:
    """Why a Runner refuses ``machine`` (the agent ``agent`` runs on it), and how to run it anyway."""
    return (
        f"agent {agent!r} runs on machine {machine.name!r}, which verify rejects, so a run of it might never end "
        f"(built with extend(..., check=False), or by hand):\n{report}\n"
        "Fix the machine (each violation above says how), or, to run it as it is, opt in: "
        "Runner(agent, unverified=True); the loop then still ends each run by its timeout_s, on cancel "
        "and at Limits.max_transitions"
    )


class Runner:
    """Runs one agent (and its tree). Many runs may go at once on one Runner (and one machine).

    ``observers`` watch every run of this runner (see :mod:`loopwright.runtime.observers`).
    A machine that :func:`~loopwright.machines.verify` rejects is refused (MachineError, with the
    report) unless ``unverified=True``: you take the risk of running it, and the loop still
    ends each run by its ``timeout_s``, on ``cancel`` and at ``Limits.max_transitions``."""

    def __init__(
        self,
        agent: Agent,
        *,
        machine: LoopMachine | None = None,
        observers: Sequence[object] = (),
        store: Any = None,
        durability: str = "transition",
        sessions: Any = None,
        unverified: bool = False,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"Runner takes an Agent, got {type(agent).__name__}")
        self.agent = agent
        self.tree = AgentTree(agent)
        self.machine = machine or machine_for(agent)
        self.unverified = unverified
        """The machine may be one :func:`~loopwright.machines.verify` rejects (the user opted in)."""
        if not unverified and not (report := verdict(self.machine)).ok:
            raise MachineError(refusal(self.machine, report, agent.name))
        self.observers = Observers(*observers)
        self._handlers: dict[str, Handler] = {**HANDLERS, **self.machine.handlers}
        for state in self.machine.states:
            if state not in self.machine.terminals and state not in self._handlers:
                rows = [str(r) for r in self.machine.rows if r.dest == state]
                raise MachineError(
                    f"state {state!r} is referenced by rows {rows} but has no handler; give it one in "
                    f"Extension(states={{{state!r}: your_async_handler}}) (or handlers= of LoopMachine)"
                )
        self.deps: Any = None
        """The dependencies of runs given none (``run(..., deps=...)`` wins): a DBOS worker's,
        set when it registers the agent (:func:`loopwright.integrations.dbos.register`)."""
        self._active: dict[str, Run] = {}
        self._paused: dict[str, tuple[RunState, float]] = {}
        """Runs paused in this process, by id, with when they paused."""
        self.store = store
        """Where runs are checkpointed (``SQLiteStore``, ``PostgresStore``; see :mod:`loopwright.stores`)."""
        self._durable: Any = None
        self.sessions = sessions
        """Where sessions are kept (``SQLiteSessions``, ``PostgresSessions``): ``run(text, session=...)``."""
        self._toolsets = tuple(dict.fromkeys(ts for a in self.tree for ts in a.toolsets))
        self._opened: list[Any] = []  # the toolsets this runner opened (it closes them: aclose)
        self._reserve: tuple[Any, float] = (None, 0.0)
        """The agent's limits and their ``salvage_reserve``, found once (``new_run``'s deadline)."""
        if store is not None:
            from ..durable.checkpoint import Durable

            self._durable = Durable(store, durability)

    @property
    def agents(self) -> dict[str, Agent]:
        return self.tree.agents

    # ------------------------------------------------------------------ public API

    def new_run(self, input: UserInput, **options: Unpack[RunOptions]) -> RunState:
        """A fresh run state in the initial state (not yet running); see :class:`RunOptions`.
        ``input`` is text, or parts: text, images, documents (:mod:`loopwright.data.inputs`)."""
        given = input if isinstance(input, str) else user_input(input)
        agent = self.agent
        if options:
            active, run_id, state, messages = self._options(options)
        else:  # (the usual run: the root agent, a new id, no state, no history)
            active, run_id, state, messages = agent.name, new_run_id(), {}, []
        if run_id in self._active:
            raise ConfigurationError(f"run id {run_id!r} is already running on this runner; use a new one")
        machine = self.machine
        features = {}  # (a loop, not a comprehension: that would be a frame of every run's set-up)
        for e in machine.extensions:
            if e.slice is not None:
                features[e.name] = e.slice()
        limits = agent.limits
        initial = machine.initial  # (RunState's fields by name, its __post_init__ with nothing to do: active is set)
        rs = fresh_run_state(run_id, agent.name, given, initial, state, [initial], active, messages, features, limits)
        if active != agent.name:  # (the root's run has no turn limits: RunState's own defaults)
            self._own_limits(rs)
        timeout = limits.timeout_s
        if timeout is not None:  # the loop's deadline: the salvage call gets the reserve
            kept = self._reserve
            if kept[0] is not limits:  # (a Limits is frozen: its reserve found once)
                kept = self._reserve = (limits, limits.salvage_reserve)
            rs.deadline = _clock() + timeout - kept[1]
        up = nesting.parent()
        if up is not None:  # started inside a tool of another run: its child
            nesting.adopt(rs, up)
        return rs

    def _options(self, options: RunOptions) -> tuple[str, str, dict[str, Any], list[Any]]:
        """``new_run``'s options checked: the active agent, the run id, the state and the history."""
        if not options.keys() <= OPTIONS:
            unknown = ", ".join(repr(k) for k in options if k not in OPTIONS)
            raise ConfigurationError(f"unknown run option {unknown}; the options are: {OPTION_NAMES}")
        if "session" in options:
            raise ConfigurationError(
                "session= is an option of run(), run_sync(), stream() and start(); new_run makes a bare state"
            )
        if "deps" in options:
            raise ConfigurationError(
                "new_run makes a run state, which never holds deps (they are never saved); hand them to the run: "
                "runner.attach(state, deps), or run/stream/start(text, deps=...)"
            )
        after = options.get("after")
        active = options.get("agent") or (after.answered_by if after is not None else self.agent.name)
        if active not in self.tree.agents:
            raise ConfigurationError(
                f"no agent named {active!r} in this runner's tree; the agents are: {', '.join(self.tree.agents)}"
            )
        run_id = options.get("run_id") or new_run_id()
        state = {**(copy_state(after.state) if after is not None else {}), **(options.get("state") or {})}
        return active, run_id, state, list(after.messages) if after is not None else []

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
        ``sink`` also receives every event as it is emitted. With ``session=``, the first step
        holds the session (SessionBusy if another run holds it) and starts the run from it."""
        if self._toolsets and any(ts.version < 0 for ts in self._toolsets):
            raise ConfigurationError("this agent has toolsets: `await runner.open_toolsets()` before runner.start()")
        session = options.pop("session", None)
        if session is not None:
            from .sessions import session_run

            return session_run(self, input, session, dict(options), sink=sink)
        deps = options.pop("deps", self.deps)
        return Run(self, self.new_run(input, **options), sink=sink, deps=deps)

    async def run(self, input: UserInput, **options: Unpack[RunOptions]) -> RunResult:
        """Run the agent on ``input`` until a terminal (or waiting) state; return the result."""
        if self._toolsets:
            await self.open_toolsets()
        session = options.pop("session", None)
        if session is not None:
            from .sessions import run_in_session

            return await run_in_session(self, input, session, dict(options))
        deps = options.pop("deps", self.deps)
        run = Run(self, self.new_run(input, **options), deps=deps)
        await run.steps(to_end=True)  # (Run.run_to_end, without its coroutine: one fewer a run keeps)
        if run.pausing:
            return run.ended()
        return RunResult.of(run.state, run.ctx.log, run.machine)  # (Run.ended's usual case, without its frame)

    def run_sync(self, input: UserInput, **options: Unpack[RunOptions]) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return sync_run(self.run(input, **options), self)
        raise ConfigurationError("run_sync() cannot be called inside a running event loop; use `await runner.run(...)`")

    def stream(self, input: UserInput, **options: Unpack[RunOptions]) -> RunStream:
        """Events as they happen: ``async for event in runner.stream(text)``. Text deltas
        arrive as ``text_delta`` events from models that stream. ``.result`` holds the
        RunResult once the stream is exhausted. Leaving the loop early cancels the run.
        With ``session=``, the run is held in the session and saved there as with ``run``."""
        session = options.pop("session", None)
        if session is not None:
            from .sessions import session_run

            given = dict(options)
            stream = RunStream(
                self, None, make=lambda sink: session_run(self, input, session, given, sink=sink, stream_deltas=True)
            )
        else:
            deps = options.pop("deps", self.deps)
            stream = RunStream(self, self.new_run(input, **options), deps=deps)
        if self._toolsets:
            stream.before = self.open_toolsets
        return stream

    # ------------------------------------------------------------------ resuming (a run that stopped goes on)

    async def resume(
        self,
        target: RunResult | RunState | str,
        decisions: Mapping[str, Any] | None = None,
        *,
        cancel: bool = False,
        deps: Any = None,
    ) -> RunResult:
        """Continue a suspended run (a RunResult, or a RunState loaded from JSON in any process).

        ``decisions`` maps pending call ids to ``approve()`` or ``deny("reason")`` (for
        confirmations) or to the value itself (a credential, or a long-running tool's result).
        Approved calls run exactly once; denied ones become error results the model reads;
        calls without a decision stay pending (the run suspends again). ``cancel=True`` ends the
        run in ``cancelled`` instead. A run that is not waiting, or a decision that does not fit
        a pending request, raises :class:`ResumeError` and changes nothing. The run's budgets
        are this runner's agent's, whatever the saved state held, and the saved state is checked
        (:mod:`loopwright.durable.trust`).

        ``target`` may also be a run id: a run stopped by :meth:`pause` in this process resumes
        where it stopped (it takes no decisions); with a store, a suspended run, or one whose
        worker crashed, continues from its last checkpoint (:mod:`loopwright.stores`).

        ``deps``: the run's dependencies (``ctx.deps``), which are never saved: hand them again
        here, as to ``run``."""
        if self._toolsets:  # a resumed run lists the tools again
            await self.open_toolsets()
        if isinstance(target, str) and target not in self._paused:
            if self._durable is None:
                raise ResumeError(
                    f"no run with id {target!r} is paused on this runner, and a stored run's id needs a store: "
                    "Runner(agent, store=SQLiteStore(path)); or pass its RunResult or RunState"
                )
            return await self._session_end(await self._durable.resume(self, target, decisions, cancel, deps))
        rs = self._resumable(target, decisions)
        from ..durable.trust import check_saved_state

        check_saved_state(rs, self.machine, self.tree.agents)
        self._own_limits(rs)
        run = self.attach(rs, deps)
        outcome = rs.outcome
        if outcome == "paused":
            _, at = self._paused.pop(rs.run_id, (rs, None))
            if at is not None and rs.deadline is not None:  # the clock stopped while it was paused
                rs.deadline += _clock() - at
            run.ctx.emit(Resumed, decided=(), timed_out=False)
        else:
            for hook in self.machine.hooks("resume"):
                hook(rs=rs, ctx=run.ctx, decisions=decisions or {})
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
        return await self._session_end(await run.run_to_end())

    async def _session_end(self, result: RunResult) -> RunResult:
        """A resumed run ended: a run in a session saves it now (:mod:`loopwright.loop.sessions`)."""
        if self.sessions is not None:
            from .sessions import after_resume

            await after_resume(self, result)
        return result

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
        self,
        target: RunResult | RunState | str,
        decisions: Mapping[str, Any] | None = None,
        *,
        cancel: bool = False,
        deps: Any = None,
    ) -> RunResult:
        """``resume`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return sync_run(self.resume(target, decisions, cancel=cancel, deps=deps), self)
        raise ConfigurationError(
            "resume_sync() cannot be called inside a running event loop; use `await runner.resume(...)`"
        )

    # ------------------------------------------------------------------ toolsets (loopwright.runtime.toolsets)

    async def open_toolsets(self) -> None:
        """Open this runner's toolsets (once: they stay open for its later runs) and list their
        tools (cached, listed again after a list-changed signal). ``run``, ``stream`` and
        ``resume`` call this; ``start`` needs it called first. A toolset that cannot open raises
        :class:`~loopwright.runtime.toolsets.ToolsetError` naming its server."""
        for ts in self._toolsets:
            if ts not in self._opened:
                await ts.open()
                self._opened.append(ts)
            await ts.list_tools()
        for agent in self.tree:
            if agent.toolsets:
                agent.tools.check()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        """Close the toolsets this runner opened (``async with Runner(...) as runner:`` does)."""
        opened, self._opened = self._opened, []
        for ts in reversed(opened):
            await ts.close()

    async def __aenter__(self) -> Runner:
        await self.open_toolsets()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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

    def attach(self, rs: RunState, deps: Any = None) -> Run:
        """A :class:`Run` for ``rs``, not started and not yet registered: its context (``deps``
        its ``ctx.deps``; None: the runner's :attr:`deps`), its event log (a ``run_started``
        event for a state that has none), its observers and, with a store, its checkpointer
        (:attr:`Run.checkpointer`)."""
        run = Run(self, rs, register=False, deps=self.deps if deps is None else deps)
        if self.sessions is not None:  # a resumed run: the session store says which session it holds
            run.session = RunSession(rs, sessions=self.sessions)
        return run

    def register(self, run: Run) -> None:
        """``run`` is running on this runner: :meth:`pause`, :meth:`cancel` and
        :meth:`active_runs` find it until it ends. A run id runs once at a time (ResumeError)."""
        run_id = run.state.run_id
        if run_id in self._active:
            raise ResumeError(f"run {run_id!r} is already running on this runner")
        self._active[run_id] = run

    def unregister(self, run_id: str) -> None:
        """The run ``run_id`` has stopped (ended, suspended, paused, or left by an error that
        goes on up): :meth:`active_runs` no longer lists it. Nothing if it was not running."""
        self._active.pop(run_id, None)

    def hold_paused(self, rs: RunState) -> None:
        """``rs`` stopped at :meth:`pause`: keep it, with when it stopped (its clock stops while it
        is paused), so ``resume(run_id)`` finds it in this process."""
        self._paused[rs.run_id] = (rs, _clock())

    @property
    def handlers(self) -> Mapping[str, Handler]:
        """Every stage's handler, by stage (:meth:`handler` of each; the step loop reads them all)."""
        return self._handlers

    def checkpointer_for(self, run: Run) -> Any:
        """The store's checkpointer of ``run`` (None without a store): :attr:`Run.checkpointer`."""
        return self._durable.attach(run) if self._durable is not None else None

    def is_running(self, run_id: str) -> bool:
        """A run with this id is running on this runner."""
        return run_id in self._active

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


def _current_task() -> asyncio.Task[Any] | None:
    """The running task, or None when called outside an event loop (cancel() may be)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def sync_run(work: Coroutine[Any, Any, RunResult], runner: Runner) -> RunResult:
    """``asyncio.run(work)``, the result kept out of the task (asyncio formats the main task
    when it restores the SIGINT handler: a large result would be rendered for nothing). The
    toolsets opened on that event loop are closed before it ends."""
    kept: list[RunResult] = []

    async def main() -> None:
        try:
            kept.append(await work)
        finally:
            if runner._opened:
                await runner.aclose()

    asyncio.run(main())
    return kept[0]


__all__ = ["Run", "RunHost", "RunOptions", "RunStream", "Runner"]


run_agents_with(lambda agent: Runner(agent).run)  # agents used as guards run nested (features cannot import this)
