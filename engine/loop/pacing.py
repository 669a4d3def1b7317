"""The run's clock: the fairness probe (when a run that never suspends lets the event loop run)
and the deadline (``timeout_s``) with the cancellations the engine takes back.

:class:`Paced` is the base of :class:`~loopwright.loop.run.Run`: these are its rare paths (the
quiet case of the probe is written out in ``Run.steps``, which reads :data:`OTHER_LOOP`,
:data:`SLICE_S` and the slots kept here).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..data.run_state import RunState

_clock = time.time
_monotonic = time.monotonic
_BASE_TIME = asyncio.BaseEventLoop.time
OTHER_LOOP = object()
"""``Paced._loop`` on an event loop that is not asyncio's own (uvloop): yield at every transition."""
SLICE_S = 0.001
"""A run that never suspends still lets the event loop run at least this often (seconds)."""
HOLD = 4
"""A run goes on for at most this many more stages while another task waits (ready, or a timer
due), then lets it run: a waiting task runs within one loop iteration (five stages) of this run."""


class Paced:
    """The fairness probe and the deadline of one run (see the module docstring)."""

    __slots__ = ("_held", "_in_stage", "_loop", "_timed_out", "_timer", "_waiter", "_yielded", "state", "task")

    state: RunState
    task: asyncio.Task[Any] | None

    def _start_pacing(self) -> None:
        self.task = None
        self._loop: Any = None
        self._yielded = 0.0
        self._waiter = 0
        """``id()`` of the waiter first in the loop's line when last looked (see _must_yield):
        an id, not the handle, so a run never keeps another task's finished step alive."""
        self._held = 0
        self._timer: asyncio.TimerHandle | None = None
        """The run's one deadline timer (armed at its first step when it has ``timeout_s``)."""
        self._in_stage = False
        self._timed_out = False
        """The deadline timer cancelled the stage in progress (the runner takes it back)."""

    def _must_yield(self) -> bool:
        """Whether to let the event loop run before the next stage (not before the run's first).

        Another task waits (ready, or its timer due): the first time this run sees that
        waiter it goes on; if the same waiter is still first in line ``HOLD`` stages later,
        the loop has not run since, and the run yields. A waiter that changed means the loop
        ran in between (a stage suspended): counting starts again. So a run that suspends
        anyway (a model call) pays no extra round trip of the loop, and one that never
        suspends holds it for at most ``HOLD`` + 1 stages. With nothing waiting, the run
        still yields once per ``SLICE_S`` since its own last yield (I/O is polled then)."""
        if len(self.state.trace) < 2:
            return False
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._yielded = _monotonic()
            if not hasattr(loop, "_ready") or type(loop).time is not _BASE_TIME:
                loop = self._loop = OTHER_LOOP  # not asyncio's own: yield at every transition
        if loop is OTHER_LOOP:
            return True
        ready = loop._ready
        if ready:
            waiter = ready[0]
        else:
            now = _monotonic()  # asyncio's own loops keep time.monotonic(): read it without a Python frame
            scheduled = loop._scheduled
            if not scheduled or scheduled[0]._when > now:
                self._waiter = 0
                return now - self._yielded > SLICE_S
            waiter = scheduled[0]
        if id(waiter) != self._waiter:  # (a reused id only makes the run yield sooner)
            self._waiter, self._held = id(waiter), 0
            return False
        self._held += 1
        return self._held >= HOLD

    def _arm_deadline(self) -> None:
        """One timer per run (not one per stage): when ``timeout_s`` runs out it marks the
        deadline and cancels the stage in progress, which the table then ends."""
        rs = self.state
        if self._timer is not None or rs.deadline_hit or rs.deadline is None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + (rs.deadline - _clock()), self._deadline_passed)

    def _check_deadline(self, task: asyncio.Task[Any] | None) -> None:
        """After a stage: take back a deadline cancellation the stage swallowed; note a
        deadline that passed while the stage ran without waiting."""
        if self._timed_out:
            self._take_back_cancel(task)
        rs = self.state
        if rs.deadline is not None and not rs.deadline_hit and _clock() >= rs.deadline:
            rs.deadline_hit = True

    def _deadline_passed(self) -> None:
        self._timer = None
        self.state.deadline_hit = True
        task = self.task
        if self._in_stage and task is not None and not task.done():
            self._timed_out = True
            task.cancel()

    def _disarm_deadline(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancelled_from_outside(self, task: asyncio.Task[Any] | None) -> bool:
        """The stage was cancelled: by the engine itself (the deadline, ``runner.cancel``: the
        table ends the run), or from outside (True: the run ends cancelled, then re-raises)."""
        if self._take_back_cancel(task):
            return False
        self.state.cancel_requested = True
        return True

    def _take_back_cancel(self, task: asyncio.Task[Any] | None) -> bool:
        """Undo the cancellations that were the engine's own (the deadline's, ``runner.cancel``);
        whether those were all there were (False: someone else cancelled the task too)."""
        if self._timed_out:
            self._timed_out = False
            if task is None or task.uncancel() == 0:
                return True  # only the run's deadline
        if self.state.cancel_requested and task is not None and task.cancelling():
            task.uncancel()  # our own runner.cancel(): end normally
            return True
        return False
