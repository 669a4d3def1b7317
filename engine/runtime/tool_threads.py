"""The worker threads sync tools run in: a call takes an idle thread or starts a new one, so a
thread stuck in a timed-out call never delays a fresh call; a result that comes after its call
timed out is logged, not used."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from .log import get_logger

_late_log = logging.getLogger("loopwright")
MAX_TOOL_THREADS = 256
"""At most this many sync tool calls run in threads at once (timed-out ones included)."""


class _Workers:
    """Worker threads for sync tools. A call takes an idle thread or starts a new one, so a
    thread still stuck in a timed-out call never delays a fresh call. Idle threads end after
    ``idle_s``; threads are daemons, so a stuck tool never keeps the process alive."""

    def __init__(self, idle_s: float = 30.0) -> None:
        self.idle_s = idle_s
        self._idle: list[queue.SimpleQueue[Any]] = []
        self._lock = threading.Lock()
        self.threads = 0

    def run(self, fn: Callable[..., Any], kwargs: dict[str, Any], name: str) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        job = (fn, kwargs, contextvars.copy_context(), loop, future, name)
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                if self.threads >= MAX_TOOL_THREADS:
                    raise RuntimeError(
                        f"{self.threads} sync tool calls are still running in threads (timed-out ones included); "
                        "this call was not started"
                    )
                self.threads += 1
                inbox = queue.SimpleQueue()
                threading.Thread(target=self._work, args=(inbox,), name=f"loopwright-tool-{self.threads}",
                                 daemon=True).start()  # fmt: skip
        inbox.put(job)
        return future

    def _work(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            try:
                fn, kwargs, context, loop, future, name = inbox.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # else a call has just taken it: its job is coming
                        self._idle.remove(inbox)
                        self.threads -= 1
                        return
                continue
            value: Any = None
            error: BaseException | None = None
            try:
                value = context.run(fn, **kwargs)
            except BaseException as exc:  # handed to the awaiting task (or logged if none waits)
                error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, value, error, name)
            except RuntimeError:  # the event loop has closed
                _late(name, value, error)
            del fn, kwargs, context, loop, future, value, error
            with self._lock:
                self._idle.append(inbox)


class Carried(Exception):
    """A BaseException a sync tool raised, on its way from the thread to the awaiting call."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None, name: str) -> None:
    if future.cancelled():
        _late(name, value, error)
    elif error is not None:
        # a BaseException (GeneratorExit, SystemExit, KeyboardInterrupt) travels wrapped: the task
        # would throw it into the outermost coroutine, past every handler below it
        future.set_exception(error if isinstance(error, Exception) else Carried(error))
    else:
        future.set_result(value)


def _late(name: str, value: Any, error: BaseException | None) -> None:
    """A sync tool finished after its call timed out (or its run ended): say so in the log."""
    try:
        what = f"raised {type(error).__name__}: {error}" if error is not None else f"returned {value!r}"
    except Exception:
        what = f"returned a {type(value).__name__}"
    what = what if len(what) <= 300 else what[:300] + "..."
    _late_log.warning("tool %r finished after it timed out; its result was not used: %s", name, what)
    logger = get_logger()
    if logger.enabled:
        logger.warning("tool_late_result", tool=name, result=what)


WORKERS = _Workers()
"""The worker threads of every sync tool call."""
