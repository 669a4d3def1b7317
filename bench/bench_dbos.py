"""Runs on DBOS next to RunStore and in-memory runs, in one process, in one invocation.

(a) microseconds per iteration (one model call, one no-op tool call) of one run of K=10
    iterations at a time, median of ``--repeats``: in memory; RunStore (SQLiteStore, and
    PostgresStore with ``--pg``); DBOS on SQLite; DBOS on PostgreSQL (``--pg``). A DBOS run
    records one step per stage (five stages an iteration) plus the workflow's own rows.
(b) runs/s: ``--runs`` runs of K=10 started at once (DBOS: started as workflows in this
    process, no queue), wall time until the last ends.

The DBOS variants run after the others (DBOS is one instance per process: launched on SQLite,
destroyed, launched on PostgreSQL).

(c) ``--step-bytes N``: instead, one run of N iterations on DBOS+SQLite, and the bytes DBOS stored
    for its stage steps (the ``output`` column): per step of the second and of the last iteration,
    the largest step, the total.

Usage:  python bench/bench_dbos.py [--repeats 20] [--runs 50] [--pg postgresql://...] [--json out.json]
        python bench/bench_dbos.py --step-bytes 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import agent
from loopwright import Runner
from loopwright.stores import RunStore, SQLiteStore

K = 10
Go = Callable[[str], Awaitable[Any]]


def in_process(store: RunStore | None) -> Go:
    runner = Runner(agent(K), store=store)

    async def go(run_id: str) -> Any:
        result = await runner.run("go", run_id=run_id)
        assert result.outcome == "final"

    return go


def on_dbos() -> Go:
    from loopwright.integrations import dbos as dbos_runner

    async def go(run_id: str) -> Any:
        result = await dbos_runner.run("bench", "go", run_id=run_id)
        assert result.outcome == "final"

    return go


async def per_iteration(go: Go, repeats: int) -> float:
    times = []
    await go(uuid.uuid4().hex)  # warm-up
    for _ in range(repeats):
        start = time.perf_counter()
        await go(uuid.uuid4().hex)
        times.append((time.perf_counter() - start) / K * 1e6)
    return statistics.median(times)


async def throughput(go: Go, runs: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(go(uuid.uuid4().hex) for _ in range(runs)))
    return runs / (time.perf_counter() - start)


async def measure(go: Go, args: argparse.Namespace) -> dict[str, float]:
    return {"us_per_iteration": await per_iteration(go, args.repeats), "runs_per_s": await throughput(go, args.runs)}


def dbos_variant(db: str, args: argparse.Namespace) -> dict[str, float]:
    from dbos import DBOS

    from loopwright.integrations import dbos as dbos_runner

    dbos_runner.register(agent(K))
    dbos_runner.launch(db)
    try:
        return asyncio.run(measure(on_dbos(), args))
    finally:
        DBOS.destroy()


def step_bytes(iterations: int) -> dict[str, Any]:
    """One run of ``iterations`` on DBOS+SQLite: the stored bytes of its stage steps."""
    import sqlite3

    from dbos import DBOS

    from loopwright.integrations import dbos as dbos_runner

    path = Path(tempfile.mkdtemp(prefix="bench-dbos-")) / "dbos.sqlite"
    dbos_runner.register(agent(iterations))
    dbos_runner.launch(f"sqlite:///{path}")
    try:
        run_id = uuid.uuid4().hex
        asyncio.run(on_dbos()(run_id))
        stages = [
            s["output"]["stage"] for s in DBOS.list_workflow_steps(run_id) if s["function_name"] == "loopwright.stage"
        ]
    finally:
        DBOS.destroy()
    with sqlite3.connect(path) as db:
        sizes = [n for (n,) in db.execute(
            "SELECT length(output) FROM operation_outputs WHERE workflow_uuid = ? AND function_name = ? "
            "ORDER BY function_id", (run_id, "loopwright.stage"))]  # fmt: skip
    starts = [i for i, stage in enumerate(stages) if stage == "preprocess"]
    second, last = sizes[starts[1] : starts[2]], sizes[starts[-2] : starts[-1]]
    return {
        "iterations": iterations,
        "steps": len(sizes),
        "second_iteration": dict(zip(stages[starts[1] : starts[2]], second, strict=True)),
        "last_iteration": dict(zip(stages[starts[-2] : starts[-1]], last, strict=True)),
        "largest_step": max(sizes),
        "total": sum(sizes),
    }


def main(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-dbos-"))
    out: dict[str, Any] = {"k": K, "repeats": args.repeats, "runs": args.runs, "cores": os.cpu_count()}
    out["in memory"] = asyncio.run(measure(in_process(None), args))
    out["RunStore SQLite"] = asyncio.run(measure(in_process(SQLiteStore(str(folder / "runs.db"))), args))
    if args.pg:
        from loopwright.stores.postgres import PostgresStore

        out["RunStore PostgreSQL"] = asyncio.run(measure(in_process(PostgresStore(args.pg)), args))
    out["DBOS SQLite"] = dbos_variant(f"sqlite:///{folder / 'dbos.sqlite'}", args)
    if args.pg:
        out["DBOS PostgreSQL"] = dbos_variant(args.pg, args)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pg", default=os.environ.get("LOOPWRIGHT_PG_DSN"), help="a PostgreSQL URL (a fresh database)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--step-bytes", type=int, default=None, metavar="N", help="measure step output bytes only")
    if parser.parse_args().step_bytes:
        measured = step_bytes(parser.parse_args().step_bytes)
        print(json.dumps(measured, indent=2))
        raise SystemExit(0)
    figures = main(parser.parse_args())
    print(f"K={K}, {figures['repeats']} repeats, {figures['runs']} concurrent runs, {figures['cores']} cores")
    print(f"{'variant':<22} {'us/iteration':>14} {'runs/s':>10}")
    for name, value in figures.items():
        if isinstance(value, dict):
            print(f"{name:<22} {value['us_per_iteration']:>14.0f} {value['runs_per_s']:>10.1f}")
    if parser.parse_args().json:
        Path(parser.parse_args().json).write_text(json.dumps(figures, indent=2))
