"""Objects the garbage collector tracks per finished run: N concurrent runs (K=5, the model
awaits 50 ms), every result held, then ``gc.get_objects()`` against the count before, by type.
What part (b) of bench_loop.py pays for at each full collection.

Usage:  python bench/tracked_objects.py [hand|loopwright] [N=2000]
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_loop import HAND_TOOLS, hand_loop, hand_model, lw_agent
from loopwright import Runner


async def _count(which: str, n: int) -> None:
    gc.collect()
    before = collections.Counter(type(o).__name__ for o in gc.get_objects())
    if which == "hand":
        model = hand_model(5, 0.05)
        held: list[object] = list(await asyncio.gather(*(hand_loop(model, HAND_TOOLS, "go") for _ in range(n))))
    else:
        runner = Runner(lw_agent(5, 0.05))
        held = list(await asyncio.gather(*(runner.run("go") for _ in range(n))))
    gc.collect()
    after = collections.Counter(type(o).__name__ for o in gc.get_objects())
    grown = after - before
    print(f"{which}: {sum(grown.values()) / n:.1f} tracked objects per finished run ({len(held)} runs held)")
    for name, count in grown.most_common(10):
        print(f"  {name:24s} {count / n:6.2f}")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "loopwright"
    asyncio.run(_count(which, int(sys.argv[2]) if len(sys.argv) > 2 else 2000))
