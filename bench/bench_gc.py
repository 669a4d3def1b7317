"""The collector's cost at many concurrent runs (issue 38, item 5): the peers workload (bench_loop.py
part (p): a reply built per call, with usage; one async no-op tool), C runs at once in one event loop,
K iterations each, the model awaiting ``--latency-ms`` per call; under each collector setting, in
fresh processes, the settings alternating round by round::

    python bench/bench_gc.py                       # C=1000, K=10, 10 ms, 3 rounds
    python bench/bench_gc.py --runs 1000 --rounds 5

Per setting: the median wall time, the collector's share of it (``gc.callbacks``), the collections
of each generation, and the resident memory per run. The settings:

- ``default``: CPython's thresholds (700, 10, 10);
- ``freeze``: ``gc.freeze()`` once the app is loaded (the modules, the agent, the runner move to a
  permanent generation no collection walks again), default thresholds;
- ``50000``: ``gc.set_threshold(50_000, 20, 20)`` (a young collection every 50,000 allocations);
- ``freeze+50000``: both;
- ``off``: ``gc.disable()`` (a diagnostic: reference cycles are never freed).

What a server should set: ``docs/guide/running.md``, "Performance".
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETTINGS = ("default", "freeze", "50000", "freeze+50000", "off")


def child(setting: str, runs: int, k: int, latency_s: float) -> dict[str, Any]:
    import bench_loop as b
    from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner

    class SlowPeersModel(b.PeersModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(latency_s)
            return await super().complete(request)

    runner = Runner(Agent(name="bench", model=SlowPeersModel(), tools=[b.add], limits=Limits(max_iterations=k + 10)))

    async def one() -> Any:
        b.PEERS_RUN.set(b.PeersStep(k))
        result = await runner.run(b.PEERS_TASK)
        assert result.outcome == "final" and result.iterations == k + 1
        return result

    async def go() -> dict[str, Any]:
        await asyncio.gather(*(one() for _ in range(20)))  # (warm: caches and lazy imports paid)
        gc.collect()
        if "freeze" in setting:
            gc.freeze()
        if "50000" in setting:
            gc.set_threshold(50_000, 20, 20)
        if setting == "off":
            gc.disable()
        timer = b.GcTimer()
        baseline = b.rss_kib()
        with timer:
            started = time.perf_counter()
            results = await asyncio.gather(*(one() for _ in range(runs)))
            wall = time.perf_counter() - started
        peak = b.rss_kib()
        assert len(results) == runs
        return {
            "wall_s": wall,
            "gc_s": timer.seconds,
            "collections": timer.counts,
            "kib_per_run": (peak - baseline) / runs,
        }

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        setting, runs, k, latency = args.child
        print(json.dumps(child(setting, int(runs), int(k), float(latency))))
        return
    settings = args.settings.split(",")
    got: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
    for i in range(args.rounds):
        for setting in settings[i % len(settings) :] + settings[: i % len(settings)]:
            given = [setting, str(args.runs), str(args.k), str(args.latency_ms / 1000)]
            out = subprocess.run([sys.executable, __file__, "--child", *given], check=True, capture_output=True,
                                 text=True).stdout  # fmt: skip
            got[setting].append(json.loads(out.splitlines()[-1]))
    print(
        f"{args.runs} concurrent runs, K={args.k}, model {args.latency_ms:g} ms a call; {args.rounds} rounds; medians"
    )
    base = statistics.median(r["wall_s"] for r in got[settings[0]])
    for setting in settings:
        taken = got[setting]
        wall = statistics.median(r["wall_s"] for r in taken)
        share = statistics.median(r["gc_s"] / r["wall_s"] for r in taken)
        g0, g1, g2 = (statistics.median(r["collections"][g] for r in taken) for g in range(3))
        kib = max(r["kib_per_run"] for r in taken)
        print(
            f"  {setting:<13} wall {wall:6.3f} s ({wall / base:4.2f}x {settings[0]})  gc {share:5.1%} of wall  "
            f"collections gen0/1/2 {g0:g}/{g1:g}/{g2:g}  {kib:5.1f} KiB/run"
        )


if __name__ == "__main__":
    main()
