"""The trace page: one self-contained HTML file of a run, to open in any browser (no server).

``loopwright trace events.jsonl -o trace.html`` (or :func:`write_trace_page`) writes:

- the agent's diagram, drawn at write time (the same drawing as ``loopwright diagram --format
  svg``: Graphviz's where it is installed, else drawn in pure Python), with the run's path on
  it: the edges the run took are red and counted, the states it visited are shaded
  (``lw-taken`` / ``lw-visited`` classes);
- a timeline: one lane of the stages the run went through, one lane per tool call, each bar as
  long as it took;
- every event of the run in a table; clicking a step (a table row, a timeline bar, an edge of
  the diagram) shows that event in full and marks its edge (or state) on the diagram;
- for a workflow's run, each child run (a step, a branch, a round of a loop, an item of a map)
  as a panel of its own, reached from the workflow's state that ran it (clicking the state, the
  child's lane of the timeline, or the link in the workflow's events): the child's summary,
  its machine with its own path, its timeline and its events, and its own children's panels
  inside it (a workflow within a workflow). A child that failed, and each run it sits in, is
  open when the page opens, its error selected: which child failed, where in its loop, why.
  The children are read from the run's store (``loopwright trace RUN_ID --store URL --agent
  module:workflow``, or ``children=`` from :func:`stored_children`), or kept as they run by
  :func:`recording` (no store needed).

Everything is inline (styles, script, the SVG, the events as JSON): the page fetches nothing
when it is viewed, and writing it needs no system program.

A text longer than :data:`TEXT_CAP` characters (a model's long answer, a long input) is kept
once on the page, whatever the number of events holding it, and shown cut to that length with
a "show all" control that brings the whole text back.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from itertools import count
from pathlib import Path
from typing import Any

from ..data.errors import ConfigurationError
from ..data.result import RunResult
from ..machines.diagram import Trace, events_of, machine_of_trace, trace_counts
from ..runtime.agent import Agent
from ..table.machine import LoopMachine
from . import trace_children as kids_of
from .trace_children import recording, stored_children
from .trace_page_assets import PAGE, SCRIPT, STYLE
from .trace_parts import SUMMARY_CAP, TABLE_HEAD, TEXT_CAP, drawing, kept_once, summary_cells, table, timeline


def trace_page(
    trace: Trace,
    *,
    machine: Agent | LoopMachine | None = None,
    title: str | None = None,
    children: Mapping[str, Sequence[Any]] | None = None,
) -> str:
    """The HTML page of one run: ``trace`` is its RunResult, its events, or a JSON-lines file of
    them; ``machine`` the Agent (or LoopMachine) it ran on (default: the result's machine, or
    the built-in machine that has every edge the run took). For a workflow's run,
    ``children`` holds the events of the runs under it, by run id (:func:`stored_children`
    reads them from the run's store): each child's loop is drawn inside the state that ran it."""
    events = events_of(trace)
    if not events:
        raise ConfigurationError("the trace has no events: give a run's RunResult or its events.jsonl")
    loop = _machine(trace, machine, events)
    taken = trace_counts(loop, events)
    first = events[0]
    page_title = title or f"loopwright · {first.agent} · run {first.run_id[:12]}"
    texts: dict[str, int] = {}
    data = [kept_once(e.model_dump(mode="json"), texts) for e in events]
    tree = kids_of.child_runs(loop, events, children) if children is not None else []
    page = kids_of.Page(texts, {})
    views = count(1)
    section = kids_of.children_section(tree, page, lambda: f"v{next(views)}-")
    if children is None and kids_of.composites_of(loop):
        section = (
            f'<section class="lw-wide lw-children"><p class="lw-note">{html.escape(kids_of.NO_CHILDREN)}</p></section>'
        )
    every = [c for kid in tree for c in kid.walk()]
    extra = []
    if every:
        bad = [c for c in every if c.outcome in kids_of.NOT_ANSWERED]
        said = ", ".join(f"{c.run_id} ({kids_of.verdict(c.events)})" for c in bad)
        extra.append(("child runs", f"{len(every)}" + (f"; did not answer: {said}" if bad else "")))
    return PAGE.format(
        title=html.escape(page_title),
        style=STYLE,
        run=html.escape(first.run_id),
        summary=summary_cells(events, texts, extra),
        drawing=drawing(loop, events, taken, kids_of.state_marks(tree)),
        timeline=timeline(events, kids_of.run_lanes(events, tree)),
        head=TABLE_HEAD,
        table=table(events, kids_of.run_links(tree)),
        children=section,
        events=_script_json(data),
        runs=_script_json(page.runs),
        texts=_script_json(list(texts)),
        cap=TEXT_CAP,
        script=SCRIPT,
    )


def _script_json(value: Any) -> str:
    """JSON to put inside a ``<script>`` element (no ``<`` that could end it)."""
    return json.dumps(value).replace("<", "\\u003c")


def write_trace_page(
    trace: Trace,
    path: str | os.PathLike[str],
    *,
    machine: Agent | LoopMachine | None = None,
    title: str | None = None,
    children: Mapping[str, Sequence[Any]] | None = None,
) -> Path:
    """Write :func:`trace_page` to ``path`` (folders made as needed); the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(trace_page(trace, machine=machine, title=title, children=children), encoding="utf-8")
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


# ------------------------------------------------------------ `loopwright trace`


def add_command(sub: Any) -> None:
    """Register ``loopwright trace`` on the CLI's subparsers."""
    command = sub.add_parser("trace", help="write a run's trace page: one self-contained HTML file")
    command.add_argument(
        "events",
        help="the run's events as JSON lines (`loopwright run --json`), - for stdin; with --store, a run id "
        "(a run on Temporal: `loopwright trace RUN_ID --temporal HOST:PORT`)",
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
        if args.store is None:
            events, children = load_trace(args.events), None
        else:
            events, children = _stored(args.store, args.events, machine)
        path = write_trace_page(events, args.output, machine=machine, children=children)
    except (LookupError, ConfigurationError) as exc:
        print(f"loopwright trace: {exc.args[0]}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _stored(url: str, run_id: str, machine: LoopMachine | None) -> tuple[list[Any], dict[str, list[Any]] | None]:
    """Every event a store kept of run ``run_id`` (all its legs), in order; and, for a workflow's
    run (``machine`` a workflow's), every run under it."""
    import asyncio

    from ..data.events import EVENT_ADAPTER
    from .runs_cli import open_cli_store

    async def read() -> tuple[list[bytes], dict[str, list[Any]] | None]:
        store = await open_cli_store(url, read_only=True)
        try:
            raw = await store.events(run_id)
            workflow = raw and machine is not None and kids_of.composites_of(machine)
            return raw, (await stored_children(store, run_id, machine) if workflow else None)  # type: ignore[arg-type]
        finally:
            await store.close()

    raw, children = asyncio.run(read())
    if not raw:
        raise LookupError(f"no events of run {run_id!r} in {url}; `loopwright runs list --store {url}` lists the runs")
    return [EVENT_ADAPTER.validate_json(line) for line in raw], children


__all__ = [
    "SUMMARY_CAP",
    "TEXT_CAP",
    "add_command",
    "recording",
    "run_command",
    "stored_children",
    "trace_page",
    "write_trace_page",
]
