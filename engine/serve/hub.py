"""Fan-out of one run's events to the clients that watch it, each with a bounded buffer.

A :class:`Hub` per run id: the run's observer hands it every event (:meth:`Hub.publish`, plain
synchronous code: the run never waits for a client); each client is a :class:`Subscriber`
with a buffer of at most ``limit`` events. A client that falls ``limit`` events behind is
dropped (its buffer freed) and told to reconnect with ``Last-Event-ID``; the run and the other
clients go on as before. While a leg of the run goes on in this process the hub also keeps
that leg's events (``history``), so a client that joins mid-leg misses none that the store has
not written yet.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

END = "end"
"""The item a hub gives its subscribers when the run has ended (no event follows)."""


@dataclass(slots=True, frozen=True)
class Item:
    """One event as the clients get it: its seq, its type, its JSON and its SSE frame (each
    made once, whatever the number of clients)."""

    seq: int
    type: str
    json: str
    frame: str

    @classmethod
    def of(cls, seq: int, type: str, json: str) -> Item:
        """The item of an event (``seq`` -1: a message that is no event of the run, sent without an id)."""
        frame = f"id: {seq}\nevent: {type}\ndata: {json}\n\n" if seq >= 0 else f"event: {type}\ndata: {json}\n\n"
        return cls(seq, type, json, frame)


class Subscriber:
    """One client's buffer: :meth:`batch` waits for what arrived since the last batch."""

    __slots__ = ("_ready", "dropped", "ended", "limit", "queue")

    def __init__(self, limit: int) -> None:
        self.queue: deque[Item] = deque()
        self.limit = limit
        self.dropped = False
        """The client fell ``limit`` events behind: its buffer was emptied, it gets no more."""
        self.ended = False
        self._ready = asyncio.Event()

    def push(self, item: Item) -> None:
        if self.dropped:
            return
        if len(self.queue) >= self.limit:
            self.dropped = True
            self.queue.clear()
        else:
            self.queue.append(item)
        self._ready.set()

    def end(self) -> None:
        self.ended = True
        self._ready.set()

    async def batch(self, idle_s: float) -> list[Item]:
        """The events buffered since the last call (waiting up to ``idle_s`` s for one)."""
        if not self.queue and not self.dropped and not self.ended:
            try:
                await asyncio.wait_for(self._ready.wait(), idle_s)
            except TimeoutError:
                return []
        self._ready.clear()
        items = list(self.queue)
        self.queue.clear()
        return items


@dataclass(slots=True, eq=False)
class Hub:
    """One run's clients, and the events of its leg in progress in this process."""

    run_id: str
    subscribers: set[Subscriber] = field(default_factory=set)
    history: list[Item] = field(default_factory=list)
    running: bool = False
    """A leg of the run goes on in this process (its events are kept in ``history``)."""

    def publish(self, item: Item) -> None:
        if self.running:
            self.history.append(item)
        for sub in self.subscribers:
            sub.push(item)

    def subscribe(self, limit: int) -> tuple[Subscriber, list[Item]]:
        """A new client's buffer and the events of the leg in progress so far."""
        sub = Subscriber(limit)
        self.subscribers.add(sub)
        return sub, list(self.history)

    def leg_started(self) -> None:
        self.running, self.history = True, []

    def leg_stopped(self, ended: bool) -> None:
        """The leg in progress stopped (the store has its events now); ``ended``: for good."""
        self.running, self.history = False, []
        if ended:
            for sub in self.subscribers:
                sub.end()
