"""The parts of one run's view on the trace page: its summary, its machine drawn with its path,
its timeline and its events table (the page draws one view per run: the run, and each child
run of a workflow inside the state that ran it, :mod:`loopwright.cli.trace_children`).

A text longer than :data:`TEXT_CAP` characters is kept once on the page (:func:`kept_once`),
whatever the number of events and runs holding it."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..data.inputs import input_text
from ..machines.diagram import diagram
from ..table.machine import LoopMachine

TEXT_CAP = 2000
"""Characters of a long text shown until its "show all" control is clicked."""
SUMMARY_CAP = 300
"""The same, for the input, answer and error in the page's header."""
_TEXT_REF = "$lw_text"
"""An event's long string on the page: ``{"$lw_text": n}``, the n-th of the page's texts."""
_SVG_GROUP = re.compile(r'<g id="(?:node|edge)\d+" class="(node|edge)">\n<title>([^<]*)</title>')
_SVG_ID = re.compile(r' id="((?:graph|node|edge|a_)[^"]*)"')


def kept_once(value: Any, texts: dict[str, int]) -> Any:
    """An event's JSON data with each string longer than TEXT_CAP replaced by a reference to
    ``texts`` (each text numbered once, in the order found)."""
    if isinstance(value, str):
        return value if len(value) <= TEXT_CAP else {_TEXT_REF: texts.setdefault(value, len(texts))}
    if isinstance(value, dict):
        return {k: kept_once(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [kept_once(v, texts) for v in value]
    return value


def outcome_of(events: Sequence[Any]) -> str:
    """How the run stands at its last event: its outcome, ``suspended`` or ``running``."""
    finished = next((e for e in reversed(events) if e.type == "run_finished"), None)
    if finished is not None:
        return str(finished.outcome)
    return "suspended" if events and events[-1].type == "suspended" else "running"


def summary_cells(events: list[Any], texts: dict[str, int], extra: Sequence[tuple[str, str]] = ()) -> str:
    """The run's summary: input, agent, run id, outcome, counts, duration, answer, error."""
    first, last = events[0], events[-1]
    finished = next((e for e in reversed(events) if e.type == "run_finished"), None)
    usage = [e.response.usage for e in events if e.type == "model_responded"]
    cells = [
        ("agent", " → ".join(dict.fromkeys(e.agent for e in events))),
        ("run", first.run_id),
        ("outcome", outcome_of(events)),
        ("iterations", str(max(e.iteration for e in events))),
        ("model calls", str(sum(1 for e in events if e.type == "model_requested"))),
        ("tool calls", str(sum(1 for e in events if e.type == "tool_called"))),
        ("tokens", str(sum(u.total_tokens for u in usage))),
        ("duration", f"{last.time - first.time:.3f} s"),
        ("events", str(len(events))),
        *extra,
    ]
    if first.type == "run_started":
        cells.insert(0, ("input", input_text(first.input)))
    if finished is not None and finished.output:
        cells.append(("answer", finished.output))
    if finished is not None and finished.error is not None:
        cells.append(("error", finished.error.message))
    return "".join(
        f'<div class="lw-cell" data-key="{k}"><span>{html.escape(k)}</span>{capped(v, texts)}</div>' for k, v in cells
    )


def capped(text: str, texts: dict[str, int]) -> str:
    """A summary value: a long one cut to SUMMARY_CAP characters, with its "show all" control."""
    if len(text) <= SUMMARY_CAP:
        return f"<b>{html.escape(text)}</b>"
    n = texts.setdefault(text, len(texts))
    return (
        f"<b>{html.escape(text[:SUMMARY_CAP])}…</b>"
        f'<button class="lw-more" data-text="{n}">show all ({len(text):,} characters)</button>'
    )


def drawing(
    machine: LoopMachine,
    events: list[Any],
    taken: Counter[Any],
    marks: Mapping[str, str],
    view: str = "",
    drawn: dict[Any, str] | None = None,
) -> str:
    """The machine drawn (by Graphviz where it is installed, else in pure Python) with the run's
    path on it (``lw-taken`` edges, ``lw-visited`` states; ``marks``: more classes of some
    states). ``view`` prefixes the drawing's element ids (several drawings on one page);
    ``drawn`` keeps each drawing by machine and path, so runs that took the same path (a map's
    items) are drawn once."""
    key = (id(machine), frozenset(taken.items()))
    svg = drawn.get(key) if drawn is not None else None
    if svg is None:
        svg = diagram(machine, "svg", trace=events)
        if drawn is not None:
            drawn[key] = svg
    svg = svg[svg.index("<svg") :]  # inline in HTML: no XML prolog, doctype or comments
    edges = {f"{r.source}->{r.dest}" for r in taken}
    states = {r.source for r in taken} | {r.dest for r in taken}

    def mark(match: re.Match[str]) -> str:
        kind, name = match.group(1), html.unescape(match.group(2))
        hit = (name in edges) if kind == "edge" else (name in states)
        extra = (" lw-taken" if kind == "edge" else " lw-visited") if hit else ""
        if kind == "node" and name in marks:
            extra += f" {marks[name]}"
        attribute = "data-edge" if kind == "edge" else "data-state"
        return match.group(0).replace(
            f'class="{kind}">', f'class="{kind}{extra}" {attribute}="{html.escape(name)}">', 1
        )

    svg = _SVG_GROUP.sub(mark, svg)
    return _SVG_ID.sub(lambda m: f' id="{view}{m.group(1)}"', svg) if view else svg


def bar(start: float, span: float, t0: float, t1: float, label: str, cls: str, attrs: str) -> str:
    """A bar of the timeline from ``t0`` to ``t1`` (the run spans ``start`` + ``span``)."""
    left = (t0 - start) / span * 100
    width = max((t1 - t0) / span * 100, 0.4)
    return (
        f'<div class="lw-bar {cls}" {attrs} title="{html.escape(label)} · {t1 - t0:.4f} s" '
        f'style="left:{left:.3f}%;width:{min(width, 100 - left):.3f}%">{html.escape(label)}</div>'
    )


def lane(name: str, bars: str) -> str:
    return (
        f'<div class="lw-lane"><div class="lw-lane-name" title="{html.escape(name)}">{html.escape(name)}</div>'
        f'<div class="lw-track">{bars}</div></div>'
    )


def timeline(events: list[Any], more: Sequence[tuple[str, str]] = ()) -> str:
    """A lane of the stages the run went through, one lane per tool call (and ``more`` lanes:
    name and the HTML of their bars), each bar as long as it took."""
    start, end = events[0].time, events[-1].time
    span = max(end - start, 1e-9)

    def step(seq: int, t0: float, t1: float, label: str, cls: str) -> str:
        return bar(start, span, t0, t1, label, f"lw-step {cls}", f'data-seq="{seq}"')

    entered = [e for e in events if e.type == "state_entered"]
    stages = []
    for i, e in enumerate(entered):
        t1 = entered[i + 1].time if i + 1 < len(entered) else end
        stages.append(step(e.seq, e.time, t1, e.state, f"lw-stage lw-s-{e.state}"))
    answered = {e.call_id: e for e in events if e.type == "tool_answered"}
    tools = []
    for e in events:
        if e.type == "tool_called":
            done = answered.get(e.call_id)
            t1 = done.time if done is not None else end
            status = "lw-error" if done is not None and done.is_error else "lw-ok" if done else "lw-open"
            tools.append(lane(e.name, step(e.seq, e.time, t1, e.name, f"lw-tool {status}")))
    return "".join([lane("stages", "".join(stages)), *tools, *(lane(n, b) for n, b in more)])


def _responded(e: Any) -> str:
    calls = ", ".join(c.name for c in e.response.tool_calls)
    said = f"calls {calls}" if calls else f"text: {e.response.text}"
    return f"{said} ({e.response.usage.total_tokens} tokens)"


def _answered(e: Any) -> str:
    return f"{e.name} → {'error: ' if e.is_error else ''}{json.dumps(e.content)} ({e.duration_s:.4f} s)"


_WHAT: dict[str, Any] = {
    "run_started": lambda e: f"input: {input_text(e.input)}",
    "state_entered": lambda e: f"{e.source} → {e.state} ({e.guard})",
    "model_requested": lambda e: (
        f"attempt {e.attempt}, {e.message_count} messages, tools: {', '.join(e.tool_names) or 'none'}"
    ),
    "model_responded": _responded,
    "tool_called": lambda e: f"{e.name}({', '.join(f'{k}={v!r}' for k, v in e.args.items())})",
    "tool_answered": _answered,
    "transferred": lambda e: f"{e.from_agent} → {e.to_agent}: {e.task}",
    "limit_reached": lambda e: f"{e.limit}: {e.used:g} of {e.value:g}",
    "error_occurred": lambda e: f"{e.error.kind}: {e.error.message}",
    "run_finished": lambda e: f"{e.outcome}: {e.output or (e.error.message if e.error else '')}",
    "suspended": lambda e: ", ".join(f"{p.kind} for {p.tool}" for p in e.pending),
    "resumed": lambda e: f"decided: {', '.join(e.decided) or 'none'}{' (timed out)' if e.timed_out else ''}",
    "text_delta": lambda e: e.text,
}
"""One line about an event, by its type."""


def what(e: Any) -> str:
    describe = _WHAT.get(e.type)
    return str(describe(e)) if describe is not None else ""


def table(events: list[Any], links: Mapping[int, str]) -> str:
    """Every event, a row each (``links``: HTML after the line of some events, by seq)."""
    start = events[0].time
    rows = []
    for e in events:
        edge = f"{e.source}->{e.state}" if e.type == "state_entered" else ""
        rows.append(
            f'<tr class="lw-step lw-t-{e.type}" data-seq="{e.seq}" data-state="{html.escape(e.state)}" '
            f'data-edge="{html.escape(edge)}"><td>{e.seq}</td><td>{e.time - start:.4f}</td>'
            f"<td>{html.escape(e.agent)}</td><td>{e.iteration}</td><td>{html.escape(e.type)}</td>"
            f"<td>{html.escape(what(e)[:240])}{links.get(e.seq, '')}</td></tr>"
        )
    return "".join(rows)


TABLE_HEAD = "<thead><tr><th>seq</th><th>t (s)</th><th>agent</th><th>iter</th><th>event</th><th>what</th></tr></thead>"
