"""The eval report as one self-contained HTML file: the totals, a table of the cases (pass rate,
each evaluator's mean and spread, tokens, cost), and under each case its runs: the scores with
their reasons (a judge's reasoning too), the trajectory diffed against the expected one, the
answer, and a link to the run's trace page when one was written (``loopwright eval run -o``).
Nothing is fetched when it is viewed: the styles are inline and the page has no script."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

from .report import NO_CHECKS, CaseReport, EvalReport, RunReport

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d232b}
h1{font-size:20px;margin:0 0 4px} .sub{color:#5b6571;margin-bottom:16px}
table{border-collapse:collapse;width:100%;margin:8px 0}
th,td{border-bottom:1px solid #e3e6ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f7f9;font-weight:600}
.passed{color:#11763a;font-weight:600} .failed{color:#b3261e;font-weight:600} .not_judged{color:#8a5a00;font-weight:600}
.no_checks{color:#8a5a00;font-weight:600}
.verdict{padding:6px 10px;border-radius:6px;display:inline-block;margin:6px 0}
.verdict.passed{background:#e6f4ea} .verdict.failed{background:#fce8e6}
details{margin:4px 0 12px 0} summary{cursor:pointer}
pre.diff{background:#f6f8fa;padding:6px 10px;margin:4px 0;border-radius:4px}
.diff .match{color:#1d232b} .diff .missing{color:#b3261e;background:#fdecea}
.diff .extra{color:#0b5cad;background:#e8f0fe}
.answer{white-space:pre-wrap;background:#fafafa;padding:6px;border-left:3px solid #d0d7de}
.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(value: float | None, digits: int = 2) -> str:
    return "n/j" if value is None else f"{value:.{digits}f}"


def _diff(lines: list[str]) -> str:
    if not lines:
        return ""
    kinds = {"-": "missing", "+": "extra"}
    rows = "".join(f'<span class="{kinds.get(line[:1], "match")}">{_e(line)}</span>\n' for line in lines)
    return f'<pre class="diff" data-diff>{rows}</pre>'


def _run(run: RunReport, links: Mapping[str, str]) -> str:
    scores = "".join(
        f"<tr><td>{_e(s.evaluator)}</td><td class='{_status(s.passed)}'>{_status(s.passed).replace('_', ' ')}</td>"
        f"<td class='num'>{_num(s.value)}</td><td>{_e(s.reason)}</td></tr>"
        for s in run.scores
    )
    traces = " ".join(
        f'<a class="trace-link" href="{_e(links[rid])}">trace of run {_e(rid[:12])}</a>'
        for rid in run.run_ids
        if rid in links
    )
    error = f"<p class='failed'>error: {_e(run.error)}</p>" if run.error else ""
    if run.status == "no_checks":
        error += f"<p class='no_checks'>{_e(NO_CHECKS)}</p>"
    return (
        f'<div class="run" data-run="{run.repeat}"><p><b>repeat {run.repeat + 1}</b>: '
        f"<span class='{run.status}'>{run.status.replace('_', ' ')}</span>, outcome {_e(run.outcome)}, "
        f"{run.total_tokens} tokens, {run.duration_s:.2f} s {traces}</p>{error}"
        f"<table><tr><th>evaluator</th><th>verdict</th><th>score</th><th>why</th></tr>{scores}</table>"
        f"{_diff(run.diff)}<div class='answer'>{_e(run.output)}</div></div>"
    )


def _status(passed: bool | None) -> str:
    return "not_judged" if passed is None else "passed" if passed else "failed"


def _case_status(case: CaseReport) -> str:
    return "passed" if case.passed else "no_checks" if case.unchecked else "failed"


def _case_row(case: CaseReport) -> str:
    status = _case_status(case)
    scores = "<br>".join(f"{_e(s.evaluator)}: {_num(s.mean)} ± {_num(s.spread)}" for s in case.scores)
    tokens = sum(r.total_tokens for r in case.runs)
    costs = [r.cost_usd for r in case.runs if r.cost_usd is not None]
    cost = f"{sum(costs):.4f}" if costs else "–"
    return (
        f'<tr class="case" data-case="{_e(case.name)}"><td><a href="#case-{_e(case.name)}">{_e(case.name)}</a></td>'
        f"<td class='{status}'>{status.replace('_', ' ')}</td>"
        f"<td class='num'>{case.pass_rate:.0%}</td><td>{scores}</td>"
        f"<td class='num'>{tokens}</td><td class='num'>{cost}</td><td>{_e(', '.join(case.tags))}</td></tr>"
    )


def report_html(report: EvalReport, trace_links: Mapping[str, str] | None = None) -> str:
    """The page of ``report``; ``trace_links`` maps run ids to their trace pages' addresses."""
    links = trace_links or {}
    verdict = "passed" if report.passed else "failed"
    rows = "".join(_case_row(c) for c in report.cases)
    sections = "".join(
        f'<details id="case-{_e(c.name)}" {"" if c.passed else "open"}><summary><b>{_e(c.name)}</b> — '
        f"<span class='{_case_status(c)}'>{c.pass_rate:.0%} passed</span></summary>"
        + "".join(_run(r, links) for r in c.runs)
        + "</details>"
        for c in report.cases
    )
    cost = f", {report.cost_usd:.4f} USD" if report.cost_usd is not None else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>eval {_e(report.set_name)}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>eval {_e(report.set_name)} · {_e(report.agent)}</h1>"
        f"<div class='sub'>{len(report.cases)} cases × {report.repeats} repeats, {report.total_tokens} tokens{cost}, "
        f"{report.duration_s:.2f} s</div>"
        f"<div class='verdict {verdict}' id='verdict'>pass rate {report.pass_rate:.0%} "
        f"(threshold {report.threshold:.0%}): {verdict}</div>"
        "<table id='cases'><tr><th>case</th><th>verdict</th><th>pass rate</th><th>scores (mean ± spread)</th>"
        f"<th>tokens</th><th>cost (USD)</th><th>tags</th></tr>{rows}</table>{sections}</body></html>"
    )


def write_report_html(report: EvalReport, path: str | Path, trace_links: Mapping[str, str] | None = None) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report_html(report, trace_links), encoding="utf-8")
    return out


__all__ = ["report_html", "write_report_html"]
