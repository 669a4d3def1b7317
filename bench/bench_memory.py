"""What a run keeps (issue 38, item 4): the peers workload (bench_loop.py part (p)), C runs at once,
K iterations each, every run held at its last model call (all C in flight, as at the peak of the
shared harness's ``--C 1000`` test), then ``tracemalloc`` by where each block was allocated, per
run; the same of one finished run's RunResult, held alone; and a finished run's state and log by
part (``sys.getsizeof`` of each object once, with its ``__dict__`` and fields set; the table's rows
and the interned names that every run shares left out)::

    python bench/bench_memory.py                  # C=1000, K=10
    python bench/bench_memory.py --runs 500 --k 10 --top 25

The table names the allocating line (``file:line``) and its KiB a run; the sum is the run's
memory in flight (the harness's ``rss_mb_per_run`` adds the allocator's slack and the pages the
peak touched).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _parts(run: Any) -> None:
    """A finished run's state and log by part, KiB (each object counted once)."""
    from loopwright.table.rows import Row

    rs, log = run.state, run.ctx.log
    seen: set[int] = set()

    def size(o: Any) -> int:
        if id(o) in seen or isinstance(o, (Row, type)) or (type(o) is str and sys.intern(o) is o):
            return 0
        seen.add(id(o))
        total = sys.getsizeof(o)
        if hasattr(o, "__dict__"):
            total += size(o.__dict__) + size(getattr(o, "__pydantic_fields_set__", None))
        if isinstance(o, dict):
            total += sum(size(v) for v in o.values())
        elif isinstance(o, (tuple, list, set, frozenset)):
            total += sum(size(v) for v in o)
        return total

    parts = [p for m in rs.messages for p in m.parts]
    usages = [  # a reply's usage: the Usage object, or (since issue 38's third round) its counts
        v
        for e in log.entries
        if isinstance(e, tuple)
        for v in e
        if type(v).__name__ == "Usage" or (type(v) is tuple and len(v) == 9 and isinstance(v[-1], (set, frozenset)))
    ]
    table = (
        ("history: tool calls (with their args)", [p for p in parts if type(p).__name__ == "ToolCall"]),
        ("history: tool results", [p for p in parts if type(p).__name__ == "ToolResult"]),
        ("history: the messages themselves", rs.messages),
        (f"log: the replies' usage ({len(usages)})", usages),
        (f"log: its {len(log.entries)} entries", [log.entries]),
        ("log: the times", [log.times]),
        ("the trace", [rs.trace]),
        ("the run state's other fields", [rs]),
    )
    total = 0
    for name, objects in table:
        got = sum(size(o) for o in objects)
        total += got
        print(f"  {got / 1024:7.2f} KiB  {name}")
    print(f"  {total / 1024:7.2f} KiB  in all")


def _table(snapshot: tracemalloc.Snapshot, base: tracemalloc.Snapshot, per: int, top: int) -> float:
    grown: dict[str, int] = defaultdict(int)
    for stat in snapshot.compare_to(base, "traceback"):
        frame = next((f for f in reversed(stat.traceback) if "pydantic" not in f.filename), stat.traceback[-1])
        where = "/".join(Path(frame.filename).parts[-2:])
        grown[f"{where}:{frame.lineno}"] += stat.size_diff
    total = sum(grown.values())
    for where, size in sorted(grown.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {size / per / 1024:7.2f} KiB  {where}")
    print(f"  {total / per / 1024:7.2f} KiB  in all")
    return total / per / 1024


async def main(runs: int, k: int, top: int) -> None:
    import bench_loop as b
    from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner

    gate = asyncio.Event()
    waiting = [0]
    arrived = asyncio.Event()

    class HeldPeersModel(b.PeersModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            if b.PEERS_RUN.get().model_calls == k:  # the last call: hold the run here
                waiting[0] += 1
                if waiting[0] == runs:
                    arrived.set()
                await gate.wait()
            else:
                await asyncio.sleep(0)
            return await super().complete(request)

    runner = Runner(Agent(name="bench", model=HeldPeersModel(), tools=[b.add], limits=Limits(max_iterations=k + 10)))

    async def one() -> Any:
        b.PEERS_RUN.set(b.PeersStep(k))
        return await runner.run(b.PEERS_TASK)

    for _ in range(2):  # warm: caches and lazy imports paid
        gate.set()
        await asyncio.gather(*(one() for _ in range(10)))
    gc.collect()
    tracemalloc.start(4)  # (a block made in pydantic is named by the line that asked for it)
    base = tracemalloc.take_snapshot()
    kept = await asyncio.ensure_future(one())  # (its own task, as every run below)
    gc.collect()
    done = tracemalloc.take_snapshot()
    print(f"one finished RunResult (K={k}), held alone:")
    _table(done, base, 1, top)
    assert kept.outcome == "final"
    del kept
    b.PEERS_RUN.set(b.PeersStep(k))
    gate.set()
    whole = runner.start(b.PEERS_TASK)
    await whole.steps(to_end=True)
    print(f"a finished run's state and log (K={k}), by part:")
    _parts(whole)
    gate.clear()
    gc.collect()
    base = tracemalloc.take_snapshot()
    tasks = [asyncio.ensure_future(one()) for _ in range(runs)]
    await arrived.wait()
    gc.collect()
    held = tracemalloc.take_snapshot()
    print(f"{runs} runs in flight at their last model call (K={k}), per run:")
    _table(held, base, runs, top)
    gate.set()
    results = await asyncio.gather(*tasks)
    assert all(r.outcome == "final" for r in results)
    tracemalloc.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.k, args.top))
