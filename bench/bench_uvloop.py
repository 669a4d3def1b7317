"""uvloop against asyncio's own loop on the peers workload (issue 38, item 5): the same build,
fresh processes alternating asyncio, uvloop, uvloop, asyncio, ...; per iteration at K=10 and
K=100, the median of uvloop over asyncio. Two models: one answering at once (the shared harness's
per-iteration workload: a run that never suspends, which on uvloop lets the loop run once each
``HOLD`` + 1 stages, as it cannot see the loop's ready line) and one that lets the loop run once a
call (``PEERS_SUSPEND=1``: a model awaiting its socket, as every real one does)::

    python bench/bench_uvloop.py
    python bench/bench_uvloop.py --pairs 6 --runs 300
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_paired import spawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200, help="timed runs a process (K=10; K=100 a tenth)")
    parser.add_argument("--ks", default="10,100")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    for model, env in (("answers at once", []), ("suspends once a call", ["PEERS_SUSPEND=1"])):
        for k in (int(k) for k in args.ks.split(",")):
            runs = args.runs if k <= 10 else max(args.runs // 10, 5)
            got: dict[str, list[float]] = {"asyncio": [], "uvloop": []}
            for i in range(args.pairs):
                for loop in ("asyncio", "uvloop") if i % 2 == 0 else ("uvloop", "asyncio"):
                    got[loop].append(spawn(".", k, runs, loop, env)["best_us_per_iter"])
            ratio = statistics.median(u / a for a, u in zip(got["asyncio"], got["uvloop"], strict=True))
            print(
                f"{model:<21} K={k:<4} best us/iteration: asyncio {statistics.median(got['asyncio']):6.2f}  "
                f"uvloop {statistics.median(got['uvloop']):6.2f}  uvloop/asyncio paired median {ratio:5.3f}"
            )


if __name__ == "__main__":
    main()
