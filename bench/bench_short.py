"""A short run's fixed cost part by part (issue 38, item 4): the peers workload (bench_loop.py part
(p)) at K=1, in one process, each part timed alone in a loop of its own (the best of five rounds,
µs): the run id, the run's state (``Runner.new_run``), the Run with its context and log
(``Run(...)``, registered and unregistered), the result (``RunResult.of``), the deadline (the
whole run with and without ``timeout_s``), and the whole run::

    python bench/bench_short.py
    PEERS_VALIDATED=1 python bench/bench_short.py --n 5000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


async def main(n: int) -> None:
    import bench_loop as b
    from loopwright import Agent, Limits, Runner
    from loopwright.data.result import RunResult
    from loopwright.loop.options import new_run_id
    from loopwright.loop.run import Run

    runner = b.peers_runner(1)
    no_deadline = Runner(Agent(name="bench", model=b.PeersModel(), tools=[b.add], limits=Limits(timeout_s=None)))

    async def whole(on: Runner) -> None:
        b.PEERS_RUN.set(b.PeersStep(1))
        await on.run(b.PEERS_TASK)

    def made() -> None:
        run = Run(runner, runner.new_run(b.PEERS_TASK))
        runner.unregister(run.state.run_id)

    b.PEERS_RUN.set(b.PeersStep(1))
    done = Run(runner, runner.new_run(b.PEERS_TASK))
    await done.steps(to_end=True)
    parts: dict[str, Callable[[], Any]] = {
        "the run id (new_run_id)": new_run_id,
        "the run state (Runner.new_run)": lambda: runner.new_run(b.PEERS_TASK),
        "new_run + Run(...) (context, log, register)": made,
        "the result (RunResult.of)": lambda: RunResult.of(done.state, done.ctx.log, done.machine),
    }
    runs: dict[str, Callable[[], Awaitable[None]]] = {
        "a K=1 run (Runner.run)": lambda: whole(runner),
        "a K=1 run without timeout_s (no deadline)": lambda: whole(no_deadline),
    }
    best: dict[str, float] = {}
    for _ in range(5):
        for name, part in parts.items():
            started = time.perf_counter()
            for _ in range(n):
                part()
            best[name] = min(best.get(name, float("inf")), (time.perf_counter() - started) / n * 1e6)
        for name, run in runs.items():
            started = time.perf_counter()
            for _ in range(n):
                await run()
            best[name] = min(best.get(name, float("inf")), (time.perf_counter() - started) / n * 1e6)
    for name, us in best.items():
        print(f"{us:8.2f} us  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    asyncio.run(main(parser.parse_args().n))
