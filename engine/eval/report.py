"""The report of an eval: per run, per case and per evaluator, with every run's events kept.

:class:`EvalReport` round-trips through JSON (``report.save("a.json")``,
``EvalReport.load("a.json")``), which is what ``loopwright eval compare`` reads.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..data.events import Event
from .base import Score

Status = Literal["passed", "failed", "not_judged", "no_checks"]
"""A run's verdict: ``no_checks`` when no check applied to its case (nothing could fail): such
a run never counts as passed."""

NO_CHECKS = (
    "no checks: nothing the case gives can fail; give it expected_calls, expected_response, a rubric "
    "or evaluators (a run that checks nothing never passes)"
)


class RunReport(BaseModel):
    """One run of one case (one repeat): its scores, its trajectory against the expected one
    (``diff``: ``  `` matched, ``-`` expected and missing, ``+`` made and not expected), its
    tokens and cost, and its events."""

    model_config = ConfigDict(extra="forbid")
    case: str
    repeat: int
    status: Status
    run_ids: list[str]
    outcome: str | None
    output: str
    error: str | None = None
    scores: list[Score]
    calls: list[str]
    diff: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    events: list[Event] = Field(default_factory=list, repr=False)


class ScoreSummary(BaseModel):
    """One evaluator over the repeats of one case: mean and spread (population standard
    deviation) of the judged values, pass rate over the judged runs, and how many were not
    judged."""

    model_config = ConfigDict(extra="forbid")
    evaluator: str
    mean: float | None
    spread: float | None
    pass_rate: float | None
    runs: int
    not_judged: int


class CaseReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    tags: list[str] = Field(default_factory=list)
    runs: list[RunReport]
    scores: list[ScoreSummary]
    pass_rate: float

    @property
    def passed(self) -> bool:
        return all(r.status == "passed" for r in self.runs)

    @property
    def unchecked(self) -> bool:
        """Every run of the case checked nothing (``no_checks``)."""
        return all(r.status == "no_checks" for r in self.runs)


class EvalReport(BaseModel):
    """The whole eval: the set's ``pass_rate`` (runs passed over all runs) against its
    ``threshold``; ``passed`` when it is reached."""

    model_config = ConfigDict(extra="forbid")
    set_name: str
    agent: str
    repeats: int
    threshold: float
    cases: list[CaseReport]
    pass_rate: float
    passed: bool
    total_tokens: int
    cost_usd: float | None
    duration_s: float

    def save(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    def case(self, name: str) -> CaseReport:
        return next(c for c in self.cases if c.name == name)

    def summary(self) -> str:
        """A plain-text table: one line per case, the failures' reasons and diffs, the total."""
        width = max([len(c.name) for c in self.cases] + [4])
        lines = [f"eval {self.set_name} on {self.agent}: {len(self.cases)} cases × {self.repeats} repeats"]
        for c in self.cases:
            mark = "PASS" if c.passed else "NO CHECKS" if c.unchecked else "FAIL"
            scores = "  ".join(f"{s.evaluator}={_num(s.mean)}" for s in c.scores)
            lines.append(f"  {mark}  {c.name:<{width}}  {c.pass_rate:>4.0%}  {scores}")
            for run in c.runs:
                if run.status == "passed":
                    continue
                if run.status == "no_checks":
                    lines.append(f"        {NO_CHECKS}")
                for s in run.scores:
                    if s.passed is not True:
                        lines.append(f"        {s.evaluator}: {s.reason or 'failed'}")
                if run.error:
                    lines.append(f"        error: {run.error}")
                if run.diff and any(line[:1] in "+-" for line in run.diff):
                    lines += [f"        {line}" for line in run.diff]
                break  # the first failing repeat shows why
        cost = f", {self.cost_usd:.4f} USD" if self.cost_usd is not None else ""
        verdict = "passed" if self.passed else "MISSED the threshold"
        lines.append(
            f"pass rate {self.pass_rate:.0%} (threshold {self.threshold:.0%}): {verdict}; "
            f"{self.total_tokens} tokens{cost}, {self.duration_s:.2f} s"
        )
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/j" if value is None else f"{value:.2f}"


def summarise(name: str, scores: list[Score]) -> ScoreSummary:
    judged = [s for s in scores if s.passed is not None and s.value is not None]
    values = [s.value for s in judged if s.value is not None]
    return ScoreSummary(
        evaluator=name,
        mean=statistics.fmean(values) if values else None,
        spread=statistics.pstdev(values) if values else None,
        pass_rate=sum(1 for s in judged if s.passed) / len(judged) if judged else None,
        runs=len(scores),
        not_judged=len(scores) - len(judged),
    )


__all__ = ["NO_CHECKS", "CaseReport", "EvalReport", "RunReport", "ScoreSummary", "Status", "summarise"]
