"""Fan-out of one run's events to the clients that watch it, each with a bounded buffer.

A :class:`Hub` per run id: the run's observer hands it every event (:meth:`Hub.publish`, plain
synchronous code: the run never waits for a client); each client is a :class:`Subscriber`
with a buffer bounded in events and bytes, and all clients' buffers together are bounded too
(:class:`StreamPool`, one per service). A client past a bound is dropped (its buffer freed) and
told to reconnect with ``Last-Event-ID``; the run and the other clients go on as before.
While a leg of the run goes on in this process the hub also keeps that leg's events
(``history``), so a client that joins mid-leg misses none that the store has not written yet.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from .decisions import ServeError

END = "end"
"""The item a hub gives its subscribers when the run has ended (no event follows)."""
BUSY = "busy"
SHUTDOWN = "shutdown"
"""What a stream yields last when the server is shutting down (:class:`loopwright.serve.Server`)."""
"""What a stream gets instead of events when as many streams are open as may be (then it ends)."""


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


class StreamPool:
    """What all of a service's clients hold together: the streams open (at most ``max_streams``
    at once), the bytes buffered for them (at most ``total_bytes``), and each client's bounds
    (``limit`` events, ``limit_bytes`` bytes). A client past its own bound, or whose next event
    would take the total past its bound, is dropped: its buffer is freed at once and it is told
    to reconnect with ``Last-Event-ID``. So clients that never read hold at most
    ``total_bytes`` of buffers between them, however many they are."""

    __slots__ = ("dropped", "limit", "limit_bytes", "max_streams", "open", "total_bytes", "used")

    def __init__(
        self, *, limit: int = 1000, limit_bytes: int = 2**20, total_bytes: int = 64 * 2**20, max_streams: int = 1000
    ) -> None:
        self.limit, self.limit_bytes, self.total_bytes, self.max_streams = limit, limit_bytes, total_bytes, max_streams
        self.open = 0
        """Clients subscribed now (a dropped one no longer counts)."""
        self.used = 0
        """Bytes buffered for all clients now."""
        self.dropped = 0
        """Clients dropped so far for falling too far behind."""

    def check_room(self) -> None:
        """ServeError 503 when as many streams are open as may be (``max_streams``)."""
        if self.open >= self.max_streams:
            raise ServeError(
                503,
                f"too many event streams are open here ({self.open}, the most this server keeps); "
                "try again in a few seconds, or close streams you no longer read",
            )


class Subscriber:
    """One client's buffer: :meth:`batch` waits for what arrived since the last batch."""

    __slots__ = ("_ready", "bytes", "closed", "dropped", "ended", "pool", "queue", "stopped")

    def __init__(self, pool: StreamPool) -> None:
        self.queue: deque[Item] = deque()
        self.pool = pool
        self.bytes = 0
        """The size of the frames buffered (what the pool counts for this client)."""
        self.dropped = False
        """The client fell too far behind: its buffer was emptied, it gets no more."""
        self.ended = False
        self.stopped = False
        """The server is shutting down: the client gets what it has buffered, then ``shutdown``."""
        self.closed = False
        self._ready = asyncio.Event()
        pool.open += 1

    def push(self, item: Item) -> None:
        if self.dropped or self.closed:
            return
        size = len(item.frame)
        pool = self.pool
        if len(self.queue) >= pool.limit or self.bytes + size > pool.limit_bytes or pool.used + size > pool.total_bytes:
            self.dropped = True
            pool.dropped += 1
            self._release()
        else:
            self.queue.append(item)
            self.bytes += size
            pool.used += size
        self._ready.set()

    def _release(self) -> None:
        self.queue.clear()
        self.pool.used -= self.bytes
        self.bytes = 0
        if not self.closed:
            self.closed = True
            self.pool.open -= 1

    def close(self) -> None:
        """The client left: free its buffer and its stream (once, however often called)."""
        self._release()

    def end(self) -> None:
        self.ended = True
        self._ready.set()

    def stop(self) -> None:
        """The server is shutting down: wake the client's stream, which then ends saying so."""
        self.stopped = True
        self._ready.set()

    async def batch(self, idle_s: float) -> list[Item]:
        """The events buffered since the last call (waiting up to ``idle_s`` s for one)."""
        if not self.queue and not self.dropped and not self.ended and not self.stopped:
            try:
                await asyncio.wait_for(self._ready.wait(), idle_s)
            except TimeoutError:
                return []
        self._ready.clear()
        items = list(self.queue)
        self.queue.clear()
        self.pool.used -= self.bytes
        self.bytes = 0
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
        gone = None
        for sub in self.subscribers:
            sub.push(item)
            if sub.dropped:
                gone = [*(gone or ()), sub]
        for sub in gone or ():
            self.subscribers.discard(sub)  # (its buffer is freed; its stream says "dropped", then ends)

    def subscribe(self, pool: StreamPool) -> tuple[Subscriber, list[Item]]:
        """A new client's buffer and the events of the leg in progress so far."""
        sub = Subscriber(pool)
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
