"""Durable runs: every transition kept, written before each side effect; resuming from a store.

``Runner(agent, store=SQLiteStore("runs.db"))`` gives each run a :class:`Checkpointer` (the
runner's one store hook, called after each transition; it hands back a write to await before
the stages that have side effects, see the class). What it saves is append-only: the run's
head (state without history) is replaced, the new messages, trace entries and events are
appended, so a checkpoint's cost does not grow with the run. Each tool result is kept as its
call completes.

Resuming (``runner.resume(run_id, decisions)``):

- a **suspended** run: its suspension (named by the run's event count when it paused) is
  claimed in the store with the decisions, atomically; a second resume of the same suspension,
  from the store or from a copied JSON, in this process or another, is refused with
  :class:`ResumeError` before any call runs, and with :class:`RunBusy` while the first is
  still running it;
- a run that **crashed** (its worker died between checkpoints): it continues from its last
  checkpoint; the calls of the step in progress whose results were kept are answered from the
  store, the others run again (the one call in flight at the crash may run twice; tools get
  ``ctx.idempotency_key`` to make that harmless). A crash while resuming a suspension reapplies
  the claimed decisions (credentials are never stored: a call that waited for one asks again).

Two workers resuming one run: each ``take`` names the version it loaded; exactly one moves it
on, the other gets :class:`RunBusy`. A run whose worker is alive (this process, a live process
on this host, or a checkpoint younger than ``lease_s`` from another host) is not taken over.

The parts: this module writes checkpoints (:class:`Checkpointer`) and resumes from them
(:class:`Durable`, which holds a runner's settings; :func:`end_failed` ends a run whose store
failed); :mod:`~loopwright.durable.ownership` says whose a run is,
:mod:`~loopwright.durable.codec` encodes heads, messages, results and decisions, and
:mod:`loopwright.stores.compact` a body's events.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic_core import PydanticSerializationError
from pydantic_core import to_json as to_json  # (the serializer the fast JSON of parts and messages is checked with)

from ..data.errors import ConfigurationError, LoopwrightError, ResumeError, RunBusy, redact
from ..data.events import ErrorInfo
from ..data.result import StoredLeg
from ..data.run_state import RunState, not_json_state
from ..data.stage import Stage
from ..runtime.log import get_logger
from ..stores.base import Checkpoint, RunStore, SavedRun
from ..stores.compact import compact_events
from ..stores.sqlite import SQLiteStore
from ..table.machine import Row as _Row
from ..table.machine import abort_row
from .codec import (
    HeadWriter,
    body_json,
    decode_decisions,
    encode_decisions,
    load_result,
    plain_message,
    result_body,
    storable_state,
)
from .codec import head_json as head_json
from .codec import plain_response as plain_response
from .codec import rebuild as rebuild
from .ownership import LIVE, new_owner, owner_alive
from .trust import check_saved_state

if TYPE_CHECKING:
    from ..data.events import ToolCall, ToolResult
    from ..data.result import RunResult
    from ..runtime.context import RunContext

T = TypeVar("T")
Durability = Literal["transition", "iteration", "exit"]
DURABILITY: tuple[Durability, ...] = ("transition", "iteration", "exit")


TEMP = "temp:"
"""The prefix of the run-only state keys (:mod:`loopwright.loop.sessions`): never kept in the
store once the run has ended."""
TEMP_IN_HEAD = b'"temp:'


def without_temp(head: bytes) -> bytes:
    """A stored head (whole, or the changes) without the ``temp:`` keys of its state."""
    data = json.loads(head)
    state = data.get("state")
    if isinstance(state, dict):
        data["state"] = {key: value for key, value in state.items() if not key.startswith(TEMP)}
    return json.dumps(data, separators=(",", ":")).encode()


_STORE_TYPES: set[type] = set()
"""The classes whose instances passed the RunStore check (``isinstance`` against a protocol
takes ~100 us: a runner per run would pay it each time)."""


def _is_store(store: object) -> bool:
    if type(store) in _STORE_TYPES:
        return hasattr(store, "url")  # an instance attribute: checked on each
    if isinstance(store, RunStore):
        _STORE_TYPES.add(type(store))
        return True
    return False


def _inline(store: RunStore) -> SQLiteStore | None:
    """``store`` when it is a SQLiteStore that writes on the caller's thread and whose ``save``
    and ``save_result`` are its own (a subclass that overrides either is awaited as usual)."""
    cls = type(store)
    if (
        isinstance(store, SQLiteStore)
        and getattr(store, "inline", False)
        and cls.save is SQLiteStore.save
        and cls.save_result is SQLiteStore.save_result
    ):
        return store
    return None


class Durable:
    """A runner's store and durability settings; makes each run's :class:`Checkpointer`, and
    resumes its runs from the store (``runner.resume(...)`` and the resumes of saved states; a run
    whose worker checkpointed less than ``lease_s`` ago on another host is not taken over)."""

    def __init__(self, store: RunStore, durability: str = "transition", lease_s: float = 30.0) -> None:
        if not _is_store(store):
            raise ConfigurationError(
                f"store= takes a RunStore (SQLiteStore, PostgresStore or one of your own), got {type(store).__name__}"
            )
        if durability not in DURABILITY:
            raise ConfigurationError(f"durability must be one of {', '.join(DURABILITY)}, got {durability!r}")
        self.store = store
        self.durability = durability
        self.lease_s = lease_s
        self.inline = _inline(store)
        """The store, when its saves run on the caller's thread and can skip the coroutine."""

    def attach(self, run: Any) -> Checkpointer:
        return Checkpointer(self, run)

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


PURE_STAGES: frozenset[str] = frozenset({Stage.PREPROCESS, Stage.POSTPROCESS, Stage.DECIDE})
"""The stages without a side effect a checkpoint protects: they build the request, check the
reply and choose the next step (request processors and output checks run again on a resume).
A transition into one of them is written with the next checkpoint, in one transaction."""


class Checkpointer:
    """One run's checkpoints (the runner calls it after each transition).

    At the default durability every transition is kept, and written, in one transaction with
    the transitions before it, when the run enters a stage that has side effects (``reason``
    calls the model, ``act`` runs tools, any feature's state may do I/O) or stops: the write is
    durable before the side effect starts. The transitions between two such writes only build
    and check requests (:data:`PURE_STAGES`); a crash among them resumes from the write before,
    and nothing that touched the world runs again (the model call whose reply was not yet
    written is asked again, as the call in flight).

    Each tool result is written as its call completes (``ctx.on_result``), so the step of tools
    written on entering ``act`` replays from the store: the model call that follows it needs
    no write of its own (a crash during it resumes at ``act``, every finished call answered
    from the store). A tool step thus costs one checkpoint and one result per call."""

    __slots__ = (
        "__weakref__",
        "defer",
        "durable",
        "guards",
        "heads",
        "kinds",
        "log_at",
        "n_events",
        "n_messages",
        "n_trace",
        "now",
        "owner",
        "replayable",
        "run",
        "saved_results",
        "scrub",
        "stops",
        "store",
        "temp",
        "version",
    )

    def __init__(self, durable: Durable, run: Any) -> None:
        self.durable = durable
        self.store = durable.store
        self.now: Callable[[Checkpoint, int, str], int] | None = (
            None if durable.inline is None else durable.inline.save_now
        )
        """The store's save without a coroutine, when it writes on the caller's thread (see
        :meth:`SQLiteStore.save_now`): the checkpoint is written in the transition's call."""
        self.run = run
        """The run (None once it stopped: the run holds its checkpointer, and the cycle would leave
        every finished run, its history included, to the cyclic garbage collector)."""
        self.owner = new_owner()
        self.version = 0
        self.n_messages = self.n_trace = 0  # a resume from the store sets them to what it holds
        self.n_events = 0
        self.log_at: Any = None
        """Where the run was at the last event saved (``compact_events`` continues from it)."""
        self.guards: dict[str, int] = {}
        """This worker's numbers of the guard labels it wrote (each body names the new ones)."""
        self.kinds: set[str] = set()
        """The event types whose field names this worker wrote (each body names the new ones)."""
        self.heads = HeadWriter()
        """The heads this worker wrote (whole, or the changes since the previous checkpoint)."""
        self.replayable = False
        """The last write was on entering ``act`` and only pure stages followed."""
        self.saved_results: dict[str, ToolResult] = {}
        self.temp = False
        """A head this worker wrote held a ``temp:`` key (the run's end removes them from the store)."""
        self.scrub: str | None = None
        """The run whose stored heads lose their ``temp:`` keys after this (its final) write."""
        self.stops, self.defer = _stops(run.machine, durable.durability)
        LIVE[self.owner] = self
        run.ctx.on_result = _keeper(self.store, durable.inline)

    def retire(self) -> None:
        """This worker does not (or no longer) run the run."""
        LIVE.pop(self.owner, None)

    def running(self) -> bool:
        run = self.run
        return self.owner in LIVE and run is not None and (run.task is None or not run.task.done())

    def __call__(self, row: _Row) -> Awaitable[None] | None:
        """After a transition: the checkpoint to await, or None when it goes with the next one
        or was written already (a pausing run writes at once: it stops here)."""
        dest = row.dest
        if self.run.pausing:
            pass
        elif dest in self.defer:
            return None
        elif dest == Stage.REASON and self.replayable:
            self.replayable = False  # the model call after a step of tools needs no write: see the class
            return None
        self.replayable = dest == Stage.ACT
        now = self.now
        if now is None:
            return self._write(dest in self.stops)
        try:
            cp = self._checkpoint()
        except _Unsaveable as unsaveable:
            return self._end_unsaveable(unsaveable.error, dest in self.stops)
        except BaseException:
            LIVE.pop(self.owner, None)
            raise
        return self._saved_now(now, cp, dest in self.stops)

    def _saved_now(
        self, now: Callable[[Checkpoint, int, str], int], cp: Checkpoint, stop: bool
    ) -> Awaitable[None] | None:
        try:
            self.version = now(cp, self.version, self.owner)
        except Exception as exc:
            self._not_saved(exc, stop)
            return None
        except BaseException:
            LIVE.pop(self.owner, None)
            raise
        if stop:  # the run stopped (a resume makes a new run and checkpointer)
            LIVE.pop(self.owner, None)
            self.run = None
            if self.scrub is not None:
                return self._scrub()
        return None

    async def _write(self, stop: bool, cp: Checkpoint | None = None) -> None:
        try:
            if cp is None:
                cp = self._checkpoint()
        except _Unsaveable as unsaveable:
            flush = self._end_unsaveable(unsaveable.error, stop)
            if flush is not None:
                await flush
            return
        except BaseException:
            LIVE.pop(self.owner, None)
            raise
        try:
            self.version = await self.store.save(cp, self.version, self.owner)
        except Exception as exc:
            self._not_saved(exc, stop)
            return
        except BaseException:
            LIVE.pop(self.owner, None)
            raise
        if stop:  # the run stopped (a resume makes a new run and checkpointer)
            LIVE.pop(self.owner, None)
            self.run = None
            if self.scrub is not None:
                await self._scrub()

    def _end_unsaveable(self, error: Exception, stop: bool) -> Awaitable[None] | None:
        """The run's state holds a value no store can keep (a live object a tool put in its
        state): the run ends failed, that value named, and that end is written, the value
        replaced by a marker (:func:`~loopwright.durable.codec.storable_state`). Resuming it
        then says it has ended: nothing runs again (the store does not keep it at the step
        before, where every resume would call the model or the tools once more)."""
        run = self.run
        end_failed(run, self.store, error, stop, kept=True)
        rs: RunState = run.state
        state = rs.state
        rs.state = storable_state(state)
        self.heads = HeadWriter()  # a whole head
        try:
            cp = self._checkpoint()
        except _Unsaveable as again:  # (another field than the state: the store keeps the step before)
            get_logger().warning("store.failed_run_not_saved", run_id=rs.run_id, error=str(again.error))
            LIVE.pop(self.owner, None)
            self.run = None
            return None
        finally:
            rs.state = state
        if self.now is None:
            return self._write(True, cp)
        return self._saved_now(self.now, cp, True)

    async def _scrub(self) -> None:
        """The run ended: its ``temp:`` keys, kept in its heads while it went on (a crashed or
        suspended run resumes with them), are removed from every head the store holds (with a
        store that can: ``rewrite_heads``). A store that fails here is logged: the run has ended."""
        run_id, self.scrub = self.scrub, None
        rewrite = getattr(self.store, "rewrite_heads", None)
        if rewrite is None or run_id is None:
            return
        try:
            await rewrite(run_id, TEMP_IN_HEAD, without_temp)
        except Exception as exc:
            get_logger().warning("store.temp_keys_kept", run_id=run_id, error=f"{type(exc).__name__}: {exc}")

    def _not_saved(self, exc: Exception, stop: bool) -> None:
        """The checkpoint was not written: another worker took the run (RunBusy) or the run id
        is taken (errors of loopwright's: raised); else the store failed (a full or read-only
        disk, a lost connection) and the run ends failed, that error named (:func:`end_failed`:
        the run's state in the store is its last checkpoint, from which a resume goes on).
        This worker writes no more."""
        LIVE.pop(self.owner, None)
        run, self.run = self.run, None
        if isinstance(exc, LoopwrightError):
            raise exc
        end_failed(run, self.store, exc, stop)

    def _checkpoint(self) -> Checkpoint:
        run = self.run
        rs: RunState = run.state
        log = run.ctx.log
        messages, trace = rs.messages, rs.trace
        n_events = len(log.entries)
        at = self.log_at or log.start
        response = rs.response
        events, kinds, self.log_at, guards = compact_events(log, self.n_events, at, self.kinds, self.guards, response)
        new: list[Any] = messages[self.n_messages :]
        parts = None if response is None else response.parts
        for i, message in enumerate(new):
            if message.parts is parts and message.role == "assistant":
                new[i] = [message.agent]  # the reply's message: its parts are the head's response's
            else:
                new[i] = plain_message(message)
        body = {"s": log.base + self.n_events + 1, "w": at, "m": new, "t": trace[self.n_trace :], "e": events}
        if kinds:
            body["k"] = kinds
        if guards:
            body["g"] = guards
        state = rs.state
        if state and not self.temp:
            self.temp = any(key.startswith(TEMP) for key in state)
        try:
            if self.temp and rs.outcome is not None and rs.outcome != "suspended":  # the run's end: temp: keys go
                self.scrub = rs.run_id
                rs.state = {key: value for key, value in state.items() if not key.startswith(TEMP)}
                try:
                    head = self.heads(rs)
                finally:
                    rs.state = state
            else:
                head = self.heads(rs)
        except PydanticSerializationError as exc:
            raise _Unsaveable(exc) from exc
        cp = Checkpoint(rs.run_id, rs.agent, rs.stage, rs.outcome, rs.seq, head, body_json(body))
        self.n_messages, self.n_trace, self.n_events = len(messages), len(trace), n_events
        return cp

    # ------------------------------------------------------------------ tool results

    async def replay_results(self, after_seq: int) -> None:
        """A resumed run: calls of the interrupted step that completed are answered from the store."""
        run = self.run
        kept = await self.store.results(run.state.run_id, after_seq)
        if not kept:
            return
        self.saved_results = {call_id: load_result(body) for call_id, body in kept.items()}
        ctx = run.ctx
        ctx.gates = (*ctx.gates, self._replay)  # after the features' gates: they keep their bookkeeping

    def _replay(self, call: ToolCall, rs: RunState, ctx: RunContext) -> ToolResult | None:
        return self.saved_results.pop(call.id, None)


class _Unsaveable(Exception):
    """A checkpoint's head could not be written as JSON (``error``: why): the run cannot be kept as it is."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _keeper(
    store: RunStore, inline: SQLiteStore | None
) -> Callable[[ToolCall, ToolResult, RunContext], Awaitable[None]]:
    """A run's ``ctx.on_result``: a call ran, its result is kept before the call counts as
    done (it holds the store only: the run's context holds it)."""
    if inline is not None:
        save_now = inline.save_result_now

        async def on_result_now(call: ToolCall, answered: ToolResult, ctx: RunContext) -> None:
            save_now(ctx.run_id, call.id, ctx.run_state.seq, result_body(answered))

        return on_result_now

    async def on_result(call: ToolCall, answered: ToolResult, ctx: RunContext) -> None:
        body = result_body(answered)
        await store.save_result(ctx.run_id, call.id, ctx.run_state.seq, body)

    return on_result


_STOPS: weakref.WeakKeyDictionary[Any, dict[str, tuple[frozenset[str], frozenset[str]]]] = weakref.WeakKeyDictionary()


def _stops(machine: Any, durability: str) -> tuple[frozenset[str], frozenset[str]]:
    """The machine's states where a run stops, and those whose entry is written with the next
    checkpoint at ``durability`` (kept by machine: a machine serves many runs)."""
    by_durability = _STOPS.get(machine)
    if by_durability is None:
        by_durability = _STOPS[machine] = {}
    known = by_durability.get(durability)
    if known is None:
        stops = machine.stops
        defer = frozenset(s for s in machine.states if s not in stops and not _writes(durability, s))
        known = by_durability[durability] = (stops, defer)
    return known


def _writes(durability: str, state: str) -> bool:
    """Whether entering ``state`` (not a stop) writes a checkpoint at ``durability``."""
    if durability == "transition":
        return state not in PURE_STAGES
    return durability == "iteration" and state == Stage.PREPROCESS


MakeRun = Callable[[RunState], Any]


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
