"""Load on `loopwright.serve`: one uvicorn server process on 127.0.0.1, clients in this process.

(a) 500 concurrent SSE clients on one run (a model that waits until they are all connected, then
    answers in 50 ms a call, 20 tool rounds), plus one client that connects and never reads:
    every reading client receives every event, in order; events/s delivered; p50/p99 delivery
    latency (the event's own time to its arrival); the run's wall time against the same run with
    no client at all (the stalled client must not slow it).
(b) 200 concurrent runs on the one server process (50 ms a model call, 3 tool rounds), each
    followed by its own SSE client: every client gets its run's every event in order; events/s;
    p99 delivery latency; wall time.
(c) memory per idle stream: the server's RSS before and after 500 streams open on suspended
    runs (nothing to send but a ping every 15 s), per stream.

    .venv/bin/python bench/bench_serve.py                 # all three (about a minute on 2 cores)
    .venv/bin/python bench/bench_serve.py --only b --runs 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GATE = Path(tempfile.gettempdir()) / f"bench-serve-gate-{os.getpid()}"


# ---------------------------------------------------------------- the server (a child process)


def make_app(db: str, gate: str) -> Any:
    from loopwright import Agent, Limits, ModelRequest, ModelResponse, ScriptedModel, TextPart, ToolCall, Usage, tool
    from loopwright.serve import app

    one = Usage(requests=1)

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped"

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def model(rounds: int, gated: bool) -> Any:
        async def reply(request: ModelRequest) -> ModelResponse:
            for _ in range(6000 if gated else 0):  # (a): wait (at most a minute) for every client to connect
                if Path(gate).exists():  # noqa: ASYNC240 (a cross-process gate: one stat a 10 ms)
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            done = sum(1 for m in request.messages for p in m.parts if p.type == "tool_result")
            if done < rounds:
                call = ToolCall(name="lookup", args={"order": str(done)})
                return ModelResponse(parts=(call,), stop_reason="tool_use", usage=one)
            return ModelResponse(parts=(TextPart(text=f"looked up {done}"),), stop_reason="end_turn", usage=one)

        return reply

    def refund_reply(request: ModelRequest) -> ModelResponse:
        call = ToolCall(name="refund", args={"order": "A1"})
        return ModelResponse(parts=(call,), stop_reason="tool_use", usage=one)

    agents = [
        Agent(name="wide", model=ScriptedModel(model(20, True)), tools=[lookup], limits=Limits(max_iterations=30)),
        Agent(
            name="wide_free", model=ScriptedModel(model(20, False)), tools=[lookup], limits=Limits(max_iterations=30)
        ),
        Agent(name="many", model=ScriptedModel(model(3, False)), tools=[lookup]),
        Agent(name="waits", model=ScriptedModel(refund_reply), tools=[refund]),
    ]
    if db == ":memory:":  # --memory: the store's writes off the disk (what the disk costs, by difference)
        from loopwright.stores import SQLiteStore

        return app(agents, store=SQLiteStore(":memory:"), buffer=256)
    return app(agents, store=f"sqlite:///{db}", buffer=256)


def serve(port: int, db: str, gate: str) -> None:
    import uvicorn

    uvicorn.run(make_app(db, gate), host="127.0.0.1", port=port, log_level="warning", backlog=4096)


# ---------------------------------------------------------------- the clients


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Raw:
    """A bare HTTP/1.1 client on asyncio streams: one connection a request, no pool, so the
    figures are the server's (httpx's pool, at 500 streams in one process, cost more than the
    server did)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def _open(self, method: str, path: str, body: bytes = b"") -> tuple[Any, Any]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=2**20)
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        writer.write(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        return reader, writer

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        reader, writer = await self._open("POST", path, json.dumps(body).encode())
        data = await reader.read()
        writer.close()
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    async def get(self, path: str) -> Any:
        reader, writer = await self._open("GET", path)
        data = await reader.read()
        writer.close()
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    async def follow(self, run_id: str, ready: asyncio.Event | None = None) -> tuple[list[int], list[float]]:
        """Read a run's SSE stream to its end: the seqs received and each event's delivery latency."""
        seqs: list[int] = []
        lags: list[float] = []
        reader, writer = await self._open("GET", f"/runs/{run_id}/events")
        await reader.readline()  # the status line: the server took the stream
        if ready is not None:
            ready.set()
        while line := await reader.readline():
            if line.startswith(b"data: ") and b'"seq"' in line:
                now = time.time()
                data = json.loads(line[6:])
                seqs.append(data["seq"])
                lags.append(now - data["time"])
            elif line.startswith(b"event: end"):
                break
        writer.close()
        return seqs, lags


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_order(seqs: list[int]) -> bool:
    return seqs == list(range(1, len(seqs) + 1))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run_wall(c: Raw, stalled_clients: int) -> float:
    """Seconds from starting a run of ``wide_free`` to its end, with that many clients that
    connect to its stream and never read."""
    t = time.monotonic()
    run_id = (await c.post("/runs", {"agent": "wide_free", "input": "go"}))["run_id"]
    stalled = []
    for _ in range(stalled_clients):
        sock = socket.create_connection(("127.0.0.1", c.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET /runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        stalled.append(sock)
    for _ in range(6000):
        if (await c.get(f"/runs/{run_id}"))["outcome"] == "final":
            break
        await asyncio.sleep(0.01)
    for sock in stalled:
        sock.close()
    return time.monotonic() - t


async def part_a(base: str, clients: int) -> dict[str, Any]:
    c = Raw(int(base.rsplit(":", 1)[1]))
    alone = await run_wall(c, 0)
    with_stalled = await run_wall(c, 20)

    GATE.unlink(missing_ok=True)
    run_id = (await c.post("/runs", {"agent": "wide", "input": "go"}))["run_id"]
    stalled = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(f"GET /runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    readies = [asyncio.Event() for _ in range(clients)]
    tasks = [asyncio.create_task(c.follow(run_id, r)) for r in readies]
    await asyncio.gather(*(r.wait() for r in readies))
    t0 = time.monotonic()
    GATE.touch()  # every client is connected: the run may go on
    results = await asyncio.gather(*tasks)
    wall = time.monotonic() - t0
    stalled.close()
    GATE.unlink(missing_ok=True)
    show = await c.get(f"/runs/{run_id}")
    lags = [lag for _, ls in results for lag in ls]
    events = sum(len(s) for s, _ in results)
    return {
        "clients": clients,
        "events_per_run": len(results[0][0]),
        "every_client_every_event_in_order": all(in_order(s) and len(s) == len(results[0][0]) for s, _ in results),
        "events_delivered": events,
        "events_per_s": round(events / wall),
        "p50_latency_ms": round(pct(lags, 0.5) * 1000, 1),
        "p99_latency_ms": round(pct(lags, 0.99) * 1000, 1),
        "run_wall_s_with_clients": round(wall, 2),
        "run_wall_s_no_client": round(alone, 2),
        "run_wall_s_20_stalled_clients_only": round(with_stalled, 2),
        "outcome": show["outcome"],
    }


async def part_b(base: str, runs: int) -> dict[str, Any]:
    c = Raw(int(base.rsplit(":", 1)[1]))
    t0 = time.monotonic()

    async def one() -> tuple[list[int], list[float]]:
        run_id = (await c.post("/runs", {"agent": "many", "input": "go"}))["run_id"]
        return await c.follow(run_id)

    results = await asyncio.gather(*(one() for _ in range(runs)))
    wall = time.monotonic() - t0
    lags = [lag for _, ls in results for lag in ls]
    events = sum(len(s) for s, _ in results)
    return {
        "runs": runs,
        "every_client_every_event_in_order": all(in_order(s) and s for s, _ in results),
        "events_delivered": events,
        "events_per_s": round(events / wall),
        "p50_latency_ms": round(pct(lags, 0.5) * 1000, 1),
        "p99_latency_ms": round(pct(lags, 0.99) * 1000, 1),
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1),
    }


async def part_c(base: str, pid: int, streams: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as c:
        ids = []
        for _ in range(20):
            ids.append((await c.post("/runs", json={"agent": "waits", "input": "refund"})).json()["run_id"])
        for run_id in ids:
            for _ in range(500):
                if (await c.get(f"/runs/{run_id}")).json()["outcome"] == "suspended":
                    break
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        before = rss_kib(pid)
        opened: list[Any] = []
        stack = []
        for i in range(streams):
            cm = c.stream("GET", f"/runs/{ids[i % len(ids)]}/events")
            response = await cm.__aenter__()
            stack.append(cm)
            opened.append(response)
        await asyncio.sleep(1.0)
        after = rss_kib(pid)
        for cm in stack:
            await cm.__aexit__(None, None, None)
    return {
        "idle_streams": streams,
        "server_rss_before_mib": round(before / 1024, 1),
        "server_rss_after_mib": round(after / 1024, 1),
        "kib_per_idle_stream": round((after - before) / streams, 1),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="a,b,c")
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--memory", action="store_true", help="an in-memory SQLite store (no disk writes)")
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "DB", "GATE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1], args.serve[2])
        return
    port = free_port()
    db = ":memory:" if args.memory else str(Path(tempfile.mkdtemp()) / "bench.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), db, str(GATE)], env=env)
    base = f"http://127.0.0.1:{port}"
    figures: dict[str, Any] = {"python": sys.version.split()[0], "cores": os.cpu_count()}
    try:
        wait_listening(port)
        for part in args.only.split(","):
            c0, o0 = cpu_s(server.pid), time.process_time()
            work = {
                "a": lambda: part_a(base, args.clients),
                "b": lambda: part_b(base, args.runs),
                "c": lambda: part_c(base, server.pid, args.streams),
            }[part]()
            figures[part] = asyncio.run(work)
            figures[part]["cpu_s"] = {
                "server": round(cpu_s(server.pid) - c0, 2),
                "clients": round(time.process_time() - o0, 2),
            }
            print(f"({part})", json.dumps(figures[part]), flush=True)
        figures["load_average"] = os.getloadavg()
    finally:
        server.terminate()
        server.wait(timeout=30)
        GATE.unlink(missing_ok=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
