"""What a run store keeps, and the protocol every store implements.

A store keeps each run as an append-only log of checkpoints, one row each, keyed by the run
and its version (1, 2, 3, ...):

- the *head*: the run's state without its history (``RunState`` JSON with ``messages`` and
  ``trace`` left out: counters, the latest reply, the features' slices), its size does not grow
  with the run; the run's state is the last row's head;
- the *body*: only what is new since the previous checkpoint (messages, trace entries,
  events); the history is the bodies in order, never rewritten, so a checkpoint is one insert
  that costs the same at iteration 1000 as at iteration 1;
- and beside the log: tool results as each call completes (a resumed ``act`` re-runs only the
  calls that did not finish) and the claims of suspensions (a suspension is resumed once).

The key is the optimistic lock: a worker writes version ``n + 1`` after the ``n`` it holds; if
another worker took the run (it wrote ``n + 1`` first), the insert collides and the first
worker gets :class:`~loopwright.errors.RunBusy`.

Stores are asynchronous (``await store.save(...)``); :class:`~loopwright.stores.SQLiteStore`
and :class:`~loopwright.stores.PostgresStore` implement :class:`RunStore`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic_core import to_json

STORE_SCHEMA = 1
"""The version of the stores' tables; a store refuses to open tables of a newer version and
migrates older ones when it opens them."""


@dataclass(slots=True)
class Checkpoint:
    """One checkpoint: the new head and what was appended since the previous one."""

    run_id: str
    agent: str
    stage: str
    outcome: str | None
    seq: int
    head: bytes
    first_message: int
    """The index of ``messages[0]`` in the run's history."""
    messages: list[bytes] = field(default_factory=list)
    first_trace: int = 0
    trace: list[str] = field(default_factory=list)
    events: list[tuple[int, bytes]] = field(default_factory=list)
    """``(seq, event JSON)`` of the events emitted since the previous checkpoint."""


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
    messages: list[Any]
    """The history, each message as JSON bytes or as parsed JSON."""
    trace: list[str]


@dataclass(slots=True, frozen=True)
class RunSummary:
    """One line of ``store.runs()``."""

    run_id: str
    agent: str
    stage: str
    outcome: str | None
    updated: float
    version: int


def encode_body(cp: Checkpoint) -> bytes:
    """What a checkpoint appends, as one JSON object (``m`` messages, ``t`` trace, ``e`` events)."""
    return b"".join(
        (b'{"m":[', b",".join(cp.messages), b'],"t":', to_json(cp.trace), b',"e":[',
         b",".join(e for _, e in cp.events), b"]}")
    )  # fmt: skip


def decode_bodies(bodies: Iterable[bytes]) -> tuple[list[Any], list[str], list[Any]]:
    """The messages, trace and events of a run's bodies, in order."""
    messages: list[Any] = []
    trace: list[str] = []
    events: list[Any] = []
    for body in bodies:
        if body:
            part = json.loads(body)
            messages += part["m"]
            trace += part["t"]
            events += part["e"]
    return messages, trace, events


@runtime_checkable
class RunStore(Protocol):
    """Where durable runs are kept. Every method is atomic on its own.

    Versions make two workers safe: ``save`` and ``take`` name the version they expect and
    raise :class:`~loopwright.errors.RunBusy` when another worker moved the run on."""

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

    async def claim(self, run_id: str, suspension: str, owner: str, decisions: bytes) -> tuple[str, bytes] | None:
        return await self.inner.claim(run_id, suspension, owner, decisions)

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
