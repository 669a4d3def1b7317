"""A worker process for the kill -9 test: ``python -m tests.store_worker DB RUN_ID STEPS``
runs (or, if the store holds it, resumes) a run of slow sequential tools to its end, approving
whatever waits. Prints the outcome. The parent kills it at random points."""

from __future__ import annotations

import asyncio
import sys

from loopwright import Runner, approve
from loopwright.stores import SQLiteStore
from tests.store_app import make_agent, steps_script


async def main(db: str, run_id: str, steps: int) -> str:
    store = SQLiteStore(db)
    runner = Runner(make_agent(steps_script(steps, seconds=0.05)), store=store)
    saved = await store.load(run_id)
    if saved is None:
        result = await runner.run("go", run_id=run_id)
    else:
        result = await runner.resume(run_id)
    while result.outcome == "suspended":
        result = await runner.resume(run_id, {p.call_id: approve() for p in result.pending})
    await store.close()
    return result.outcome or ""


if __name__ == "__main__":
    print(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))), flush=True)
