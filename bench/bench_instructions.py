"""Instructions per loop iteration, counted by valgrind's callgrind: a figure that does not move
with the machine's load (wall-clock figures on a shared machine do), for comparing two versions
of the engine. The same work as bench_loop.py's part (a), K=100: one model call and one no-op
tool call an iteration, a ScriptedModel replaying replies built once.

Counts the whole process twice, with 0 and with N runs after the same warm-up, and divides the
difference by the iterations of the N runs, so start-up and import cost nothing. The runner's
time slice is made very long: valgrind runs the code ~50x slower, and a run that yields to the
event loop every millisecond of *its* clock would yield far more often than it does natively.
Before the work, the objects of start-up are collected and frozen (``gc.freeze``): a full
collection that happened to fall inside one count but not the other walked every module's
objects, and moved a loop's figure by 100k instructions an iteration.

Usage:  python bench/bench_instructions.py                 (loopwright with every default, and the hand loop)
        python bench/bench_instructions.py --limits '{"max_repeated_calls": null}'
Needs valgrind on PATH. About a minute per variant and repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

K = 100


async def _work(which: str, runs: int, limits: dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import loopwright.loop.runner
    from bench_loop import HAND_TOOLS, hand_loop, hand_model, lw_script, noop
    from loopwright import Agent, Limits, Runner, ScriptedModel

    loopwright.loop.runner._SLICE_S = 1e9  # see the module docstring
    gc.collect()
    gc.freeze()
    if which == "hand":
        model = hand_model(K)
        for _ in range(runs + 2):
            await hand_loop(model, HAND_TOOLS, "go")
        return
    script = lw_script(K)
    agents = [
        Agent(
            name="bench",
            model=ScriptedModel(script),
            tools=[noop],
            limits=Limits(max_iterations=K + 1, timeout_s=None, **limits),
        )
        for _ in range(runs + 2)
    ]
    for agent in agents:
        result = await Runner(agent).run("go")
        assert result.outcome == "final", result.error


def count(which: str, runs: int, limits: dict[str, Any]) -> int:
    """Instructions callgrind counts for the whole process doing ``runs`` runs (after 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/out",
                sys.executable,
                __file__,
                "--child",
                which,
                str(runs),
                json.dumps(limits),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
        )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    assert found, proc.stderr[-2000:]
    return int(found.group(1))


def per_iteration(which: str, runs: int, limits: dict[str, Any], repeats: int) -> float:
    """The fewest instructions of ``repeats`` counts of each process (noise only ever adds:
    the hand loop, whose count is the smaller, has measured anywhere from 104k to 174k an
    iteration from one count to the next; loopwright's moved by under 1%)."""
    # once outside valgrind first: modules whose byte-code is stale compile now, not inside a count
    subprocess.run([sys.executable, __file__, "--child", which, "0", json.dumps(limits)], check=True)
    work = min(count(which, runs, limits) for _ in range(repeats))
    base = min(count(which, 0, limits) for _ in range(repeats))
    return (work - base) / (runs * (K + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="counts of each process; the fewest is kept")
    parser.add_argument("--limits", default="{}", help="JSON: Limits(...) options for loopwright's agent")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        which, runs, limits = args.child
        asyncio.run(_work(which, int(runs), json.loads(limits)))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH: install it (apt install valgrind) to count instructions")
    limits = json.loads(args.limits)
    hand = per_iteration("hand", args.runs, {}, args.repeats)
    lw = per_iteration("loopwright", args.runs, limits, args.repeats)
    print(f"instructions per iteration, K={K} (callgrind, {args.runs} runs after 2, fewest of {args.repeats} counts)")
    print(f"  hand-written loop  {hand:10,.0f}")
    print(f"  loopwright         {lw:10,.0f}   {lw / hand:.2f}x   limits: {limits or 'defaults'}")


if __name__ == "__main__":
    main()
