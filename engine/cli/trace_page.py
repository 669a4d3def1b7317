"""The trace page: one self-contained HTML file of a run, to open in any browser (no server).

``loopwright trace events.jsonl -o trace.html`` (or :func:`write_trace_page`) writes:

- the agent's diagram, drawn at write time by Graphviz (the same drawing as ``loopwright
  diagram --format svg``), with the run's path on it: the edges the run took are red and
  counted, the states it visited are shaded (``lw-taken`` / ``lw-visited`` classes);
- a timeline: one lane of the stages the run went through, one lane per tool call, each bar as
  long as it took;
- every event of the run in a table; clicking a step (a table row, a timeline bar, an edge of
  the diagram) shows that event in full and marks its edge (or state) on the diagram.

Everything is inline (styles, script, the SVG, the events as JSON): the page fetches nothing
when it is viewed. Without Graphviz the page still has the timeline and the events, with the
mermaid text of the diagram in place of the drawing (the page and ``loopwright trace`` say so).

A text longer than :data:`TEXT_CAP` characters (a model's long answer, a long input) is kept
once on the page, whatever the number of events holding it, and shown cut to that length with
a "show all" control that brings the whole text back.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..data.errors import ConfigurationError
from ..data.inputs import input_text
from ..data.result import RunResult
from ..machines.diagram import Trace, diagram, dot_available, events_of, machine_of_trace, trace_counts
from ..runtime.agent import Agent
from ..table.machine import LoopMachine
from .trace_page_assets import PAGE, SCRIPT, STYLE

TEXT_CAP = 2000
"""Characters of a long text shown until its "show all" control is clicked."""
SUMMARY_CAP = 300
"""The same, for the input, answer and error in the page's header."""
_TEXT_REF = "$lw_text"
"""An event's long string on the page: ``{"$lw_text": n}``, the n-th of the page's texts."""

NO_DRAWING = (
    "no drawing of the machine on the page: Graphviz is not installed here (apt-get install graphviz; "
    "pip install graphviz); the page shows the diagram as mermaid text"
)
"""What the command says when the page has no drawing (the page says so too)."""

_SVG_GROUP = re.compile(r'<g id="(?:node|edge)\d+" class="(node|edge)">\n<title>([^<]*)</title>')


def trace_page(trace: Trace, *, machine: Agent | LoopMachine | None = None, title: str | None = None) -> str:
    """The HTML page of one run: ``trace`` is its RunResult, its events, or a JSON-lines file of
    them; ``machine`` the Agent (or LoopMachine) it ran on (default: the result's machine, or
    the built-in machine that has every edge the run took)."""
    events = events_of(trace)
    if not events:
        raise ConfigurationError("the trace has no events: give a run's RunResult or its events.jsonl")
    loop = _machine(trace, machine, events)
    taken = trace_counts(loop, events)
    first = events[0]
    page_title = title or f"loopwright · {first.agent} · run {first.run_id[:12]}"
    texts: dict[str, int] = {}
    data = [_kept_once(e.model_dump(mode="json"), texts) for e in events]
    summary = _summary(events, texts)
    return PAGE.format(
        title=html.escape(page_title),
        style=STYLE,
        summary=summary,
        drawing=_drawing(loop, events, taken),
        timeline=_timeline(events),
        table=_table(events),
        events=_script_json(data),
        texts=_script_json(list(texts)),
        cap=TEXT_CAP,
        script=SCRIPT,
    )


def _script_json(value: Any) -> str:
    """JSON to put inside a ``<script>`` element (no ``<`` that could end it)."""
    return json.dumps(value).replace("<", "\\u003c")


def _kept_once(value: Any, texts: dict[str, int]) -> Any:
    """An event's JSON data with each string longer than TEXT_CAP replaced by a reference to
    ``texts`` (each text numbered once, in the order found)."""
    if isinstance(value, str):
        return value if len(value) <= TEXT_CAP else {_TEXT_REF: texts.setdefault(value, len(texts))}
    if isinstance(value, dict):
        return {k: _kept_once(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [_kept_once(v, texts) for v in value]
    return value


def write_trace_page(
    trace: Trace,
    path: str | os.PathLike[str],
    *,
    machine: Agent | LoopMachine | None = None,
    title: str | None = None,
) -> Path:
    """Write :func:`trace_page` to ``path`` (folders made as needed); the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(trace_page(trace, machine=machine, title=title), encoding="utf-8")
    return out


def _machine(trace: Trace, given: Agent | LoopMachine | None, events: list[Any]) -> LoopMachine:
    from ..features import machine_for

    if isinstance(given, Agent):
        return machine_for(given)
    if isinstance(given, LoopMachine):
        return given
    if given is not None:
        raise ConfigurationError(f"machine= takes an Agent or a LoopMachine, got {type(given).__name__}")
    if isinstance(trace, RunResult) and trace.machine is not None:
        return trace.machine  # type: ignore[no-any-return]
    return machine_of_trace(events)


# ------------------------------------------------------------ the parts of the page


def _summary(events: list[Any], texts: dict[str, int]) -> str:
    first, last = events[0], events[-1]
    finished = next((e for e in reversed(events) if e.type == "run_finished"), None)
    outcome = finished.outcome if finished is not None else ("suspended" if last.type == "suspended" else "running")
    usage = [e.response.usage for e in events if e.type == "model_responded"]
    tokens = sum(u.total_tokens for u in usage)
    calls = sum(1 for e in events if e.type == "tool_called")
    agents = list(dict.fromkeys(e.agent for e in events))
    cells = [
        ("agent", " → ".join(agents)),
        ("run", first.run_id),
        ("outcome", outcome),
        ("iterations", str(max(e.iteration for e in events))),
        ("model calls", str(sum(1 for e in events if e.type == "model_requested"))),
        ("tool calls", str(calls)),
        ("tokens", str(tokens)),
        ("duration", f"{last.time - first.time:.3f} s"),
        ("events", str(len(events))),
    ]
    if first.type == "run_started":
        cells.insert(0, ("input", input_text(first.input)))
    if finished is not None and finished.output:
        cells.append(("answer", finished.output))
    if finished is not None and finished.error is not None:
        cells.append(("error", finished.error.message))
    return "".join(
        f'<div class="lw-cell" data-key="{k}"><span>{html.escape(k)}</span>{_capped(v, texts)}</div>' for k, v in cells
    )


def _capped(text: str, texts: dict[str, int]) -> str:
    """A summary value: a long one cut to SUMMARY_CAP characters, with its "show all" control."""
    if len(text) <= SUMMARY_CAP:
        return f"<b>{html.escape(text)}</b>"
    n = texts.setdefault(text, len(texts))
    return (
        f"<b>{html.escape(text[:SUMMARY_CAP])}…</b>"
        f'<button class="lw-more" data-text="{n}">show all ({len(text):,} characters)</button>'
    )


def _drawing(machine: LoopMachine, events: list[Any], taken: Counter[Any]) -> str:
    if not dot_available():
        text = diagram(machine, "mermaid", trace=events)
        return (
            '<p class="lw-note">The drawing needs Graphviz when the page is written (apt-get install graphviz; '
            f"pip install graphviz). The diagram as mermaid text:</p><pre>{html.escape(text)}</pre>"
        )
    svg = diagram(machine, "svg", trace=events)
    svg = svg[svg.index("<svg") :]  # inline in HTML: no XML prolog, doctype or comments
    edges = {f"{r.source}->{r.dest}" for r in taken}
    states = {r.source for r in taken} | {r.dest for r in taken}

    def mark(match: re.Match[str]) -> str:
        kind, name = match.group(1), html.unescape(match.group(2))
        hit = (name in edges) if kind == "edge" else (name in states)
        extra = (" lw-taken" if kind == "edge" else " lw-visited") if hit else ""
        attribute = "data-edge" if kind == "edge" else "data-state"
        return match.group(0).replace(
            f'class="{kind}">', f'class="{kind}{extra}" {attribute}="{html.escape(name)}">', 1
        )

    return _SVG_GROUP.sub(mark, svg)


def _timeline(events: list[Any]) -> str:
    start, end = events[0].time, events[-1].time
    span = max(end - start, 1e-9)

    def bar(seq: int, t0: float, t1: float, label: str, cls: str) -> str:
        left = (t0 - start) / span * 100
        width = max((t1 - t0) / span * 100, 0.4)
        return (
            f'<div class="lw-bar lw-step {cls}" data-seq="{seq}" title="{html.escape(label)} · {t1 - t0:.4f} s" '
            f'style="left:{left:.3f}%;width:{min(width, 100 - left):.3f}%">{html.escape(label)}</div>'
        )

    entered = [e for e in events if e.type == "state_entered"]
    stages = []
    for i, e in enumerate(entered):
        t1 = entered[i + 1].time if i + 1 < len(entered) else end
        stages.append(bar(e.seq, e.time, t1, e.state, f"lw-stage lw-s-{e.state}"))
    answered = {e.call_id: e for e in events if e.type == "tool_answered"}
    tools = []
    for e in events:
        if e.type == "tool_called":
            done = answered.get(e.call_id)
            t1 = done.time if done is not None else end
            status = "lw-error" if done is not None and done.is_error else "lw-ok" if done else "lw-open"
            tools.append(
                '<div class="lw-lane">'
                f'<div class="lw-lane-name">{html.escape(e.name)}</div>'
                f'<div class="lw-track">{bar(e.seq, e.time, t1, e.name, f"lw-tool {status}")}</div></div>'
            )
    lanes = [
        '<div class="lw-lane"><div class="lw-lane-name">stages</div>'
        f'<div class="lw-track">{"".join(stages)}</div></div>',
        *tools,
    ]
    return "".join(lanes)


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


def _what(e: Any) -> str:
    describe = _WHAT.get(e.type)
    return str(describe(e)) if describe is not None else ""


def _table(events: list[Any]) -> str:
    start = events[0].time
    rows = []
    for e in events:
        edge = f"{e.source}->{e.state}" if e.type == "state_entered" else ""
        what = _what(e)
        rows.append(
            f'<tr class="lw-step lw-t-{e.type}" data-seq="{e.seq}" data-state="{html.escape(e.state)}" '
            f'data-edge="{html.escape(edge)}"><td>{e.seq}</td><td>{e.time - start:.4f}</td>'
            f"<td>{html.escape(e.agent)}</td><td>{e.iteration}</td><td>{html.escape(e.type)}</td>"
            f"<td>{html.escape(what[:240])}</td></tr>"
        )
    return "".join(rows)


# ------------------------------------------------------------ `loopwright trace`


def add_command(sub: Any) -> None:
    """Register ``loopwright trace`` on the CLI's subparsers."""
    command = sub.add_parser("trace", help="write a run's trace page: one self-contained HTML file")
    command.add_argument(
        "events", help="the run's events as JSON lines (`loopwright run --json`), - for stdin; with --store, a run id"
    )
    command.add_argument("--store", metavar="URL", default=None, help="read run EVENTS's events from this store")
    command.add_argument("-o", "--output", default="trace.html", help="the page to write (default: trace.html)")
    command.add_argument("--agent", dest="target", default=None, help="module:attr of the Agent the run used")
    command.set_defaults(handler=run_command)


def run_command(args: Any) -> int:
    """``loopwright trace EVENTS [-o trace.html] [--agent module:attr]``: 0 written, 2 bad input."""
    import sys

    from ..machines.diagram import load_trace, machine_for_target

    try:
        machine = machine_for_target(args.target)
        events = load_trace(args.events) if args.store is None else _stored_events(args.store, args.events)
        path = write_trace_page(events, args.output, machine=machine)
    except (LookupError, ConfigurationError) as exc:
        print(f"loopwright trace: {exc.args[0]}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    if not dot_available():
        print(f"loopwright trace: note: {NO_DRAWING}", file=sys.stderr)
    return 0


def _stored_events(url: str, run_id: str) -> list[Any]:
    """Every event a store kept of run ``run_id`` (all its legs), in order."""
    import asyncio

    from ..data.events import EVENT_ADAPTER
    from .runs_cli import open_cli_store

    async def read() -> list[bytes]:
        store = await open_cli_store(url, read_only=True)
        try:
            return await store.events(run_id)
        finally:
            await store.close()

    raw = asyncio.run(read())
    if not raw:
        raise LookupError(f"no events of run {run_id!r} in {url}; `loopwright runs list --store {url}` lists the runs")
    return [EVENT_ADAPTER.validate_json(line) for line in raw]


__all__ = ["add_command", "run_command", "trace_page", "write_trace_page"]
