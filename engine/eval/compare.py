"""Two reports of one set side by side: which cases got better, worse, stayed the same, or
appear in only one (``loopwright eval compare a.json b.json``)."""

from __future__ import annotations

import statistics
from typing import Literal, NamedTuple

from .report import CaseReport, EvalReport

Change = Literal["better", "worse", "same", "new", "gone"]


class Compared(NamedTuple):
    case: str
    change: Change
    detail: str


def _mean(case: CaseReport) -> float | None:
    values = [s.mean for s in case.scores if s.mean is not None]
    return statistics.fmean(values) if values else None


def _key(case: CaseReport) -> tuple[float, float]:
    mean = _mean(case)
    return case.pass_rate, -1.0 if mean is None else mean


def compare(before: EvalReport, after: EvalReport) -> list[Compared]:
    """Each case of either report: better or worse by pass rate, then by mean score."""
    a = {c.name: c for c in before.cases}
    b = {c.name: c for c in after.cases}
    out: list[Compared] = []
    for name in [*a, *(n for n in b if n not in a)]:
        if name not in b:
            out.append(Compared(name, "gone", "only in the first report"))
            continue
        if name not in a:
            out.append(Compared(name, "new", f"pass rate {b[name].pass_rate:.0%}"))
            continue
        ka, kb = _key(a[name]), _key(b[name])
        change: Change = "better" if kb > ka else "worse" if kb < ka else "same"
        detail = f"pass rate {ka[0]:.0%} -> {kb[0]:.0%}, mean score {_fmt(_mean(a[name]))} -> {_fmt(_mean(b[name]))}"
        out.append(Compared(name, change, detail))
    return out


def _fmt(value: float | None) -> str:
    return "n/j" if value is None else f"{value:.2f}"


__all__ = ["Compared", "compare"]
