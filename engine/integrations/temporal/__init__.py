"""Runs on Temporal (public; the temporal extra): each run a workflow, each stage's work (a model
call, a turn's tool calls) an activity. The modules inside are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "DECIDE": ".names",
    "PAUSE": ".names",
    "QUEUE": ".names",
    "RESULT": ".names",
    "ReplayDivergence": ".names",
    "RunWorkflow": ".workflow",
    "STATE": ".names",
    "TemporalRunner": ".runner",
    "WAIT": ".names",
    "WORKFLOW": ".names",
    "read_result": ".runner",
    "workflow_runner": ".runner",
}

__all__ = [
    "DECIDE",
    "PAUSE",
    "QUEUE",
    "RESULT",
    "STATE",
    "WAIT",
    "WORKFLOW",
    "ReplayDivergence",
    "RunWorkflow",
    "TemporalRunner",
    "read_result",
    "workflow_runner",
]

if TYPE_CHECKING:
    from .names import DECIDE as DECIDE
    from .names import PAUSE as PAUSE
    from .names import QUEUE as QUEUE
    from .names import RESULT as RESULT
    from .names import STATE as STATE
    from .names import WAIT as WAIT
    from .names import WORKFLOW as WORKFLOW
    from .names import ReplayDivergence as ReplayDivergence
    from .runner import TemporalRunner as TemporalRunner
    from .runner import read_result as read_result
    from .runner import workflow_runner as workflow_runner
    from .workflow import RunWorkflow as RunWorkflow

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
