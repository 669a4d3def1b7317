"""Durable runs: what a checkpoint at every transition costs, side by side with the in-memory
run and a hand-written loop, in one process.

(a) microseconds per iteration (one model call, one no-op tool call) of a run of K iterations,
    wall time and (in brackets) this process's CPU time, which a loaded machine distorts less;
    each run's agent and runner (the hand loop's replies) are built before its timing starts,
    as in bench_loop.py (a program builds its agent once: ~250 us a run that is not the loop's),
    K = 10 and 100, for: the hand loop; loopwright in memory; loopwright with SQLiteStore at
    each durability (transition = the default, iteration, exit); with ``--pg DSN`` (or
    ``LOOPWRIGHT_PG_DSN``) loopwright with PostgresStore too (commits that wait for the disk,
    the default, and ``synchronous_commit=False``). The variants run interleaved, run
    after run; median of ``--repeats``. Flat = K=100 within 1.2x of K=10 (a checkpoint appends,
    it never re-writes the history). Targets (issue 13): SQLite at the default <= 250 us/iter
    and flat, judged on wall and on CPU time (on a shared machine a K=100 run, ten times
    longer, is preempted more often than a K=10 one: its wall time grows for reasons of its own).
(b) resume latency after a crash: a run of K=100 killed at its middle checkpoint (the middle of
    the checkpoints an uninterrupted run writes); the time from
    ``runner.resume(run_id)`` to its first new checkpoint (load, rebuild, check, claim, one
    stage), median of ``--repeats``; SQLite (and PostgreSQL with --pg).

Usage:  python bench/bench_store.py [--repeats 30] [--pg postgresql://...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, ToolCall, tool
from loopwright.stores import Checkpoint, RunStore, SQLiteStore, StoreWrapper

TARGET_US = 250.0
TARGET_FLAT = 1.2


@tool
async def noop(i: int) -> int:
    """Return i."""
    return i


def agent(k: int) -> Agent:
    """K replies with one no-op call, then text; the reply is picked by the history's length
    (user, reply, results, ...), so a run resumed by a new agent gets the reply it would have."""
    script: list[Any] = [[ToolCall(id=f"c{i}", name="noop", args={"i": i})] for i in range(k)]
    script.append("done")
    replies = ScriptedModel(script).script

    def reply(request: ModelRequest) -> ModelResponse:
        answer = replies[len(request.messages) // 2]
        assert isinstance(answer, ModelResponse)
        return answer

    return Agent(name="bench", model=ScriptedModel(reply), tools=[noop], limits=Limits(max_iterations=k + 5))


def hand_replies(k: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"role": "assistant", "calls": [{"id": f"c{i}", "name": "noop", "args": {"i": i}}]} for i in range(k)
    ]
    replies.append({"role": "assistant", "text": "done"})
    return replies


async def hand_loop(replies: list[dict[str, Any]]) -> None:
    """The same work with plain dicts: call the model, gather the calls, append, stop on text."""
    history: list[dict[str, Any]] = [{"role": "user", "text": "go"}]
    turn = 0

    async def model(_history: list[dict[str, Any]]) -> dict[str, Any]:
        nonlocal turn
        turn += 1
        return replies[turn - 1]

    async def call(i: int) -> int:
        return i

    while True:
        reply = await model(history)
        history.append(reply)
        calls = reply.get("calls")
        if not calls:
            return
        results = await asyncio.gather(*(call(**c["args"]) for c in calls))
        history.append({"role": "user", "results": list(results)})


Run = Callable[[], Awaitable[None]]
Variant = Callable[[int], Run]
"""Prepares one run of K iterations (the agent and runner, or the replies, built outside the
timing, as bench_loop.py does: a program builds its agent once), the run itself timed."""


def engine(store: RunStore | None, durability: str = "transition") -> Variant:
    def prepare(k: int) -> Run:
        runner = Runner(agent(k), store=store, durability=durability)

        async def go() -> None:
            result = await runner.run("go", run_id=uuid.uuid4().hex)
            assert result.outcome == "final", result.error

        return go

    return prepare


def hand(k: int) -> Run:
    replies = hand_replies(k)
    return lambda: hand_loop(replies)


async def per_iteration(variants: dict[str, Variant], k: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU (process) microseconds per iteration, by variant."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for variant in variants.values():  # warm-up
        await variant(k)()
    for r in range(repeats):
        order = list(variants.items())
        if r % 2:
            order.reverse()
        for name, variant in order:
            run = variant(k)
            start, used = time.perf_counter(), time.process_time()
            await run()
            times[name].append((time.perf_counter() - start) / k * 1e6)
            cpu[name].append((time.process_time() - used) / k * 1e6)
    return {name: (statistics.median(times[name]), statistics.median(cpu[name])) for name in variants}


class _Crash(BaseException):
    pass


class _Timed(StoreWrapper):
    """A store that crashes at save ``at`` and notes when the first save after that comes
    (closing it leaves the shared store open)."""

    def __init__(self, inner: RunStore, at: int | None) -> None:
        super().__init__(inner)
        self.at, self.saves, self.first_after = at, 0, 0.0

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        self.saves += 1
        if self.saves == self.at:
            raise _Crash
        if not self.first_after:
            self.first_after = time.perf_counter()
        return await self.inner.save(checkpoint, version, owner)

    async def close(self) -> None:
        pass


async def resume_latency(store: RunStore, k: int, repeats: int) -> float:
    out: list[float] = []
    counting = _Timed(store, at=None)
    await Runner(agent(k), store=counting).run("go", run_id=uuid.uuid4().hex)
    for _ in range(repeats):
        run_id = uuid.uuid4().hex
        crashing = _Timed(store, at=counting.saves // 2)
        with contextlib.suppress(_Crash):
            await asyncio.create_task(Runner(agent(k), store=crashing).run("go", run_id=run_id))
        timed = _Timed(store, at=None)
        start = time.perf_counter()
        result = await Runner(agent(k), store=timed).resume(run_id)
        assert result.outcome == "final"
        out.append((timed.first_after - start) * 1e3)
    return statistics.median(out)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-store-"))
    sqlite = SQLiteStore(folder / "runs.db")
    variants: dict[str, Variant] = {
        "hand loop": hand,
        "loopwright, in memory": engine(None),
        "SQLiteStore, every transition (default)": engine(sqlite),
        "SQLiteStore, every iteration": engine(sqlite, "iteration"),
        "SQLiteStore, on exit": engine(sqlite, "exit"),
    }
    pg: RunStore | None = None
    dsn = args.pg or os.environ.get("LOOPWRIGHT_PG_DSN")
    if dsn:
        from loopwright.stores.postgres import PostgresStore

        pg = await PostgresStore.open(dsn)
        pg_async = await PostgresStore.open(dsn, synchronous_commit=False)
        variants["PostgresStore, every transition"] = engine(pg)
        variants["PostgresStore, synchronous_commit=False"] = engine(pg_async)
    out: dict[str, Any] = {"python": sys.version.split()[0], "cores": os.cpu_count(), "a": {}, "b": {}}
    for k in (10, 100):
        out["a"][k] = await per_iteration(variants, k, args.repeats if k == 10 else max(5, args.repeats // 3))
    out["b"]["SQLiteStore"] = await resume_latency(sqlite, 100, max(5, args.repeats // 3))
    if pg is not None:
        out["b"]["PostgresStore"] = await resume_latency(pg, 100, max(5, args.repeats // 3))
        await pg.close()
        await pg_async.close()
    await sqlite.close()
    shutil.rmtree(folder, ignore_errors=True)
    return out


def report(out: dict[str, Any]) -> None:
    a10, a100 = out["a"][10], out["a"][100]
    print(f"(a) µs per iteration, median wall (CPU of this process), Python {out['python']}, {out['cores']} cores")
    print(f"{'variant':<42} {'K=10':>16} {'K=100':>16} {'K100/K10':>9}")
    for name in a10:
        (w10, c10), (w100, c100) = a10[name], a100[name]
        print(f"{name:<42} {w10:>8.0f} ({c10:>5.0f}) {w100:>8.0f} ({c100:>5.0f}) {w100 / w10:>9.2f}")
    default = "SQLiteStore, every transition (default)"
    for i, what in ((0, "wall"), (1, "CPU")):
        worst = max(a10[default][i], a100[default][i])
        flat = a100[default][i] / a10[default][i]
        print(
            f"target ({what}): SQLite default <= {TARGET_US:g} µs/iter: "
            f"{'met' if worst <= TARGET_US else 'NOT met'} ({worst:.0f}); "
            f"flat (K=100 <= {TARGET_FLAT}x K=10): {'met' if flat <= TARGET_FLAT else 'NOT met'} ({flat:.2f})"
        )
    for name, ms in out["b"].items():
        print(f"(b) resume after a crash, {name}: {ms:.2f} ms to the first new checkpoint (K=100, crashed mid-run)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--pg", default=None, help="a PostgreSQL DSN to measure PostgresStore too")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args()
    figures = asyncio.run(main(args))
    report(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
