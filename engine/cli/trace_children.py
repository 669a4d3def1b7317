"""A workflow run's children on its trace page: which runs each state ran, read from a store, and
each drawn as a panel with its own loop inside the state that ran it.

Which runs a workflow run had, and reading them from a store, is
:mod:`loopwright.workflows.stored` (:func:`slots`, :func:`stored_children`: the dev UI's
server reads them too); :func:`recording` keeps them as they run (no store);
:func:`child_runs` makes the tree the page draws (a map's items by number: one that never
started, before the last kept, is a panel that says so); :func:`children_section` draws it: a
panel per child (``<details>``), open when it or a run inside it failed, holding the child's
summary, its machine with its path, its timeline, its events and its own children's panels.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import ConfigurationError
from ..machines.diagram import machine_of_trace, trace_counts
from ..table.machine import LoopMachine
from ..workflows.stored import Slot, numbered_items, slots
from ..workflows.stored import composites_of as composites_of  # (their old place: kept for existing imports)
from ..workflows.stored import item_ids as item_ids
from ..workflows.stored import stored_children as stored_children
from . import trace_parts as parts

NOT_ANSWERED = ("failed", "limit", "cancelled")
"""Outcomes of a child that did not answer (its panel is open, the state that ran it marked)."""
NO_CHILDREN = (
    "This is a workflow run: its child runs are kept in a store, not in its events. To see each child's "
    "loop here, run the workflow with a store (Runner(workflow, store=...)) and write the page from it: "
    "loopwright trace RUN_ID --store URL --agent module:workflow (from Python: children=await "
    "stored_children(store, run_id, workflow)); or, with no store, run it inside `with recording() as runs:` "
    "and pass children=runs."
)
"""What a workflow's page says in place of its children when it was written without them."""


@dataclass(frozen=True, slots=True)
class ChildRun:
    """A child run on the page: where it ran, its events (none: not found) and its own children."""

    slot: Slot
    run_id: str
    label: str
    events: tuple[Any, ...]
    children: tuple[ChildRun, ...]

    @property
    def outcome(self) -> str:
        return parts.outcome_of(self.events) if self.events else "missing"

    @property
    def troubled(self) -> bool:
        """It, or a run inside it, did not answer."""
        return self.outcome in NOT_ANSWERED or any(c.troubled for c in self.children)

    def walk(self) -> Iterator[ChildRun]:
        yield self
        for child in self.children:
            yield from child.walk()


def child_runs(machine: LoopMachine, events: Sequence[Any], runs: Mapping[str, Sequence[Any]]) -> list[ChildRun]:
    """The tree of children of the run ``events`` (on ``machine``), their events from ``runs``."""
    if not events:
        return []
    tree = []
    for slot in slots(machine, events, events[0].run_id):
        if slot.items:  # each item under its number; one missing before the last kept: "never started"
            kept = numbered_items(slot.run_id, runs)
            ids = [(f"{slot.label} · item {n}", f"{slot.run_id}.{n}") for n in range(kept[-1][0] + 1 if kept else 0)]
        else:
            ids = [(slot.label, slot.run_id)]
        for label, run_id in ids:
            own = tuple(runs.get(run_id, ()))
            tree.append(ChildRun(slot, run_id, label, own, tuple(child_runs(slot.machine, own, runs))))
    return tree


class RunEvents(dict[str, list[Any]]):
    """Every event of every run while :func:`recording`, by run id (an observer of every runner)."""

    def on_event(self, event: Any) -> None:
        self.setdefault(event.run_id, []).append(event)


@contextmanager
def recording() -> Iterator[RunEvents]:
    """Keep the events of every run started in this process while inside (a workflow's children
    too, with no store): ``with recording() as runs: result = runner.run_sync(...)``, then
    ``trace_page(result, children=runs)``. The observer is removed when the block ends."""
    from ..runtime.observers import instrument, uninstrument

    runs = RunEvents()
    instrument(runs)
    try:
        yield runs
    finally:
        uninstrument(runs)


# ------------------------------------------------------------------ drawing them


@dataclass(slots=True)
class Page:
    """What the panels add to the page: long texts (kept once), each child's events as JSON."""

    texts: dict[str, int]
    runs: dict[str, list[Any]]
    drawn: dict[Any, str] = field(default_factory=dict)
    """Each child's drawing by machine and path (drawn once for the runs that took the same path)."""


def verdict(events: Sequence[Any]) -> str:
    """One line: how the run ended, where (the state it failed in) and why."""
    if not events:
        return "not in the store: it never started, or was kept elsewhere"
    outcome = parts.outcome_of(events)
    finished = next((e for e in reversed(events) if e.type == "run_finished"), None)
    if outcome in NOT_ANSWERED:
        errors = [e for e in events if e.type == "error_occurred"]
        entered = [e for e in events if e.type == "state_entered"]
        where = errors[-1].state if errors else (entered[-1].source if entered else events[-1].state)
        why = finished.error.message if finished is not None and finished.error is not None else ""
        if not why and errors:
            why = errors[-1].error.message
        if not why and outcome == "limit":
            why = f"out of budget ({next((e.limit for e in reversed(events) if e.type == 'limit_reached'), '?')})"
        return f"{outcome} in {where}: {why}"
    said = str(finished.output) if finished is not None and finished.output else ""
    return f"{outcome}: {said[:160]}{'…' if len(said) > 160 else ''}" if said else outcome


def state_marks(kids: Sequence[ChildRun]) -> dict[str, str]:
    """Classes of the workflow's states that ran children: ``lw-has-runs``, and ``lw-run-failed``
    when one of them (or a run inside it) did not answer."""
    marks: dict[str, str] = {}
    for kid in kids:
        marks.setdefault(kid.slot.state, "lw-has-runs")
        if kid.troubled:
            marks[kid.slot.state] = "lw-has-runs lw-run-failed"
    return marks


def run_links(kids: Sequence[ChildRun]) -> dict[int, str]:
    """After the workflow's event that entered a state: a link to each run it ran there."""
    links: dict[int, list[str]] = {}
    for kid in kids:
        sign = " ✗" if kid.troubled else ""
        links.setdefault(kid.slot.seq, []).append(
            f'<a class="lw-run-link{" lw-bad" if kid.troubled else ""}" href="#lw-run-{html.escape(kid.run_id)}" '
            f'data-run="{html.escape(kid.run_id)}">{html.escape(kid.label)}{sign}</a>'
        )
    return {seq: ' <span class="lw-runs">runs: ' + " ".join(a) + "</span>" for seq, a in links.items()}


def run_lanes(events: Sequence[Any], kids: Sequence[ChildRun]) -> list[tuple[str, str]]:
    """A timeline lane per child run of the workflow run ``events``: when it ran, how it ended."""
    start, end = events[0].time, events[-1].time
    span = max(end - start, 1e-9)
    lanes = []
    for kid in kids:
        if not kid.events:
            continue
        t0, t1 = max(kid.events[0].time, start), min(kid.events[-1].time, end)
        cls = f"lw-run-bar lw-o-{kid.outcome}{' lw-bad' if kid.troubled else ''}"
        attrs = f'data-run="{html.escape(kid.run_id)}"'
        lanes.append((kid.label, parts.bar(start, span, t0, max(t1, t0), kid.label, cls, attrs)))
    return lanes


def children_section(kids: Sequence[ChildRun], page: Page, name: Callable[[], str]) -> str:
    """The panels of ``kids``, in a section of the view of the run that ran them."""
    if not kids:
        return ""
    every = [c for kid in kids for c in kid.walk()]
    bad = [c for c in every if c.outcome in NOT_ANSWERED]
    head = f"Child runs ({len(every)}{f', {len(bad)} did not answer' if bad else ''})"
    panels = "".join(_panel(kid, page, name) for kid in kids)
    return f'<section class="lw-wide lw-children"><h2>{head}</h2>{panels}</section>'


def _panel(kid: ChildRun, page: Page, name: Callable[[], str]) -> str:
    rid = html.escape(kid.run_id)
    opened = " open" if kid.troubled else ""
    head = (
        f'<summary><span class="lw-label">{html.escape(kid.label)}</span> '
        f'<span class="lw-where">in {html.escape(kid.slot.state)}</span> <code>{rid}</code> '
        f'<span class="lw-verdict">{html.escape(verdict(kid.events))}</span>'
        f"{_inside(kid)}</summary>"
    )
    return (
        f'<details class="lw-child lw-o-{kid.outcome}" id="lw-run-{rid}" data-run="{rid}" '
        f'data-state="{html.escape(kid.slot.state)}"{opened}>{head}{_view(kid, page, name)}</details>'
    )


def _inside(kid: ChildRun) -> str:
    inner = [c for child in kid.children for c in child.walk() if c.outcome in NOT_ANSWERED]
    return (
        f' <span class="lw-inside">· {len(inner)} run{"s" * (len(inner) != 1)} inside did not answer</span>'
        if inner
        else ""
    )


def _view(kid: ChildRun, page: Page, name: Callable[[], str]) -> str:
    events = list(kid.events)
    if not events:
        return f'<p class="lw-note">No events of run {html.escape(kid.run_id)}: {html.escape(verdict(events))}.</p>'
    page.runs[kid.run_id] = [parts.kept_once(e.model_dump(mode="json"), page.texts) for e in events]
    machine = kid.slot.machine
    try:
        taken = trace_counts(machine, events)
    except ConfigurationError:  # (not the machine the child ran on: the built-in one that fits)
        machine = machine_of_trace(events)
        taken = trace_counts(machine, events)
    kids = kid.children
    return (
        f'<div class="lw-run lw-grid" data-run="{html.escape(kid.run_id)}">'
        f'<div class="lw-summary lw-wide">{parts.summary_cells(events, page.texts)}</div>'
        f'<section class="lw-diagram"><h2>{html.escape(machine.name)}: its path</h2>'
        f"{parts.drawing(machine, events, taken, state_marks(kids), name(), page.drawn)}</section>"
        '<section><h2>Selected step</h2><pre class="lw-detail">Click a step to see its event.</pre>'
        '<button class="lw-more-all" hidden></button><h2>Timeline</h2>'
        f'<div class="lw-timeline">{parts.timeline(events, run_lanes(events, kids))}</div></section>'
        f'<section class="lw-wide"><table class="lw-table">{parts.TABLE_HEAD}<tbody>'
        f"{parts.table(events, run_links(kids))}</tbody></table></section>"
        f"{children_section(kids, page, name)}</div>"
    )
