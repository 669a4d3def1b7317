"""loopwright.eval: evaluate an agent on a set of cases (``pip install 'loopwright[eval]'`` for
YAML sets).

- :class:`EvalCase`, :class:`EvalSet`: cases as data, loaded from and saved to YAML or JSON
  (:func:`eval_set_schema` is the file's JSON schema);
- evaluators: :class:`TrajectoryCheck` (EXACT / IN_ORDER / ANY_ORDER / SUBSET with a partial
  score), :class:`ResponseCheck`, :class:`SchemaCheck`, :class:`JudgeCheck` (an LLM judge on any
  Model), :class:`RunCheck` (outcome, limits, counts, rows of the machine), and user functions
  ``(case, result) -> Score``;
- :class:`ToolMock`: canned tool results, so an eval runs without side effects;
- :func:`evaluate` → :class:`EvalReport`; :func:`pytest_cases` makes each case a pytest test;
- :func:`case_from_events`: a recorded run as a case, replayed against its model replies.

The ``loopwright eval`` command runs sets, records cases from a store and compares reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..data.exports import claim as _claim
from ..data.exports import claim_own as _claim_own
from .base import Call, EvalSetError, Score
from .cases import EvalCase, EvalSet, Prices, eval_set_schema
from .evaluators import (
    FunctionCheck,
    JudgeCheck,
    ResponseCheck,
    RunCheck,
    SchemaCheck,
    TrajectoryCheck,
)
from .expect import ExpectedCall, Replay, ToolMock
from .files import MAX_ALIAS_NODES, MAX_NESTING
from .replay import ReplayDiverged, ReplayModel, case_from_events
from .report import CaseReport, EvalReport, RunReport, ScoreSummary
from .run import evaluate, evaluate_sync
from .trajectory import match_trajectory, trajectory_diff

if TYPE_CHECKING:
    from .pytest_items import pytest_cases


def __getattr__(name: str) -> Any:
    if name == "pytest_cases":  # imports pytest: only when asked for
        from .pytest_items import pytest_cases

        _claim(pytest_cases, __name__)
        return pytest_cases
    raise AttributeError(f"module 'loopwright.eval' has no attribute {name!r}")


__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_NESTING",
    "Call",
    "CaseReport",
    "EvalCase",
    "EvalReport",
    "EvalSet",
    "EvalSetError",
    "ExpectedCall",
    "FunctionCheck",
    "JudgeCheck",
    "Prices",
    "Replay",
    "ReplayDiverged",
    "ReplayModel",
    "ResponseCheck",
    "RunCheck",
    "RunReport",
    "SchemaCheck",
    "Score",
    "ScoreSummary",
    "ToolMock",
    "TrajectoryCheck",
    "case_from_events",
    "eval_set_schema",
    "evaluate",
    "evaluate_sync",
    "match_trajectory",
    "pytest_cases",
    "trajectory_diff",
]

_claim_own(__name__)
