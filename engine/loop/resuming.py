"""Resuming: how a :class:`~loopwright.loop.runner.Runner` continues a run that stopped.
``Runner`` inherits :class:`Resuming`: ``resume`` (and ``resume_sync``) take a suspended run's
result or state, or the id of a run paused in this process or kept in a store, check it can go
on (waiting, not claimed already, this runner's agent, its saved state trusted), claim it, cap
what it takes from its saved clock and turn counters at the agent's budgets, and run it to its
end; a run in a session saves it there. :func:`sync_run` is how ``run_sync`` and
``resume_sync`` drive a run without an event loop, closing the toolsets opened on the way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from ..data.errors import ConfigurationError, ResumeError
from ..data.events import Resumed
from ..data.result import RunResult
from ..data.run_state import RunState
from ..data.stage import Stage
from ..table.budgets import TURN_BUDGETS

if TYPE_CHECKING:
    from loopwright.states import Handler

    from ..runtime.agent import Agent, AgentTree
    from ..table.machine import LoopMachine
    from .run import Run

_clock = time.time


class Resuming:
    """The resume path of :class:`~loopwright.loop.runner.Runner` (which holds what it reads)."""

    if TYPE_CHECKING:
        agent: Agent
        tree: AgentTree
        machine: LoopMachine
        sessions: Any
        _handlers: dict[str, Handler]
        _active: dict[str, Run]
        _paused: dict[str, tuple[RunState, float]]
        _durable: Any
        _toolsets: tuple[Any, ...]
        _opened: list[Any]

        async def open_toolsets(self) -> None: ...
        async def aclose(self) -> None: ...
        def attach(self, rs: RunState, deps: Any = None) -> Run: ...
        def register(self, run: Run) -> None: ...
        def _own_limits(self, rs: RunState) -> None: ...

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


def sync_run(work: Coroutine[Any, Any, RunResult], runner: Resuming) -> RunResult:
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


__all__ = ["Resuming", "sync_run"]
