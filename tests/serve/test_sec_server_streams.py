"""SSE clients that never read cannot grow the server without bound: each connection's buffer is
bounded in events and bytes, all connections' buffers together by a total, and the number of
streams open at once by a cap (503 past it). Raw sockets on 127.0.0.1 that never read, the
server's own queue sizes measured (not timing)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from loopwright import Agent, Limits, ModelRequest, ModelResponse, ScriptedModel, TextPart, ToolCall, Usage
from loopwright.serve import app
from loopwright.serve.hub import Item, StreamPool, Subscriber
from tests.serve_agents import lookup, serving

GATE = threading.Event()
ROUNDS = 150
TEXT = "y" * 40_000


async def chatty(request: ModelRequest) -> ModelResponse:
    """Waits for GATE, then answers ROUNDS times with 40 kB of text and a lookup (big events), then ends."""
    await asyncio.to_thread(GATE.wait, 30)
    calls = sum(1 for m in request.messages for p in m.parts if p.type == "tool_result")
    if calls < ROUNDS:
        call = ToolCall(name="lookup", args={"order": str(calls)})
        return ModelResponse(parts=(TextPart(text=TEXT), call), stop_reason="tool_use", usage=Usage(requests=1))
    return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn", usage=Usage(requests=1))


agent = Agent(name="chatty", model=ScriptedModel(chatty), tools=[lookup], limits=Limits(max_iterations=ROUNDS + 5))

PER_STREAM = 128 * 1024
TOTAL = 1024 * 1024
STREAMS = 8
SOCKETS = 12


def _stalled(base: str, run_id: str) -> socket.socket:
    """A client that asks for the run's events and never reads a byte (a small receive window)."""
    host, port = base.removeprefix("http://").split(":")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    s.sendall(f"GET /runs/{run_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return s


@pytest.mark.slow  # (about 4 s: 150 rounds of 40 kB events)
def test_clients_that_never_read_hold_bounded_buffers_and_streams_are_capped(tmp_path: Path) -> None:
    GATE.clear()
    asgi = app(
        [agent],
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        buffer_bytes=PER_STREAM,
        max_buffered_bytes=TOTAL,
        max_streams=STREAMS,
    )
    sockets: list[socket.socket] = []
    with serving(asgi) as base, httpx.Client(base_url=base, timeout=30) as c:
        service = asgi.state.loopwright.service
        run_id = c.post("/runs", json={"input": "go"}).json()["run_id"]
        try:
            sockets = [_stalled(base, run_id) for _ in range(SOCKETS)]
            deadline = time.monotonic() + 20
            while service.streams.open < STREAMS and time.monotonic() < deadline:
                time.sleep(0.01)
            assert service.streams.open == STREAMS
            refused = c.get(f"/runs/{run_id}/events")  # one more, from a client that reads: 503, saying why
            assert refused.status_code == 503 and "streams" in refused.json()["error"]
            GATE.set()
            samples: list[tuple[int, int, int]] = []
            while True:
                pool = service.streams
                largest = max((s.bytes for h in list(service.hubs.values()) for s in list(h.subscribers)), default=0)
                samples.append((pool.open, pool.used, largest))
                shown = c.get(f"/runs/{run_id}").json()
                if shown["outcome"] is not None and not shown["running"]:
                    break
                assert time.monotonic() < deadline + 60, shown
                time.sleep(0.005)
            assert all(open_ <= STREAMS and used <= TOTAL and big <= PER_STREAM for open_, used, big in samples)
            assert service.streams.dropped > 0  # the bound was reached: stalled clients were dropped, not kept
            assert service.streams.used <= TOTAL
            # the sockets past the cap were answered 503 (read now, at the end)
            answers = []
            for s in sockets:
                s.settimeout(0.5)
                try:
                    answers.append(s.recv(64))
                except TimeoutError:
                    answers.append(b"")
            assert sum(a.startswith(b"HTTP/1.1 503") for a in answers) == SOCKETS - STREAMS, answers
        finally:
            GATE.set()
            for s in sockets:
                s.close()


def test_a_subscriber_is_bounded_in_bytes_and_the_pool_in_total() -> None:
    async def main() -> None:
        pool = StreamPool(total_bytes=250, limit=100, limit_bytes=120)
        a, b = Subscriber(pool), Subscriber(pool)
        item = Item.of(1, "x", "0" * 30)  # a frame of about 60 bytes
        size = len(item.frame)
        a.push(item)
        b.push(item)
        assert pool.used == 2 * size and not a.dropped
        a.push(item)  # a: 2 frames, within 120 bytes
        a.push(item)  # a third is past a's 120 bytes: a is dropped, its buffer freed
        assert a.dropped and a.bytes == 0 and pool.used == size and pool.dropped == 1
        assert await b.batch(0.01) == [item] and pool.used == 0
        c, d = Subscriber(pool), Subscriber(pool)
        for _ in range(2):
            b.push(item)
            c.push(item)
        d.push(item)  # the total (250) would be passed: d is dropped, whatever its own buffer
        assert d.dropped and pool.used == 4 * size <= 250
        for sub in (a, b, c, d):
            sub.close()
        assert pool.open == 0 and pool.used == 0

    asyncio.run(main())
