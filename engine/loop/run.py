"""Run: one run in progress, and the step loop that drives it.

::

    while run_state.stage is not terminal:               # Run.run_to_end
        HANDLERS[stage](run_state, ctx)                  # Run.step: the stage does the work,
        row = machine.choose(stage, run_state)           #   the table picks the edge
        machine.charge(row, run_state)                   #   a bounded row is charged to its budget
        run_state.stage = row.dest

A Run is made by its runner (:class:`~loopwright.loop.runner.Runner`, or any :class:`RunHost`)
and reads of it only what :class:`RunHost` names.

The run's clock is the Run's own too: the fairness probe (when a run that never suspends lets
the event loop run; its quiet case is written out in ``Run.steps``, its rare paths are
``Run._must_yield``) and the deadline (``timeout_s``) with the cancellations the engine takes
back.

The engine's own bounds hold whatever the machine (one a user opted in to run unverified:
``Runner(agent, unverified=True)``), on every cycle, with or without model calls
(:meth:`Run._bounded`; the hot path pays one test of three attributes a transition):

- a run takes at most ``Limits.max_transitions`` transitions; the last one ends it ``limit``
  (``RunResult.limit == "max_transitions"``, ``error`` saying so);
- once it is cancelled (``Runner.cancel``) or its deadline has passed, the table has as many
  transitions as the machine has states to end it (any path to a terminal is that short); past
  them the engine ends it itself: ``cancelled``, or ``limit`` naming ``timeout_s``. A run of an
  unverified machine takes no transition but into a terminal or a waiting state once it is
  cancelled or ``timeout_s`` itself has passed, and the stage in progress then is cut short (a
  verified machine keeps the salvage reserve for its salvage call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ..data import limits as _limits
from ..data.errors import NoTransitionError
from ..data.events import ErrorInfo, LimitReached, Paused, RunFinished, RunStarted, ToolCall
from ..data.result import RunResult
from ..data.run_state import RunState
from ..data.stage import Stage
from ..runtime import nesting
from ..runtime.agent import Agent, AgentTree
from ..runtime.calls import ANSWERED, answer_unrun_calls
from ..runtime.context import RunContext
from ..runtime.observers import INSTRUMENTS, EventSink, Observers
from ..table.machine import LoopMachine, Row, abort_row

from loopwright.states import Handler, decide  # isort: skip

_clock = time.time
_monotonic = time.monotonic
_BASE_TIME = asyncio.BaseEventLoop.time
OTHER_LOOP = object()
"""``Run._loop`` on an event loop that is not asyncio's own (uvloop): yield at every transition."""
SLICE_S = 0.001
"""A run that never suspends still lets the event loop run at least this often (seconds)."""
HOLD = 4
"""A run goes on for at most this many more stages while another task waits (ready, or a timer
due), then lets it run: a waiting task runs within one loop iteration (five stages) of this run."""


class RunHost(Protocol):
    """What a :class:`Run` reads of the runner that drives it (:class:`~loopwright.loop.runner.Runner`
    is one): the agents and the machine, the stages' handlers, the store's checkpointer, and the
    register of running and paused runs."""

    agent: Agent
    tree: AgentTree
    machine: LoopMachine
    observers: Observers
    unverified: bool
    """The machine may be one ``verify`` rejects (the user opted in): the deadline is kept strictly."""

    @property
    def handlers(self) -> Mapping[str, Handler]:
        """Each stage's handler, by stage (:meth:`handler` of them all)."""
        ...

    def handler(self, stage: str) -> Handler: ...

    def adopt(self, rs: RunState) -> None: ...

    def attach(self, rs: RunState) -> Run: ...

    def checkpointer_for(self, run: Run) -> Any:
        """The store's checkpointer of ``run`` (None without a store)."""
        ...

    def register(self, run: Run) -> None: ...

    def unregister(self, run_id: str) -> None:
        """The run has stopped (ended, suspended, paused, or left by an error): no longer running."""
        ...

    def hold_paused(self, rs: RunState) -> None:
        """``rs`` was paused (``Runner.pause``): keep it, and when, for a resume by its id."""
        ...

    def cancel(self, run_id: str) -> bool: ...


class Run:
    """One run in progress. ``Runner.run`` drives it to the end; apps and tests may drive it
    by hand with :meth:`step` (one stage's work, then one transition) and inspect ``state``
    (the RunState), ``stage``, ``done``, ``events`` and, once done, ``result``."""

    __slots__ = (
        "_handlers",
        "_held",
        "_in_stage",
        "_loop",
        "_mark",
        "_overdue",
        "_own",
        "_save",
        "_stops",
        "_strict",
        "_terminals",
        "_timed_out",
        "_timer",
        "_waiter",
        "_yielded",
        "ctx",
        "machine",
        "pausing",
        "runner",
        "session",
        "state",
        "task",
    )

    def __init__(
        self,
        runner: RunHost,
        rs: RunState,
        *,
        sink: Callable[[Any], None] | None = None,
        stream_deltas: bool = False,
        register: bool = True,
        deps: Any = None,
    ) -> None:
        self.runner = runner
        self.state = rs
        machine = self.machine = runner.machine
        own = self._own = Observers(EventSink(sink)) if sink is not None else None
        if INSTRUMENTS.start or runner.observers.start:  # observers that watch this run alone
            own = self._own = runner.observers.start_run(self, INSTRUMENTS.start_run(self, own))
        watchers = []  # (a loop, not comprehensions: each would be a frame of every run's set-up)
        for o in (INSTRUMENTS, runner.observers, own):
            if o is not None and o.event:
                watchers.append(_watcher(o))
        self.ctx = RunContext(
            runner.tree,
            rs,
            watchers=watchers,
            stream_deltas=stream_deltas,
            features=machine.features,
            hooks=machine.hook_sets.__getitem__,  # (found once a machine: no call a run)
            budgets=machine.budgets,
            deps=deps,
        )
        if own is not None:
            self.ctx.tool_scopes, self.ctx.model_scopes = own.scopes("tool_scope"), own.scopes("model_scope")
        self.task: asyncio.Task[Any] | None = None
        self._loop: Any = None
        self._yielded = 0.0
        self._waiter = 0
        """``id()`` of the waiter first in the loop's line when last looked (see _must_yield):
        an id, not the handle, so a run never keeps another task's finished step alive."""
        self._held = 0
        self._mark: list[bool] | None = None
        """On a loop that is not asyncio's own: the marker this run last gave the loop (see _probe)."""
        self._timer: asyncio.TimerHandle | _Deadline | None = None
        """The run's one deadline (armed at its first step when it has ``timeout_s``): a place in the
        loop's shared watch, or for a deadline under ``COARSE_FROM_S`` away a timer of its own."""
        self._in_stage = False
        self._timed_out = False
        """The deadline timer cancelled the stage in progress (the runner takes it back)."""
        self._strict = runner.unverified
        """An opted-in machine (``Runner(agent, unverified=True)``): no transition past ``timeout_s``."""
        self._overdue = 0
        """Transitions taken since the run was cancelled or passed its deadline (see :meth:`_bounded`)."""
        self._handlers = runner.handlers
        self._terminals = machine.terminals
        self._stops = machine.stops
        self.pausing = False
        """``Runner.pause`` asked this run to stop at its next transition."""
        self.session: Any = None
        """The session a resumed run holds, kept beside it (:class:`~loopwright.stores.sessions.RunSession`)."""
        self._save = runner.checkpointer_for(self)
        if self._save is not None:
            self.ctx.store = getattr(runner, "store", None)
        if register:
            runner.register(self)
        if rs.seq == 0:
            self.ctx.record(RunStarted, rs.input)

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
        if nesting.parent() is not None and self.ctx.up is None:  # resumed in a tool of another run: its child
            self.ctx.up = nesting.rejoin(self.state)
        await self.steps(to_end=True)
        return self.ended()

    def ended(self) -> RunResult:
        """The result once ``steps(to_end=True)`` has returned (``Runner.pause``: paused here).
        ``Runner.run`` awaits ``steps`` then calls this, without ``run_to_end``'s coroutine."""
        if self.pausing and self.state.stage not in self._stops:
            return self._pause_here()
        return RunResult.of(self.state, self.ctx.log, self.machine)

    def _pause_here(self) -> RunResult:
        """``Runner.pause``: stop between two stages, with outcome ``"paused"``."""
        rs, runner = self.state, self.runner
        self.pausing = False
        self._disarm_deadline()
        runner.unregister(rs.run_id)
        runner.hold_paused(rs)
        rs.outcome = "paused"
        nesting.charge(rs)  # a nested run paused: what it spent goes up, its held pass back, its link dropped
        self.ctx.emit(Paused)
        rs.legs = (*rs.legs, self.ctx.log)  # a resume's result carries this leg's events too
        self._notify_finish()
        return RunResult.of(rs, self.ctx.log, self.machine)

    async def step(self) -> Row | None:
        """Do the current stage's work, then take one transition. Returns the row taken
        (None if the run had already ended). If the task running this is cancelled, the run
        still moves to ``cancelled`` (results kept) before ``CancelledError`` propagates."""
        return await self.steps(to_end=False)

    def _caught(
        self, stage: str, exc: BaseException, task: asyncio.Task[Any] | None
    ) -> tuple[BaseException | None, bool]:
        """What ``stage`` raising ``exc`` comes to: the exception the table's abort edge takes
        (None: none), and whether the task was cancelled from outside (the run ends cancelled,
        then the cancellation goes on up). A KeyboardInterrupt ends the run cancelled and goes
        on up; SystemExit and GeneratorExit are answered like any error; anything else (not
        :data:`loopwright.runtime.calls.ANSWERED`) goes on up, the run left as it was."""
        if isinstance(exc, asyncio.CancelledError):
            return None, self._cancelled_from_outside(task)
        if isinstance(exc, KeyboardInterrupt):
            self._interrupted(stage)
            raise exc
        return self._answerable(exc), False

    async def steps(self, to_end: bool) -> Row | None:  # noqa: C901, PLR0912, PLR0915 (the hot path, inlined on purpose: see below)
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
        resets = self.machine.resets
        cap, seen = rs.limits.max_transitions, len(rs.trace)  # the engine's own bound: see _bounded
        observers, own = self.runner.observers, self._own
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
                if loop is OTHER_LOOP and (mark := self._mark) is not None and not mark[0]:
                    self._held = held = self._held + 1  # (_probe's marker still waits: the loop has not run)
                    if held >= HOLD:
                        await asyncio.sleep(0)
                        self._yielded, self._waiter = _monotonic(), 0
                elif (
                    loop is None
                    or loop is OTHER_LOOP
                    or loop._ready
                    or (now := _monotonic()) - self._yielded > SLICE_S
                    or (loop._scheduled and loop._scheduled[0]._when <= now)
                ) and self._must_yield():
                    await asyncio.sleep(0)
                    self._yielded, self._waiter = _monotonic(), 0
                self._in_stage = True
                handler = handlers[stage]
                if handler is not decide:  # (decide does no work: its rows choose; no frame for it)
                    waits = handler(rs, ctx)
                    if waits is not None:
                        await waits
            except BaseException as exc:  # a stage never stops the loop (see _caught)
                raised, cancelled_from_outside = self._caught(stage, exc, task)
            finally:
                self._in_stage = False
            deadline = rs.deadline
            if deadline is not None:  # (the clock read once a step: the transition's time below is this)
                now = _clock()
                if self._timed_out or (not rs.deadline_hit and now >= deadline):
                    self._check_deadline(task)  # (its quiet case written out: a run with a deadline passes here)
            else:
                now = 0.0
            if raised is None:
                try:  # the table's choice (Run._choose, without its frame: this runs at every transition)
                    row = choosers[stage](rs)
                except Exception as exc:
                    row = self._unchosen(stage, exc)
            else:
                row = self._abort(stage, "stage", raised)
            if rs.cancel_requested or rs.deadline_hit or seen >= cap:
                row = self._bounded(row)  # (rare: the engine's own bounds, whatever the machine)
            dest = row.dest
            if (
                not row.records_limit
                and (dest not in stops or dest in terminals)
                and not ctx.watchers
                and not INSTRUMENTS.transition
                and not observers.transition
                and own is None
            ):  # _take's quiet case (the charge, the log's transition), without their three frames
                bound = row.bounded_by
                if bound is not None:  # (LoopMachine.charge)
                    charges = rs.charges
                    charges[bound] = charges.get(bound, 0) + 1
                    for reset in resets.get(bound, ()):
                        charges[reset] = 0
                rs.stage = dest
                rs.trace.append(dest)
                rs.seq += 1
                log = ctx.log
                iteration, agent = rs.iteration, rs.active_agent
                if iteration == log.iteration and agent == log.agent:  # (EventLog.transition)
                    log.entries.append(row)
                else:
                    log.entries.append((row, iteration, agent))
                    log.iteration, log.agent = iteration, agent
                log.stage = dest
                log.times.append(now or _clock())
                if dest in stops:  # (a terminal: _take's end of a run)
                    self._finish(row)
            else:
                self._take(row)
            seen += 1
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
        (:data:`loopwright.runtime.calls.ANSWERED`) propagates untouched, the run unregistered and left as
        it was (like a process that died: a store resumes it from its last checkpoint)."""
        if isinstance(exc, ANSWERED):
            return exc
        self.runner.unregister(self.state.run_id)
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

    def _bounded(self, row: Row) -> Row:
        """The engine's own bounds on the row the table chose (module docstring): ``row``, or the
        engine's row that ends the run (at its transition cap; cancelled or past its deadline,
        once the table has had as many transitions as the machine has states to end it)."""
        if row.dest in self._stops:
            return row
        rs = self.state
        cap = rs.limits.max_transitions
        if len(rs.trace) >= cap:
            return self._engine_end(
                row.source,
                "max_transitions",
                cap,
                f"the run took {cap} transitions (Limits(max_transitions={cap})) without ending; the last were "
                f"{' -> '.join(rs.trace[-6:])}: a cycle of machine {self.machine.name!r} that no budget bounds. "
                "Bound it (verify names it), or raise max_transitions if the run needs more",
            )
        if not (rs.cancel_requested or rs.deadline_hit):
            return row
        self._overdue += 1
        if self._overdue <= len(self.machine.states) and not (
            self._strict and (rs.cancel_requested or self._past_timeout())
        ):
            return row  # the table's own way to the end
        if rs.cancel_requested:
            return _engine_row(row.source, Stage.CANCELLED if Stage.CANCELLED in self._terminals else "", "cancelled")
        timeout = rs.limits.timeout_s or 0.0
        return self._engine_end(
            row.source,
            "timeout_s",
            timeout,
            f"the run passed its deadline (timeout_s={timeout:g}) in a cycle of machine {self.machine.name!r} "
            f"that no row ends ({' -> '.join(rs.trace[-6:])}); the engine ended it",
        )

    def _past_timeout(self) -> bool:
        """``timeout_s`` itself has passed (the loop's deadline, plus the salvage reserve)."""
        rs = self.state
        return rs.deadline is not None and _clock() >= rs.deadline + rs.limits.salvage_reserve

    def _engine_end(self, stage: str, limit: str, cap: float, message: str) -> Row:
        """The engine ends the run ``limit``, naming ``limit`` (a LimitReached event, and ``message``)."""
        rs = self.state
        if rs.limit is None:
            rs.limit = limit
            self.ctx.emit(LimitReached, limit=limit, value=float(cap), used=float(len(rs.trace)))
        rs.error = ErrorInfo(kind="limit", message=message)
        return _engine_row(stage, Stage.DONE if Stage.DONE in self._terminals else "", "limit")

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
        rs.seq += 1
        ctx.log.transition(row, rs.iteration, rs.active_agent)  # the StateEntered event, kept as the row
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
        self.runner.unregister(rs.run_id)
        for hook in self.machine.hook_sets["pause"]:
            hook(rs=rs, ctx=self.ctx)
        rs.outcome = "suspended"
        nesting.charge(rs)  # a nested run that waits: what it spent goes up, its held pass back, its link dropped
        rs.legs = (*rs.legs, self.ctx.log)  # a resume's result carries this leg's events too
        self._notify_finish()

    def _finish(self, row: Row) -> None:
        rs, ctx = self.state, self.ctx
        self._disarm_deadline()
        self.runner.unregister(rs.run_id)
        hooks = self.machine.hook_sets["finish"]
        last = rs.messages[-1] if rs.messages else None
        if hooks or (last is not None and last.role == "assistant" and ToolCall in map(type, last.parts)):
            why = f"the run ended in {rs.stage!r}"
            for hook in hooks:
                hook(rs=rs, ctx=ctx, why=why)
            answer_unrun_calls(rs, ctx, why)
        rs.outcome = row.outcome
        if rs.outcome in ("final", "salvaged"):
            rs.output = rs.text
        elif rs.outcome == "failed" and rs.error is None:
            rs.error = rs.model_error or ErrorInfo(kind="failed", message=f"the run failed in {row.source!r}")
        ctx.record(RunFinished, rs.outcome, rs.output, rs.error)
        nesting.charge(rs)
        if INSTRUMENTS.finish or self.runner.observers.finish or self._own is not None:
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

    # ------------------------------------------------------------------ the run's clock: fairness and deadline

    def _must_yield(self) -> bool:
        """Whether to let the event loop run before the next stage (not before the run's first).

        Another task waits (ready, or its timer due): the first time this run sees that
        waiter it goes on; if the same waiter is still first in line ``HOLD`` stages later,
        the loop has not run since, and the run yields. A waiter that changed means the loop
        ran in between (a stage suspended): counting starts again. So a run that suspends
        anyway (a model call) pays no extra round trip of the loop, and one that never
        suspends holds it for at most ``HOLD`` + 1 stages. With nothing waiting, the run
        still yields once per ``SLICE_S`` since its own last yield (I/O is polled then)."""
        if len(self.state.trace) < 2:
            return False
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._yielded = _monotonic()
            if not hasattr(loop, "_ready") or type(loop).time is not _BASE_TIME:
                loop = self._loop = OTHER_LOOP  # not asyncio's own: a marker tells when the loop has run
        if loop is OTHER_LOOP:
            return self._probe()
        ready = loop._ready
        if ready:
            waiter = ready[0]
        else:
            now = _monotonic()  # asyncio's own loops keep time.monotonic(): read it without a Python frame
            scheduled = loop._scheduled
            if not scheduled or scheduled[0]._when > now:
                self._waiter = 0
                return now - self._yielded > SLICE_S
            waiter = scheduled[0]
        if id(waiter) != self._waiter:  # (a reused id only makes the run yield sooner)
            self._waiter, self._held = id(waiter), 0
            return False
        self._held += 1
        return self._held >= HOLD

    def _probe(self) -> bool:
        """The fairness probe on any event loop (uvloop's has no ``_ready`` to look at): the run
        gives the loop a marker (``call_soon``) and goes on; when the loop has run the marker
        (a stage suspended, or the run yielded), the loop has run since, and a new marker is
        given; a marker still waiting ``HOLD`` stages later means the loop has not run, and
        the run yields. So a waiting task runs within ``HOLD`` + 1 stages, as on asyncio's own
        loop, and a run that suspends anyway pays no extra round trip of the loop (not a
        yield at every transition)."""
        mark = self._mark
        if mark is None or mark[0]:
            mark = self._mark = [False]
            asyncio.get_running_loop().call_soon(mark.__setitem__, 0, True)
            self._held = 0
            return False
        self._held += 1
        return self._held >= HOLD

    def _arm_deadline(self) -> None:
        """One deadline per run (not one per stage): when ``timeout_s`` runs out it marks the
        deadline and cancels the stage in progress, which the table then ends. The step loop
        itself notes a deadline passed at each step boundary (the clock read once a step); this
        is for a stage stuck in an await. A deadline ``COARSE_FROM_S`` or more away joins the
        loop's shared watch (:func:`loopwright.data.limits.watch`, the per-call bounds' own: no
        timer armed and cancelled per run, at most ``TICK_S`` late); a nearer one gets a timer."""
        rs = self.state
        if self._timer is not None or rs.deadline_hit or rs.deadline is None:
            return
        left = rs.deadline - _clock()
        if left >= _limits.COARSE_FROM_S and self.task is not None:
            deadline = self._timer = _limits.watch(left, _Deadline, self.task)
            deadline.run = self
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + left, self._deadline_passed)

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
        rs = self.state
        rs.deadline_hit = True
        self._cut_stage()
        reserve = rs.limits.salvage_reserve
        if self._strict and reserve > 0:  # an unverified machine: timeout_s itself cuts the stage in progress too
            self._timer = asyncio.get_running_loop().call_later(reserve, self._timeout_passed)

    def _timeout_passed(self) -> None:
        self._timer = None
        self._cut_stage()

    def _cut_stage(self) -> None:
        """Cancel the stage in progress (the runner takes the cancellation back: _take_back_cancel)."""
        task = self.task
        if self._in_stage and task is not None and not task.done():
            self._timed_out = True
            task.cancel()

    def _disarm_deadline(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

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


class _Deadline(_limits.Watched):
    """A run's deadline in the loop's shared watch: past it, the watch's tick calls
    :meth:`Run._deadline_passed` (not a cancellation of its own)."""

    __slots__ = ("run",)
    run: Run

    def fire(self) -> None:
        self.cancel()
        self.run._deadline_passed()

    def cancel(self) -> None:
        shared = self.shared
        if shared is not None:
            shared.live.discard(self)


def engine_stopped(rs: RunState) -> bool:
    """The engine's own bound ended the run (``Limits.max_transitions``, a deadline or a
    cancellation the table did not answer): the guard of the engine's rows (module docstring)."""
    return True


_ENGINE_ROWS: dict[tuple[str, str], Row] = {}


def _engine_row(stage: str, dest: str, outcome: str) -> Row:
    """``stage -> dest (engine_stopped)``, the engine's row that ends a run (``failed``, the
    abort row, if the machine has no terminal ``dest``)."""
    if not dest:
        return abort_row(stage)
    row = _ENGINE_ROWS.get((stage, dest))
    if row is None:
        row = _ENGINE_ROWS[stage, dest] = Row(stage, dest, (engine_stopped,), outcome=outcome, origin="engine")  # type: ignore[arg-type]
    return row


def _watcher(observers: Observers) -> Callable[[Any], None]:
    def watch(event: Any) -> None:
        observers.notify(observers.event, event)

    return watch
