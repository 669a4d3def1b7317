"""Resuming a durable run from its store: a suspended run (its suspension claimed once) or a
crashed one (its worker dead); see :mod:`loopwright.durable.checkpoint` for what is resumed how.

:class:`Resumes` is the resume half of :class:`~loopwright.durable.checkpoint.Durable` (the
runner's store and settings); :func:`end_failed` ends a run whose store failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import PydanticSerializationError

from ..data.errors import LoopwrightError, ResumeError, RunBusy, redact
from ..data.events import ErrorInfo
from ..data.result import StoredLeg
from ..data.run_state import RunState, not_json_state
from ..data.stage import Stage
from ..stores.base import RunStore, SavedRun
from ..table.machine import abort_row
from .codec import decode_decisions, encode_decisions, rebuild
from .ownership import owner_alive
from .trust import check_saved_state

if TYPE_CHECKING:
    from ..data.result import RunResult

T = TypeVar("T")


class Resumes:
    """``runner.resume(...)`` and the resumes of saved states, for a runner's ``store`` (a run
    whose worker checkpointed less than ``lease_s`` ago on another host is not taken over)."""

    store: RunStore
    lease_s: float

    async def resume(
        self, runner: Any, run_id: str, decisions: Mapping[str, Any] | None, cancel: bool, deps: Any = None
    ) -> RunResult:
        """``runner.resume(run_id, ...)``: see the module docstring."""
        saved = await self.store.load(run_id)
        if saved is None:
            raise ResumeError(f"no run {run_id!r} in {self.store.url}; `loopwright runs list` shows the runs it holds")
        machine = runner.machine
        if saved.stage in machine.terminals:
            raise ResumeError(f"run {run_id!r} has ended (outcome {saved.outcome!r}); there is nothing to resume")
        if runner.is_running(run_id):
            raise ResumeError(f"run {run_id!r} is already running on this runner")
        rs = rebuild(saved)
        if rs.agent != runner.agent.name:
            raise ResumeError(f"run {run_id!r} belongs to agent {rs.agent!r}, not {runner.agent.name!r}")
        check_saved_state(rs, machine, runner.tree.agents)
        run = runner.attach(rs, deps)
        cp: Any = run.checkpointer
        try:
            await self._prepare(runner, run, cp, saved, decisions)
        except _StoreFailed as failed:  # nothing ran: the run as the store keeps it is resumed later
            cp.retire()
            return end_failed(run, self.store, failed.error)
        except BaseException:
            cp.retire()
            raise
        rs.legs = (StoredLeg(await self.store.events(run_id), rs.seq),)  # its result carries every leg
        runner.adopt(rs)
        rs.outcome = None
        if cancel:
            rs.cancel_requested = True
        runner.register(run)
        return await run.run_to_end()  # type: ignore[no-any-return]

    async def _prepare(
        self, runner: Any, run: Any, cp: Any, saved: SavedRun, decisions: Mapping[str, Any] | None
    ) -> None:
        """Claim (a suspension) or check (a crashed run), take the run, and restore what is not saved."""
        rs: RunState = run.state
        if rs.stage in runner.machine.waiting:
            await self._claim(run, cp, saved, decisions)
        else:
            self._crashed(saved, rs, decisions)
        cp.version = await _stored(self.store.take(rs.run_id, saved.version, cp.owner))
        cp.n_messages, cp.n_trace = len(saved.messages), len(saved.trace)
        await _stored(cp.replay_results(rs.seq))
        if rs.stage == Stage.REASON:  # the request is not saved (it is the history again): rebuild it
            attempt = rs.attempt
            waits = runner.handler(Stage.PREPROCESS)(rs, run.ctx)
            if waits is not None:  # a handler may be a plain function (it waits only when it must)
                await waits
            rs.attempt = attempt

    def _crashed(self, saved: SavedRun, rs: RunState, decisions: Mapping[str, Any] | None) -> None:
        """A run that is neither waiting nor ended: its worker died, or it is still running."""
        if owner_alive(saved.owner, saved.updated, self.lease_s):
            raise RunBusy(f"run {rs.run_id!r} is running (worker {saved.owner}); it cannot be resumed while it runs")
        if decisions:
            raise ResumeError(
                f"run {rs.run_id!r} is not waiting (its worker stopped in state {rs.stage!r}); resume it without "
                "decisions"
            )

    async def _claim(self, run: Any, cp: Any, saved: SavedRun, decisions: Mapping[str, Any] | None) -> None:
        """Claim the suspension, after the caller's decisions are checked (the features' resume
        hooks); a claim left by a worker that died is carried on with its decisions."""
        rs: RunState = run.state
        for hook in run.machine.hooks("resume"):
            hook(rs=rs, ctx=run.ctx, decisions=decisions or {})
        decided = await self._claimed(run, cp, saved, decisions)
        if decided is not decisions:
            for hook in run.machine.hooks("resume"):
                hook(rs=rs, ctx=run.ctx, decisions=decided)

    async def _claimed(
        self, run: Any, cp: Any, saved: SavedRun, decisions: Mapping[str, Any] | None
    ) -> Mapping[str, Any] | None:
        rs: RunState = run.state
        suspension = str(rs.seq)
        before = await _stored(self.store.claim(rs.run_id, suspension, cp.owner, encode_decisions(decisions or {})))
        if before is None:
            return decisions
        owner, claimed = before
        if owner_alive(owner, saved.updated, self.lease_s):
            raise RunBusy(f"run {rs.run_id!r} is being resumed by another worker ({owner}); it is not resumed twice")
        # the store's head is still this suspension: the worker that claimed it died before its
        # next checkpoint; carry on with the decisions it claimed
        waiting = rs.features.get("waiting")
        credential = {p.call_id for p in getattr(waiting, "pending", ()) if p.kind == "credential"}
        if decisions and encode_decisions(decisions) != claimed:
            raise ResumeError(
                f"this suspension of run {rs.run_id!r} was already resumed with other decisions (its worker "
                "crashed before finishing it); resume it with no decisions to carry those on"
            )
        return decode_decisions(claimed, credential)

    async def continue_paused(self, run: Any) -> None:
        """Resuming a run paused in this process (its pause was written): its new worker
        carries on the run's log."""
        rs: RunState = run.state
        cp: Any = run.checkpointer
        try:
            saved = await self.store.load(rs.run_id)
            if saved is not None:
                await self._take_over(cp, rs.run_id, saved)
        except BaseException:
            cp.retire()
            raise

    async def claim_copy(self, run: Any, decisions: Mapping[str, Any] | None) -> None:
        """Resuming a RunState/RunResult on a runner with a store: claim its suspension too, so
        a copy of the same saved state cannot be resumed twice."""
        rs: RunState = run.state
        cp: Any = run.checkpointer
        try:
            saved = await self.store.load(rs.run_id)
            if saved is not None and (len(saved.messages) > len(rs.messages) or len(saved.trace) > len(rs.trace)):
                raise ResumeError(
                    f"this saved state of run {rs.run_id!r} is older than the store's: it was already resumed (or "
                    f"ran on); a suspension is resumed once. Resume the run by its id: runner.resume({rs.run_id!r})"
                )
            before = await self.store.claim(rs.run_id, str(rs.seq), cp.owner, encode_decisions(decisions or {}))
            if before is not None:
                raise ResumeError(
                    f"this suspension of run {rs.run_id!r} was already resumed (a copy of the same saved state); "
                    "a suspension is resumed once"
                )
            if saved is not None:
                await self._take_over(cp, rs.run_id, saved)
                if not rs.legs:  # a copy loaded from JSON: its result carries every leg the store kept
                    rs.legs = (StoredLeg(await self.store.events(rs.run_id), rs.seq),)
        except BaseException:
            cp.retire()
            raise

    async def _take_over(self, cp: Any, run_id: str, saved: SavedRun) -> None:
        """This process's checkpoints continue the saved run's (its version taken in the store)."""
        cp.version = await self.store.take(run_id, saved.version, cp.owner)
        cp.n_messages, cp.n_trace = len(saved.messages), len(saved.trace)


class _StoreFailed(Exception):
    """A store call of a resume failed with ``error`` (not one of loopwright's errors)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


async def _stored(work: Awaitable[T]) -> T:
    """``await work``, a store call; its failure (other than a loopwright error) as :class:`_StoreFailed`."""
    try:
        return await work
    except LoopwrightError:
        raise
    except Exception as exc:
        raise _StoreFailed(exc) from exc


def end_failed(run: Any, store: RunStore, exc: Exception, stopped: bool = False, kept: bool = False) -> RunResult:
    """End ``run`` failed because ``store`` failed with ``exc`` (the store keeps the run as of
    its last checkpoint; ``kept``: the run's state could not be written, and its failed end is,
    so it is not resumed). A run that had stopped (``stopped``: it ended or suspended in memory,
    but that was not written) keeps its trace and takes outcome "failed"; else it takes the
    engine's abort edge from its state. Its result."""
    rs: RunState = run.state
    why = not_json_state(rs.state) if isinstance(exc, PydanticSerializationError) else None
    said = why or f"{type(exc).__name__}: {exc}"
    if kept:
        message = redact(
            f"the run's state cannot be saved: {said}; the run ended failed, and the store keeps it so "
            "(that value left out): start a new run once the cause is fixed"
        )
    else:
        message = redact(
            f"the run store ({type(store).__name__}) failed: {said}; it keeps the run as of "
            f"its last checkpoint: resume it (runner.resume({rs.run_id!r})) once the store can be written"
        )
    if stopped:
        if rs.error is not None and rs.outcome == "failed":
            message = f"{rs.error.message}; and {message}"
        rs.outcome, rs.error = "failed", ErrorInfo(kind="store", message=message)
    else:
        rs.error = ErrorInfo(kind="store", message=message)
        run.take(abort_row(rs.stage))
    return run.result  # type: ignore[no-any-return]
