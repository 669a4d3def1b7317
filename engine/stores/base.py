"""What a run store keeps, and the protocol every store implements.

A store keeps each run as an append-only log of checkpoints, one row each, keyed by the run
and its version (1, 2, 3, ...):

- the *head*: the run's state without its history (``RunState`` JSON with ``messages`` and
  ``trace`` left out: counters, the latest reply, the features' slices). The first checkpoint
  of a worker, and every :data:`FULL_HEAD_EVERY`-th after it, holds the whole head; the others
  only the fields that changed (a JSON object marked ``"~"``), so a checkpoint stays small.
  The run's state is the last whole head with the changes after it applied (:func:`merge_heads`;
  the heads' and bodies' compact form is written and read by :mod:`loopwright.stores.compact`);
- the *body*: only what is new since the previous checkpoint, as ``{"s": seq of its first
  event, "w": [stage, iteration, agent] before it, "m": messages, "t": trace entries, "e":
  events, "k": own field names of the event types this worker had not written yet, "g":
  ``[number, label]`` of the guard labels it had not written yet}``. An event is ``[time,
  source, dest, guard number]`` (a transition), ``[type, time, *own field values]``,
  or a built event's JSON; ``[null, stage, iteration, agent]`` marks where the next one was
  recorded. The reply in the head is kept once: its ``model_responded`` event is ``[type,
  time]`` and its message ``[agent]``. The history is the bodies in order, never rewritten, so
  a checkpoint is one insert that costs the same at iteration 1000 as at iteration 1;
- and beside the log: tool results of calls that ran beside others, as each completes (a
  resumed ``act`` re-runs only the calls that did not finish), the claims of suspensions
  (a suspension is resumed once), and the user a run belongs to (``set_user``, written once
  when a server starts the run: never read from the run's state, which its tools can write).

A store opened with ``key=`` signs every row and refuses rows that are not signed with it
(:mod:`loopwright.data.signing` says what that shows and what it cannot); a store without one trusts
its rows as they are.

The log's primary key is the optimistic lock: a worker writes version ``n + 1`` after the ``n`` it holds; if
another worker took the run (it wrote ``n + 1`` first), the insert collides and the first
worker gets :class:`~loopwright.data.errors.RunBusy`.

Stores are asynchronous (``await store.save(...)``); :class:`~loopwright.stores.SQLiteStore`
and :class:`~loopwright.stores.PostgresStore` implement :class:`RunStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..data.errors import ConfigurationError, ResumeError
from ..data.signing import RowSigner
from .compact import DELTA as DELTA
from .compact import FULL_HEAD_EVERY as FULL_HEAD_EVERY
from .compact import decode_bodies as decode_bodies
from .compact import merge_heads as merge_heads

STORE_SCHEMA = 5
"""The version of the stores' tables and rows; a store refuses to open tables of a newer
version and migrates older ones when it opens them (2: heads may hold only what changed, events
are kept as lists of their values; 3: SQLite's log is keyed by one integer per row; 4: rows
carry a signature, ``mac``, when the store has a key: :mod:`loopwright.data.signing`; 5: the user
each run belongs to, in a table of its own, ``lw_users``)."""


@dataclass(slots=True)
class Checkpoint:
    """One checkpoint: the new head and what was appended since the previous one."""

    run_id: str
    agent: str
    stage: str
    outcome: str | None
    seq: int
    head: bytes
    """The run's state without its history, or only the fields changed since the previous
    checkpoint (begins with :data:`DELTA`)."""
    body: bytes
    """What was appended since the previous checkpoint, as JSON (see the module docstring)."""


@dataclass(slots=True)
class SavedRun:
    """A run as a store holds it."""

    run_id: str
    agent: str
    stage: str
    outcome: str | None
    version: int
    owner: str
    updated: float
    """``time.time()`` of the last checkpoint."""
    head: bytes
    """The run's whole head (the changes after the last whole head applied)."""
    messages: list[Any]
    """The history, each message as JSON bytes or as parsed JSON."""
    trace: list[str]
    user: str | None = None
    """Who the run belongs to, as the store keeps it beside the run (``set_user``; None: no
    one was recorded, e.g. a run started outside a server). Never taken from the run's state."""


@dataclass(slots=True, frozen=True)
class RunSummary:
    """One line of ``store.runs()``."""

    run_id: str
    agent: str
    stage: str
    outcome: str | None
    updated: float
    version: int


# ---------------------------------------------------------------- signed rows (a store with a key)


def log_mac(signer: RowSigner, cp: Checkpoint, version: int) -> bytes:
    """The signature of checkpoint ``cp`` as version ``version`` of its run."""
    return signer.mac(["log", cp.run_id, version, cp.agent, cp.stage, cp.outcome, cp.seq], cp.head, cp.body)


LogRow = tuple[int, str, str, "str | None", int, bytes, bytes, "bytes | None"]
"""A checkpoint as read back to check it: version, agent, stage, outcome, seq, head, body, mac."""


def check_log(signer: RowSigner, run_id: str, rows: Sequence[LogRow]) -> None:
    """Refuse (ResumeError) a run's checkpoints unless each is signed by ``signer`` as what it
    says and they are versions 1, 2, ... n, none missing."""
    for version, agent, stage, outcome, seq, head, body, mac in rows:
        fields: list[object] = ["log", run_id, version, agent, stage, outcome, seq]
        signer.check(mac, f"run {run_id!r}: checkpoint {version} in the store", fields, bytes(head), bytes(body))
    if [row[0] for row in rows] != list(range(1, len(rows) + 1)):
        raise ResumeError(
            f"run {run_id!r}: its checkpoints 1..{rows[-1][0]} are not all there (one was removed); the run is "
            "not loaded"
        )


def result_mac(signer: RowSigner, run_id: str, call_id: str, seq: int, body: bytes) -> bytes:
    return signer.mac(["result", run_id, call_id, seq], body)


def check_result(signer: RowSigner, run_id: str, call_id: str, seq: int, body: bytes, mac: bytes | None) -> None:
    what = f"the kept result of call {call_id!r} of run {run_id!r}"
    signer.check(mac, what, ["result", run_id, call_id, seq], body)


def user_mac(signer: RowSigner, run_id: str, user: str) -> bytes:
    return signer.mac(["user", run_id, user])


def check_user(signer: RowSigner, run_id: str, user: str, mac: bytes | None) -> None:
    signer.check(mac, f"the user of run {run_id!r}", ["user", run_id, user])


def user_taken(run_id: str) -> ConfigurationError:
    return ConfigurationError(
        f"run id {run_id!r} is taken (the store holds that run, or it belongs to another user); "
        "start the run with a new run_id"
    )


def check_user_id(user: object) -> str:
    if not isinstance(user, str) or not user:
        raise ConfigurationError(f"set_user(run_id, user) takes a non-empty user id, got {user!r}")
    return user


def claim_mac(signer: RowSigner, run_id: str, suspension: str, owner: str, decisions: bytes) -> bytes:
    return signer.mac(["claim", run_id, suspension, owner], decisions)


def check_claim(
    signer: RowSigner, run_id: str, suspension: str, owner: str, decisions: bytes, mac: bytes | None
) -> None:
    what = f"the claim of suspension {suspension} of run {run_id!r}"
    signer.check(mac, what, ["claim", run_id, suspension, owner], decisions)


@runtime_checkable
class RunStore(Protocol):
    """Where durable runs are kept. Every method is atomic on its own.

    Versions make two workers safe: ``save`` and ``take`` name the version they expect and
    raise :class:`~loopwright.data.errors.RunBusy` when another worker moved the run on.

    Three methods are optional (not part of this protocol: a store without them still is one):
    ``rewrite_heads`` (an ended run's ``temp:`` keys dropped), ``async children(run_id) ->
    list[str]``, the ids of the runs under ``run_id`` (a workflow's children, at every depth:
    those starting ``run_id + "."``), sorted; without it :func:`children_of` says None and a
    workflow's trace page finds its children by probing their ids; and ``async set_user(run_id,
    user)``: the user the run belongs to, kept beside it once, before its first checkpoint (a
    second call with another user, or for a run the store holds already, is a
    ConfigurationError), read back as :attr:`SavedRun.user`. Without it a server cannot tell
    whose a run is after a restart, and only a caller who sees every run sees it."""

    url: str

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        """Append ``checkpoint`` and replace the head; ``version`` 0 creates the run (a run id
        already in the store is a ConfigurationError). Returns the new version; RunBusy if the
        run is no longer at ``version``."""
        ...

    async def take(self, run_id: str, version: int, owner: str) -> int:
        """Make ``owner`` the run's worker if it is still at ``version`` (else RunBusy);
        returns the new version."""
        ...

    async def load(self, run_id: str) -> SavedRun | None: ...

    async def claim(self, run_id: str, suspension: str, owner: str, decisions: bytes) -> tuple[str, bytes] | None:
        """Claim a suspension for ``owner`` with its decisions (JSON). None when this call
        claimed it; else the ``(owner, decisions)`` of the claim made before."""
        ...

    async def save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        """Keep one tool call's result as it completes (``seq``: its ``tool_answered`` event)."""
        ...

    async def results(self, run_id: str, after_seq: int) -> dict[str, bytes]:
        """The tool results kept after event ``after_seq``, by call id."""
        ...

    async def events(self, run_id: str) -> list[bytes]:
        """The run's events as JSON, in ``seq`` order (of the checkpoints kept)."""
        ...

    async def runs(self, limit: int = 100) -> list[RunSummary]:
        """The most recently checkpointed runs first."""
        ...

    async def close(self) -> None: ...


class StoreWrapper:
    """A :class:`RunStore` that hands every call to ``inner``: subclass it and override what
    you watch or change (count or time the saves, fail one on purpose in a test)."""

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner
        self.url = inner.url

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        return await self.inner.save(checkpoint, version, owner)

    async def take(self, run_id: str, version: int, owner: str) -> int:
        return await self.inner.take(run_id, version, owner)

    async def load(self, run_id: str) -> SavedRun | None:
        return await self.inner.load(run_id)

    async def rewrite_heads(self, run_id: str, holding: bytes, rewrite: Callable[[bytes], bytes]) -> int:
        """``inner``'s, if it has one (an ended run's ``temp:`` keys are dropped with it)."""
        found = getattr(self.inner, "rewrite_heads", None)
        return 0 if found is None else int(await found(run_id, holding, rewrite))

    async def claim(self, run_id: str, suspension: str, owner: str, decisions: bytes) -> tuple[str, bytes] | None:
        return await self.inner.claim(run_id, suspension, owner, decisions)

    async def set_user(self, run_id: str, user: str) -> None:
        """``inner``'s (NotImplementedError when it has none: the run's user is not kept)."""
        found = getattr(self.inner, "set_user", None)
        if found is None:
            raise NotImplementedError(f"{type(self.inner).__name__} cannot keep a run's user (no set_user())")
        await found(run_id, user)

    async def children(self, run_id: str) -> list[str]:
        """``inner``'s (NotImplementedError when it has none: :func:`children_of` says None)."""
        found = getattr(self.inner, "children", None)
        if found is None:
            raise NotImplementedError(f"{type(self.inner).__name__} cannot list the runs under a run (no children())")
        return list(await found(run_id))

    async def save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        await self.inner.save_result(run_id, call_id, seq, body)

    async def results(self, run_id: str, after_seq: int) -> dict[str, bytes]:
        return await self.inner.results(run_id, after_seq)

    async def events(self, run_id: str) -> list[bytes]:
        return await self.inner.events(run_id)

    async def runs(self, limit: int = 100) -> list[RunSummary]:
        return await self.inner.runs(limit)

    async def close(self) -> None:
        await self.inner.close()


async def children_of(store: Any, run_id: str) -> list[str] | None:
    """The ids of the runs ``store`` holds under ``run_id`` (``store.children``, sorted), or None
    when the store cannot list them (a store of the user's own without ``children``)."""
    found = getattr(store, "children", None)
    if found is None:
        return None
    try:
        return sorted(await found(run_id))
    except NotImplementedError:
        return None


def under_prefix(run_id: str) -> tuple[str, str]:
    """The ids of the runs under ``run_id`` are those ``>=`` the first and ``<`` the second of
    these, in code point order (``run_id + "."`` and ``run_id + "/"``: no pattern, so no ``_``
    or ``%`` in an id is taken for a wildcard)."""
    return run_id + ".", run_id + "/"
