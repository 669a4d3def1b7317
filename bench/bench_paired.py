"""Two builds of loopwright on the peers workload (bench_loop.py's part (p)), paired: fresh
processes alternating A B, B A, ... so drifting load hits both alike; per iteration CPU time and
the median and the best run's wall time at K=10 and K=100, the ratio of B over A per pair and its median.

A build is a folder laid out as the installed package (``loopwright/`` holding engine/'s modules
and ``states/``); make one of a commit with::

    python bench/bench_paired.py --tree /tmp/base HEAD      # a tree of HEAD's engine/ and states/

then::

    python bench/bench_paired.py --a /tmp/base --b .          # "." is the working tree, as installed
    python bench/bench_paired.py --a /tmp/base --b . --pairs 10 --runs 300 --loop uvloop
    python bench/bench_paired.py --a . --a-env PEERS_VALIDATED=1 --b .   # validated replies vs build_reply

The change B is kept only where it buys >= 5% an iteration (issue 38).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def make_tree(commit: str, dest: Path) -> None:
    """``dest/loopwright``: the engine/ and states/ of ``commit``, as the installed package lays them out."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "engine", "states"], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        pkg = dest / "loopwright"
        pkg.mkdir(parents=True, exist_ok=True)
        for entry in (Path(tmp) / "engine").iterdir():
            os.replace(entry, pkg / entry.name)
        os.replace(Path(tmp) / "states", pkg / "states")


def child(k: int, runs: int, loop: str) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_loop as b

    runner = b.peers_runner(k)

    async def lw_run() -> object:
        result = await runner.run(b.PEERS_TASK)
        return result.output

    async def go() -> dict[str, float]:
        for _ in range(20):
            await b.peers_once(lw_run, k)
        walls = []
        cpu0 = time.process_time()
        for _ in range(runs):
            walls.append(await b.peers_once(lw_run, k))
        cpu = time.process_time() - cpu0
        return {
            "cpu_us_per_iter": cpu / runs / k * 1e6,
            "median_us_per_iter": statistics.median(walls) / k * 1e6,
            "best_us_per_iter": min(walls) / k * 1e6,  # (the least moved by a loaded machine)
        }

    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as on_uvloop:
            out = on_uvloop.run(go())
    else:
        out = asyncio.run(go())
    import loopwright

    out["file"] = loopwright.__file__  # type: ignore[assignment]
    return out


def in_build(build: str, script: str, argv: list[str], extra: list[str] | None = None) -> Any:
    """Run ``script argv`` in a fresh process on ``build`` (a tree made with ``--tree``, or '.': as
    installed), with the ``KEY=VALUE`` items of ``extra`` in its environment; its last line, as JSON."""
    env = dict(os.environ, **dict(item.split("=", 1) for item in extra or ()))
    if build != ".":
        env["PYTHONPATH"] = str(Path(build).resolve())
    out = subprocess.run([sys.executable, script, *argv], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def spawn(build: str, k: int, runs: int, loop: str, extra: list[str] | None = None) -> dict[str, float]:
    return in_build(build, __file__, ["--child", str(k), str(runs), loop], extra)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", nargs=2, metavar=("DEST", "COMMIT"), help="make a build of COMMIT at DEST, and stop")
    parser.add_argument("--a", default=".", help="build A (a tree made with --tree; '.': as installed)")
    parser.add_argument("--b", default=".", help="build B")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--ks", default="10,100", help="the K of each comparison (K=1: a short run's fixed cost)")
    parser.add_argument("--runs", type=int, default=200, help="timed runs a process (K=10; K=100 a tenth)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the event loop of both")
    parser.add_argument(
        "--a-env", action="append", metavar="KEY=VALUE", help="an environment variable of A's processes"
    )
    parser.add_argument(
        "--b-env", action="append", metavar="KEY=VALUE", help="an environment variable of B's processes"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), int(args.child[1]), args.child[2])))
        return
    if args.tree:
        make_tree(args.tree[1], Path(args.tree[0]))
        return
    print(f"load average {os.getloadavg()}, loop {args.loop}")
    for k in (int(k) for k in args.ks.split(",")):
        runs = args.runs if k <= 10 else max(args.runs // 10, 5)
        pairs = []
        for i in range(args.pairs):
            a, b = ("a", args.a, args.a_env), ("b", args.b, args.b_env)
            order = (a, b) if i % 2 == 0 else (b, a)
            got = {name: spawn(build, k, runs, args.loop, env) for name, build, env in order}
            pairs.append(got)
        for key in ("cpu_us_per_iter", "median_us_per_iter", "best_us_per_iter"):
            a = [p["a"][key] for p in pairs]
            b = [p["b"][key] for p in pairs]
            paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
            print(
                f"K={k:<4} {key:<18} A {statistics.median(a):6.2f}  B {statistics.median(b):6.2f}  "
                f"B/A paired median {paired:5.3f}  ({', '.join(f'{y / x:.3f}' for x, y in zip(a, b, strict=True))})"
            )
        print(f"  A from {pairs[0]['a']['file']}\n  B from {pairs[0]['b']['file']}")


if __name__ == "__main__":
    main()
