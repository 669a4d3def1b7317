"""Eval cases as pytest tests: ``test_trip = pytest_cases("evals/trip.yaml", agent=agent)`` in a
test module makes one test per case (``test_trip[case-name]``), with pytest's own reporting; a
failing case shows each failed evaluator's reason and the trajectory diff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..machines.verify import load_target
from ..models.base import Model
from ..runtime.agent import Agent
from .cases import EvalCase, EvalSet
from .mocking import check_fits
from .report import NO_CHECKS, RunReport
from .run import evaluate


def failure_text(run: RunReport) -> str:
    """Why a run of a case did not pass: its failed scores, its error, its trajectory diff."""
    lines = [f"eval case {run.case!r} (repeat {run.repeat + 1}) {run.status.replace('_', ' ')}: outcome {run.outcome}"]
    lines += [f"  {s.evaluator}: {s.reason or 'failed'}" for s in run.scores if s.passed is not True]
    if run.status == "no_checks":
        lines.append(f"  {NO_CHECKS}")
    if run.error:
        lines.append(f"  error: {run.error}")
    if run.diff:
        lines.append("  trajectory (- expected, not made; + made, not expected):")
        lines += [f"    {line}" for line in run.diff]
    lines.append(f"  answer: {run.output[:500]!r}")
    return "\n".join(lines)


def _agent(agent: Agent | str | Callable[[], Agent]) -> Agent:
    found: Any = load_target(agent) if isinstance(agent, str) else agent
    if not isinstance(found, Agent) and callable(found):
        found = found()
    if not isinstance(found, Agent):
        raise TypeError(f"pytest_cases needs an Agent (or module:attr naming one); got {type(found).__name__}")
    return found


def pytest_cases(
    eval_set: EvalSet | str | Path,
    *,
    agent: Agent | str | Callable[[], Agent],
    judge: Model | None = None,
    repeats: int = 1,
    evaluators: Sequence[Any] = (),
    replay: bool = True,
) -> Callable[[EvalCase], None]:
    """A test function parametrized over the cases of ``eval_set``; assign it to a ``test_``
    name in a test module. The set is checked against the agent when the module is collected
    (a tool the agent lacks is a collection error naming the agent's tools)."""
    import pytest

    loaded = eval_set if isinstance(eval_set, EvalSet) else EvalSet.load(eval_set)
    the_agent = _agent(agent)
    check_fits(the_agent, loaded)

    @pytest.mark.parametrize("eval_case", loaded.cases, ids=[c.name for c in loaded.cases])
    def test_eval_case(eval_case: EvalCase) -> None:
        one = loaded.model_copy(update={"cases": [eval_case]})
        report = asyncio.run(
            evaluate(the_agent, one, repeats=repeats, judge=judge, evaluators=evaluators, replay=replay, progress=False)
        )
        failed = [run for run in report.cases[0].runs if run.status != "passed"]
        if failed:
            pytest.fail(failure_text(failed[0]), pytrace=False)

    return test_eval_case


__all__ = ["failure_text", "pytest_cases"]
