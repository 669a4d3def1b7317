"""A store wrapper that "kills the process" at a chosen checkpoint, and a driver that runs an
agent to its end through crashes and suspensions, resuming from the store each time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loopwright import Agent, Runner, approve
from loopwright.data.result import RunResult
from loopwright.stores import Checkpoint, RunStore, StoreWrapper
from tests.store_app import Crash


class CrashingStore(StoreWrapper):
    """Delegates to ``inner``; its ``at``-th save (counted in ``counter``, shared by the stores
    of one driven run) raises :class:`Crash` instead of saving. Keeps every checkpoint."""

    def __init__(self, inner: RunStore, at: int | None = None, counter: list[int] | None = None) -> None:
        super().__init__(inner)
        self.at = at
        self.counter = counter if counter is not None else [0]
        self.checkpoints: list[Checkpoint] = []

    @property
    def saves(self) -> int:
        return self.counter[0]

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        self.counter[0] += 1
        if self.counter[0] == self.at:
            raise Crash(f"checkpoint {self.at}")
        self.checkpoints.append(checkpoint)
        return await self.inner.save(checkpoint, version, owner)


async def drive(
    make_agent: Callable[[], Agent],
    store: Any,
    *,
    crash_at: int | None,
    run_id: str = "r1",
    text: str = "go",
    counter: list[int] | None = None,
    durability: str = "transition",
) -> tuple[RunResult, int]:
    """Run to the end, approving every pending call, with a crash at save ``crash_at``; after a
    crash a new runner on a new store connection (``store``: a path for SQLite, or a function
    that opens a store) resumes from the store. Returns the final result and the crashes;
    ``counter[0]`` ends as the number of saves tried."""
    from loopwright.stores import SQLiteStore

    def connect() -> RunStore:
        return store() if callable(store) else SQLiteStore(store)

    counter = counter if counter is not None else [0]
    crashes = 0
    result: RunResult | None = None
    started = False
    while result is None or result.outcome == "suspended":
        runner = Runner(make_agent(), store=CrashingStore(connect(), crash_at, counter), durability=durability)
        try:  # each attempt in a task of its own, as a process of its own: a crashed one has ended
            if not started or await runner.store.load(run_id) is None:
                started = True
                result = await asyncio.create_task(runner.run(text, run_id=run_id))
            elif result is None:  # after a crash
                result = await asyncio.create_task(runner.resume(run_id))
            else:
                decisions = {p.call_id: approve() for p in result.pending}
                result = await asyncio.create_task(runner.resume(run_id, decisions))
        except (Crash, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup) and not exc.subgroup(Crash):
                raise
            crashes += 1
            result = None
        finally:
            await runner.store.close()
    return result, crashes
