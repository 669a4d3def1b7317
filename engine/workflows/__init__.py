"""Workflow agents: sequential, parallel, loop and map agents as nested, verified machines.

Each is an :class:`~loopwright.Agent` whose machine is its own small table (drawn with each
child as a composite state, checked by ``loopwright check``: a loop without a bound is refused)
and whose states run child agents as nested runs charging the workflow's budgets; with a store
a crash inside a step resumes there, and a child waiting for a person suspends the whole
workflow (:mod:`.children`). The tables: :mod:`.agents`.
"""

from __future__ import annotations

from ..data.exports import claim_own as _claim_own
from .agents import EXIT_LOOP, LoopAgent, MapAgent, ParallelAgent, SequentialAgent, exit_loop
from .base import Step, Workflow, WorkflowMachine
from .stored import stored_children

__all__ = [
    "EXIT_LOOP",
    "LoopAgent",
    "MapAgent",
    "ParallelAgent",
    "SequentialAgent",
    "Step",
    "Workflow",
    "WorkflowMachine",
    "exit_loop",
    "stored_children",
]

_claim_own(__name__)
