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
"""

from __future__ import annotations

import itertools
import operator
import os
import socket
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import TypeAdapter
from pydantic_core import to_json

from .. import features as _features  # the built-in features' run-state slices, to load saved states
from ..data.decisions import Approve, Deny
from ..data.errors import ConfigurationError, LoopwrightError, ResumeError, RunBusy, redact
from ..data.events import (
    EVENT_BY_TYPE,
    EVENT_FIELDS,
    EVENT_TYPE,
    DocumentPart,
    ErrorInfo,
    EventBase,
    ImagePart,
    Message,
    ModelResponded,
    ModelResponse,
    ProviderPart,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolCalled,
    ToolResult,
    Usage,
    is_reply,
    reply_of,
)
from ..data.result import StoredLeg
from ..data.run_state import SAVED_FIELDS, RunState, slice_adapter
from ..data.stage import Stage
from ..stores.base import FULL_HEAD_EVERY, Checkpoint, RunStore, SavedRun
from ..stores.sqlite import SQLiteStore
from ..table.machine import Row as _Row
from ..table.machine import abort_row
from .trust import check_saved_state

if TYPE_CHECKING:
    from ..data.result import RunResult
    from ..runtime.context import EventLog, RunContext, Where

T = TypeVar("T")
Durability = Literal["transition", "iteration", "exit"]
DURABILITY: tuple[Durability, ...] = ("transition", "iteration", "exit")
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_RESULT: TypeAdapter[ToolResult] = TypeAdapter(ToolResult)
_HOST = socket.gethostname()
_LIVE: weakref.WeakValueDictionary[str, Checkpointer] = weakref.WeakValueDictionary()
"""This process's checkpointers of runs in progress, by owner token."""


_OWNER_PREFIX = uuid.uuid4().hex[:8]
_owners = itertools.count(1)


def new_owner() -> str:
    """A worker token: host, process id, and a part unique in this process (a random prefix,
    drawn once, and a counter: no system call for randomness per run)."""
    return f"{_HOST}|{os.getpid()}|{_OWNER_PREFIX}{next(_owners):x}"


def owner_alive(owner: str, updated: float, lease_s: float) -> bool:
    """Whether the worker ``owner`` may still be running its run."""
    host, _, rest = owner.partition("|")
    pid_text, _, _token = rest.partition("|")
    if host != _HOST:
        return time.time() - updated < lease_s
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        cp = _LIVE.get(owner)
        return cp is not None and cp.running()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_a_zombie(pid)


def _not_a_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


_saved_fields = operator.attrgetter(*SAVED_FIELDS)
_HOT = ("stage", "seq", "iteration", "attempt", "tool_calls_made")
"""Head fields a head of changes always carries (small, and most change at every checkpoint)."""
_REPLACED = ("usage", "response", "text")
"""Head fields a head of changes carries when they are not the object they were (a reply, its
text and the usage are replaced at every model call)."""
_IN_PLACE = ("state", "vetoes", "charges", "turn_start")
"""Head fields a run changes in place (dicts): a head of changes carries each unless it is
empty and was empty."""
_COLD = tuple(
    name for name in SAVED_FIELDS if name not in {*_HOT, *_REPLACED, *_IN_PLACE, "messages", "trace", "features"}
)
"""The others (replaced, rarely): compared as one tuple, then one by one if that differs."""
_cold_fields = operator.attrgetter(*_COLD)

_FLAT: frozenset[type[Any]] = frozenset({TextPart, ThoughtPart, ToolCall, ToolResult, ProviderPart, ImagePart,
                                         DocumentPart, Usage})  # fmt: skip
"""Models whose JSON is their ``__dict__``'s (no model fields, aliases, or serializers of their
own; tested): a checkpoint hands those dicts to ``to_json``, a third of the cost of the models'
serializers (a part is a member of a union there)."""


def plain_message(message: Any) -> Any:
    """``message`` as ``to_json`` writes it fastest (the same JSON as its own serializer's)."""
    if type(message) is not Message:
        return message
    return {"role": message.role, "parts": [p.__dict__ if type(p) in _FLAT else p for p in message.parts],
            "agent": message.agent}  # fmt: skip


def plain_response(response: Any) -> Any:
    """``response`` (a reply) as ``to_json`` writes it fastest (the same JSON as its own serializer's)."""
    if type(response) is not ModelResponse:
        return response
    out = dict(response.__dict__)
    out["parts"] = [p.__dict__ if type(p) in _FLAT else p for p in response.parts]
    usage = response.usage
    if type(usage) is Usage:
        out["usage"] = usage.__dict__
    return out


_SLICE_JSON: dict[str, tuple[Callable[[Any], bytes], bytes]] = {}
"""By feature: its slice's serializer and its JSON key (a slice's class never changes: see
``register_slice``)."""


def features_json(features: Mapping[str, Any]) -> bytes:
    """The features' slices as JSON (``RunState.features`` as a saved state holds it)."""
    if not features:
        return b"{}"
    out: list[bytes] = []
    for name, value in features.items():
        known = _SLICE_JSON.get(name)
        if known is None:
            known = _SLICE_JSON[name] = (slice_adapter(name).serializer.to_json, to_json(name) + b":")
        out.append(known[1] + known[0](value))
    return b"{" + b",".join(out) + b"}"


def head_json(rs: RunState) -> bytes:
    """The run's state without its history (``messages`` and ``trace`` empty)."""
    return _whole_head(_saved_fields(rs), features_json(rs.features))


def _whole_head(values: tuple[Any, ...], features: bytes) -> bytes:
    saved = dict(zip(SAVED_FIELDS, values, strict=True))
    saved["messages"] = saved["trace"] = ()
    del saved["features"]
    saved["response"] = plain_response(saved["response"])
    usage = saved["usage"]
    if type(usage) is Usage:
        saved["usage"] = usage.__dict__
    return to_json(saved)[:-1] + b',"features":' + features + b"}"


def rebuild(saved: SavedRun) -> RunState:
    """A RunState from a store's head, messages and trace (a slice of a feature of your own
    loads once the module that defines the feature is imported)."""
    assert _features.BUILT_IN_MACHINES
    rs = RunState.from_json(saved.head)
    rs.messages = [
        _MESSAGE.validate_json(m) if isinstance(m, bytes) else _MESSAGE.validate_python(m) for m in saved.messages
    ]
    rs.trace = list(saved.trace)
    return rs


def encode_decisions(decisions: Mapping[str, Any]) -> bytes:
    """Decisions as stored with a claim (credentials are not stored: a marker only)."""
    import json

    out: dict[str, Any] = {}
    for call_id, decision in decisions.items():
        if isinstance(decision, Approve | Deny):
            out[call_id] = decision.model_dump()
        else:
            out[call_id] = {"type": "value", "value": decision}
    return json.dumps(out, sort_keys=True, default=str).encode()


def decode_decisions(data: bytes, credential_calls: set[str]) -> dict[str, Any]:
    import json

    out: dict[str, Any] = {}
    for call_id, d in json.loads(data).items():
        if d["type"] == "approve":
            out[call_id] = Approve()
        elif d["type"] == "deny":
            out[call_id] = Deny(reason=d.get("reason", ""))
        elif call_id not in credential_calls:
            out[call_id] = d["value"]
    return out


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

    # ------------------------------------------------------------------ resume

    async def resume(self, runner: Any, run_id: str, decisions: Mapping[str, Any] | None, cancel: bool) -> RunResult:
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
        run = runner.attach(rs)
        cp: Checkpointer = run.checkpointer
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
        self, runner: Any, run: Any, cp: Checkpointer, saved: SavedRun, decisions: Mapping[str, Any] | None
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

    async def _claim(self, run: Any, cp: Checkpointer, saved: SavedRun, decisions: Mapping[str, Any] | None) -> None:
        """Claim the suspension, after the caller's decisions are checked (the features' resume
        hooks); a claim left by a worker that died is carried on with its decisions."""
        rs: RunState = run.state
        for hook in run.machine.hooks("resume"):
            hook(rs, run.ctx, decisions or {})
        decided = await self._claimed(run, cp, saved, decisions)
        if decided is not decisions:
            for hook in run.machine.hooks("resume"):
                hook(rs, run.ctx, decided)

    async def _claimed(
        self, run: Any, cp: Checkpointer, saved: SavedRun, decisions: Mapping[str, Any] | None
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
        cp: Checkpointer = run.checkpointer
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
        cp: Checkpointer = run.checkpointer
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

    async def _take_over(self, cp: Checkpointer, run_id: str, saved: SavedRun) -> None:
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


def end_failed(run: Any, store: RunStore, exc: Exception, stopped: bool = False) -> RunResult:
    """End ``run`` failed because ``store`` failed with ``exc`` (the store keeps the run as of
    its last checkpoint). A run that had stopped (``stopped``: it ended or suspended in memory,
    but that was not written) keeps its trace and takes outcome "failed"; else it takes the
    engine's abort edge from its state. Its result."""
    rs: RunState = run.state
    message = redact(
        f"the run store ({type(store).__name__}) failed: {type(exc).__name__}: {exc}; it keeps the run as of "
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


def compact_events(  # noqa: C901, PLR0912 (every checkpoint's loop, its cases written out)
    log: EventLog, start: int, at: Where, written: set[str], guards: dict[str, int], response: Any = None
) -> tuple[list[Any], dict[str, tuple[str, ...]], Where, list[Any]]:
    """The log's events from entry ``start`` as a store keeps them (the ``"e"`` of a body, see
    :mod:`loopwright.stores.base`), read straight from the compact entries
    (:data:`loopwright.context.LogEntry`; nothing is built): a transition ``[time, source,
    dest, guard number]``; another event ``[type, time, *its own field values]``; before an
    entry recorded at a new iteration or agent (or stage, for an event) ``[null, stage,
    iteration, agent]``; a built event as itself. A ``model_responded`` of ``response`` (the
    run's latest reply, in the head written with these events) is ``["model_responded",
    time]``: the reply is kept once.

    Also returned: the own field names of the types not in ``written`` (added to it); where the
    run was after the last entry (``at``: before ``start``); and ``[number, guard]`` for each
    guard label not yet in ``guards`` (this worker's numbering of the labels, added to it)."""
    times, entries = log.times, log.entries
    out: list[Any] = []
    kinds: dict[str, tuple[str, ...]] = {}
    new_guards: list[Any] = []
    stage, iteration, agent = at
    for entry, when in zip(entries[start:], times[start:].tolist(), strict=True):
        kind_of = type(entry)
        if kind_of is ToolCall:  # a tool_called kept as the call itself (context.LogEntry)
            entry, kind_of = (_TOOL_CALLED, entry), tuple
        if kind_of is tuple:
            first = entry[0]
            placed = type(first)
            if placed is str:  # (kind, *values)
                kind, values = first, entry[1:]
            elif placed is tuple or placed is int:  # ((stage, iteration, agent) or iteration, kind, *values)
                stage, iteration, agent = first if placed is tuple else (stage, first, agent)
                out.append([None, stage, iteration, agent])
                kind, values = entry[1], entry[2:]
            else:  # (row, iteration, agent): a transition where the iteration or agent changed
                stage, iteration, agent = first.dest, entry[1], entry[2]
                out.append([None, stage, iteration, agent])
                entry, kind = first, None
            if kind is not None:
                if kind == _MODEL_RESPONDED:
                    if response is not None and is_reply(values, response):
                        out.append([kind, when])  # the head's response
                    else:  # the reply, or its values (see own_values)
                        out.append([kind, when, values[0] if len(values) == 1 else reply_of(values)])
                elif kind == _TOOL_CALLED and len(values) == 1:  # the call itself (see own_values)
                    call = values[0]
                    out.append([kind, when, call.id, call.name, call.args])
                else:
                    out.append([kind, when, *values])
                if kind not in written:
                    written.add(kind)
                    kinds[kind] = EVENT_FIELDS[EVENT_BY_TYPE[kind]]
                continue
        elif kind_of is not _Row and isinstance(entry, EventBase):  # a built event
            stage, iteration, agent = entry.state, entry.iteration, entry.agent
            out.append(entry)
            continue
        stage = entry.dest  # a transition (the commonest entry)
        number = guards.get(entry.label)
        if number is None:
            number = guards[entry.label] = len(guards)
            new_guards.append([number, entry.label])
        out.append([when, entry.source, stage, number])
    return out, kinds, (stage, iteration, agent), new_guards


_MODEL_RESPONDED = EVENT_TYPE[ModelResponded]
_TOOL_CALLED = EVENT_TYPE[ToolCalled]


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
        "before",
        "defer",
        "durable",
        "guards",
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
        "stops",
        "store",
        "version",
        "wholes",
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
        self.before: tuple[Any, ...] = ()
        """At the previous checkpoint (none before the first): the cold fields, the replaced
        ones, which dicts changed in place were not empty, and the features' slices as JSON."""
        self.wholes = -1
        """Checkpoints since the last whole head (modulo FULL_HEAD_EVERY)."""
        self.replayable = False
        """The last write was on entering ``act`` and only pure stages followed."""
        self.saved_results: dict[str, ToolResult] = {}
        self.stops, self.defer = _stops(run.machine, durable.durability)
        _LIVE[self.owner] = self
        run.ctx.on_result = _keeper(self.store, durable.inline)

    def retire(self) -> None:
        """This worker does not (or no longer) run the run."""
        _LIVE.pop(self.owner, None)

    def running(self) -> bool:
        run = self.run
        return self.owner in _LIVE and run is not None and (run.task is None or not run.task.done())

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
            self.version = now(self._checkpoint(), self.version, self.owner)
        except Exception as exc:
            self._not_saved(exc, dest in self.stops)
            return None
        except BaseException:
            _LIVE.pop(self.owner, None)
            raise
        if dest in self.stops:  # the run stopped (a resume makes a new run and checkpointer)
            _LIVE.pop(self.owner, None)
            self.run = None
        return None

    async def _write(self, stop: bool) -> None:
        try:
            self.version = await self.store.save(self._checkpoint(), self.version, self.owner)
        except Exception as exc:
            self._not_saved(exc, stop)
            return
        except BaseException:
            _LIVE.pop(self.owner, None)
            raise
        if stop:  # the run stopped (a resume makes a new run and checkpointer)
            _LIVE.pop(self.owner, None)
            self.run = None

    def _not_saved(self, exc: Exception, stop: bool) -> None:
        """The checkpoint was not written: another worker took the run (RunBusy) or the run id
        is taken (errors of loopwright's: raised); else the store failed (a full or read-only
        disk, a lost connection) and the run ends failed, that error named (:func:`end_failed`:
        the run's state in the store is its last checkpoint, from which a resume goes on).
        This worker writes no more."""
        _LIVE.pop(self.owner, None)
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
        cp = Checkpoint(rs.run_id, rs.agent, rs.stage, rs.outcome, rs.seq, self._head(rs), to_json(body))
        self.n_messages, self.n_trace, self.n_events = len(messages), len(trace), n_events
        return cp

    def _head(self, rs: RunState) -> bytes:  # noqa: C901 (every checkpoint's: each field's case written out)
        """The whole head at this worker's first checkpoint and every FULL_HEAD_EVERY-th after
        it; between those, the fields that changed since the previous checkpoint (see
        ``_HOT``, ``_REPLACED``, ``_IN_PLACE`` and ``_COLD``; the history is in the bodies)."""
        features = features_json(rs.features)
        cold = _cold_fields(rs)
        usage, response, text = rs.usage, rs.response, rs.text
        state, vetoes, charges, turn_start = rs.state, rs.vetoes, rs.charges, rs.turn_start
        held = (bool(state), bool(vetoes), bool(charges), bool(turn_start))
        before = self.before
        self.before = (cold, usage, response, text, held, features)
        self.wholes = (self.wholes + 1) % FULL_HEAD_EVERY
        if not before or not self.wholes:
            return _whole_head(_saved_fields(rs), features)
        was_cold, was_usage, was_response, was_text, was_held, was_features = before
        head: dict[str, Any] = {"~": 1, "stage": rs.stage, "seq": rs.seq, "iteration": rs.iteration,
                                "attempt": rs.attempt, "tool_calls_made": rs.tool_calls_made}  # fmt: skip
        if usage is not was_usage:
            head["usage"] = usage.__dict__ if type(usage) is Usage else usage
        if response is not was_response:
            head["response"] = plain_response(response)
        if text is not was_text:
            head["text"] = text
        if state or was_held[0]:
            head["state"] = state
        if vetoes or was_held[1]:
            head["vetoes"] = vetoes
        if charges or was_held[2]:
            head["charges"] = charges
        if turn_start or was_held[3]:
            head["turn_start"] = turn_start
        if cold != was_cold:
            head.update((name, now) for name, now, was in zip(_COLD, cold, was_cold, strict=True) if now is not was)
        if features == was_features:
            return to_json(head)
        return to_json(head)[:-1] + b',"features":' + features + b"}"

    # ------------------------------------------------------------------ tool results

    async def replay_results(self, after_seq: int) -> None:
        """A resumed run: calls of the interrupted step that completed are answered from the store."""
        run = self.run
        kept = await self.store.results(run.state.run_id, after_seq)
        if not kept:
            return
        self.saved_results = {call_id: _RESULT.validate_json(body) for call_id, body in kept.items()}
        ctx = run.ctx
        ctx.gates = (*ctx.gates, self._replay)  # after the features' gates: they keep their bookkeeping

    def _replay(self, call: ToolCall, rs: RunState, ctx: RunContext) -> ToolResult | None:
        return self.saved_results.pop(call.id, None)


def _keeper(
    store: RunStore, inline: SQLiteStore | None
) -> Callable[[ToolCall, ToolResult, RunContext], Awaitable[None]]:
    """A run's ``ctx.on_result``: a call ran, its result is kept before the call counts as
    done (it holds the store only: the run's context holds it)."""
    if inline is not None:
        save_now = inline.save_result_now

        async def on_result_now(call: ToolCall, answered: ToolResult, ctx: RunContext) -> None:
            save_now(ctx.run_id, call.id, ctx.run_state.seq, answered.__pydantic_serializer__.to_json(answered))

        return on_result_now

    async def on_result(call: ToolCall, answered: ToolResult, ctx: RunContext) -> None:
        body = answered.__pydantic_serializer__.to_json(answered)
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
