"""A Temporal run's OpenTelemetry spans: built in the workflow, once per leg (from its start, or a
resume, to its stop: ended, suspended or paused), from the leg's recorded events, and never while
Temporal replays the workflow's history.

Why there: the workflow's code runs again on every replay (a worker lost, its cache evicted,
Temporal's replayer), and a stage's activity may run twice (its worker lost); spans emitted as a
run goes would be emitted again each time, and a span open across a worker's death (the run's
own ``invoke_agent``) would never end. Each leg's stop, by contrast, is one workflow task: the
first execution of that task (``not workflow.unsafe.is_replaying()``) hands the leg's events to
every observer with a ``trace_leg`` method (:class:`~loopwright.integrations.otel.Tracing`), which
builds the same spans it builds for a ``Runner.run``, with the times the events carry. The
activities' own runs are not traced (:class:`~.host.DrivenRunner`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

from ...data.run_state import RunState
from ...loop.run import Run
from ...runtime.observers import INSTRUMENTS


@dataclass(eq=False)
class LegStart:
    """What a leg's spans need of its start: the runner, the run state as it was, and when."""

    runner: Any
    state: RunState
    mark: int
    """Events of the run's log before the leg's first."""
    started: float
    ran: set[str] = field(default_factory=set)
    """Calls that waited and ran in this leg (approved): spans of their own, as on ``Runner``."""


def tracers(runner: Any) -> list[Any]:
    """The observers of ``runner``'s runs (its own and every runner's) that trace legs."""
    found: dict[int, Any] = {}
    for observer, _ in (*INSTRUMENTS.start, *runner.observers.start):
        if callable(getattr(observer, "trace_leg", None)):
            found.setdefault(id(observer), observer)
    return list(found.values())


def leg_start(run: Run, mark: int | None = None) -> LegStart | None:
    """The start of a leg of ``run`` (None: nobody traces its runs); ``mark``: its first event."""
    runner = run.runner
    if not tracers(runner):
        return None
    state = RunState.from_json(run.state.to_json())  # (as it is now: the run goes on with the same trace)
    return LegStart(runner, state, len(run.ctx.log) if mark is None else mark, workflow.time())


def trace_leg(start: LegStart | None, run: Run) -> None:
    """The leg that began at ``start`` has stopped: its spans, unless Temporal is replaying it."""
    if start is None or workflow.unsafe.is_replaying():
        return
    events = run.ctx.log.events()[start.mark :]
    if not events:  # (decisions refused: nothing ran)
        return
    result, ended = run.result, workflow.time()
    with workflow.unsafe.sandbox_unrestricted():
        for observer in tracers(start.runner):
            try:
                observer.trace_leg(start, events, result, started=start.started, ended=ended, ran=start.ran)
            except Exception as exc:  # an observer never breaks a run
                print(
                    f"loopwright: {type(observer).__name__}.trace_leg raised {type(exc).__name__}: {exc}",
                    file=sys.stderr,
                )
