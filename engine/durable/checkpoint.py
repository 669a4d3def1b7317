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

The parts: this module writes checkpoints (:class:`Checkpointer`) and holds a runner's settings
(:class:`Durable`); :mod:`~loopwright.durable.resume` resumes, :mod:`~loopwright.durable.ownership`
says whose a run is, :mod:`~loopwright.durable.codec` encodes heads, messages, results and
decisions, and :mod:`loopwright.stores.compact` a body's events.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import PydanticSerializationError
from pydantic_core import to_json as to_json  # (the serializer the fast JSON of parts and messages is checked with)

from ..data.errors import ConfigurationError, LoopwrightError
from ..data.run_state import RunState
from ..data.stage import Stage
from ..runtime.log import get_logger
from ..stores.base import Checkpoint, RunStore
from ..stores.compact import compact_events
from ..stores.sqlite import SQLiteStore
from ..table.machine import Row as _Row
from .codec import HeadWriter, body_json, load_result, plain_message, result_body, storable_state
from .codec import head_json as head_json
from .codec import plain_response as plain_response
from .codec import rebuild as rebuild
from .ownership import LIVE, new_owner
from .ownership import owner_alive as owner_alive
from .resume import Resumes
from .resume import end_failed as end_failed

if TYPE_CHECKING:
    from ..data.events import ToolCall, ToolResult
    from ..runtime.context import RunContext

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


class Durable(Resumes):
    """A runner's store and durability settings; makes each run's :class:`Checkpointer`."""

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
