"""RunStream: one run's events as an async iterator (``runner.stream(text)``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..data.result import RunResult
from ..data.run_state import RunState
from .run import Run, RunHost

_FINISHED = object()


class RunStream:
    """An async iterator over one run's events; ``result`` once it is exhausted."""

    def __init__(
        self, runner: RunHost, rs: RunState | None, deps: Any = None, *, make: Callable[..., Run] | None = None
    ) -> None:
        """The stream of a new Run of ``rs``, or of the run ``make(sink)`` makes (a run in a
        session: :func:`loopwright.loop.sessions.session_run`)."""
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        sink = self._queue.put_nowait
        if make is not None:
            self.run = make(sink)
        else:
            assert rs is not None
            self.run = Run(runner, rs, sink=sink, stream_deltas=True, deps=deps)
        self.run_id = self.run.run_id
        self._task: asyncio.Task[RunResult] | None = None
        self._result: RunResult | None = None
        self.before: Callable[[], Awaitable[None]] | None = None
        """Awaited before the run starts (the runner's toolsets are opened and listed)."""

    @property
    def result(self) -> RunResult:
        if self._result is None:
            raise RuntimeError("the run has not finished: iterate the stream to its end first")
        return self._result

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        if self._task is not None:
            raise RuntimeError("a RunStream can be iterated once")
        queue = self._queue
        if self.before is not None:
            await self.before()
        task = self._task = asyncio.create_task(self.run.run_to_end())
        task.add_done_callback(lambda _t: queue.put_nowait(_FINISHED))
        try:
            while (event := await queue.get()) is not _FINISHED:
                yield event
            self._result = await task
        finally:
            if not task.done():  # the consumer left early: end the run cleanly
                self.run.runner.cancel(self.run_id)
                await asyncio.gather(task, return_exceptions=True)
