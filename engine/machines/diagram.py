"""Diagrams of a machine, drawn from the exact LoopMachine that runs.

:func:`diagram` builds a ``transitions`` ``GraphMachine`` (only when drawing: runs never pay for
graph bookkeeping) from the running machine's own transition objects, and renders it with the
``transitions`` mermaid engine (text, GitHub renders it) or its graphviz engine (``dot``,
``svg``, ``png``: needs ``pip install graphviz`` and the Graphviz programs). ``svg`` needs
neither: where Graphviz is missing (the package or the ``dot`` program), :mod:`.svg` draws the
machine in pure Python, with the same element ids, titles and trace classes (so the dev UI and
the trace page light either drawing). Where Graphviz is present it stays the svg renderer (its
layout is the better one, and the committed ``diagrams/*.svg`` are its); ``dot`` and ``png``
always need it.

What it shows: each edge is labelled with the guards of its rows (``else``: the fallback; rows
between the same two states are joined with ``|``, in the order the machine tries them).
Bounded edges read ``⟲ guards [bounded: budget]`` (and are blue and bold in graphviz);
terminals have a double border and lead to the end marker; waiting states are dashed.

Trace overlay: ``diagram(machine, trace=events)`` (a RunResult, its events, or the path of a
JSON-lines file as ``loopwright demo --json`` prints) highlights the states the run visited and
labels each edge it took with how often (a check mark and the count; red in graphviz).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, overload

from pydantic import ValidationError

from ..data.errors import ConfigurationError
from ..data.events import EVENT_ADAPTER, Event
from ..data.result import RunResult
from ..features import BUILT_IN_MACHINES as VARIANTS
from ..features import machine_for
from ..runtime.agent import Agent
from ..table.machine import TRIGGER, LoopMachine, Row
from .verify import load_target

Format: TypeAlias = Literal["mermaid", "dot", "svg", "png"]
FORMATS: tuple[Format, ...] = ("mermaid", "dot", "svg", "png")
Trace: TypeAlias = "RunResult | Iterable[Event] | str | os.PathLike[str]"
"""A run to overlay: its RunResult, its events, or a JSON-lines file of its events."""
DIAGRAMS_DIR = "diagrams"

_NODE_MERMAID: dict[str, dict[str, str]] = {
    "default": {"fillcolor": "white", "color": "black"},
    "terminal": {"fillcolor": "#eeeeee", "color": "black", "stroke": "#333333", "stroke-width": "3px"},
    "waiting": {"fillcolor": "#fff4cc", "color": "black", "stroke": "#b8860b", "stroke-dasharray": "5 5"},
    "visited": {"fillcolor": "#ffe0c2", "color": "black", "stroke": "#d62728", "stroke-width": "2px"},
}
_STYLES_GRAPHVIZ: dict[str, dict[str, dict[str, str]]] = {
    "node": {
        "default": {"style": "rounded,filled", "shape": "rectangle", "fillcolor": "white", "color": "black"},
        "terminal": {"style": "rounded,filled", "fillcolor": "#eeeeee", "peripheries": "2"},
        "waiting": {"style": "rounded,filled,dashed", "fillcolor": "#fff4cc", "color": "#b8860b"},
        "visited": {"style": "rounded,filled", "fillcolor": "#ffe0c2", "color": "#d62728"},
    },
    "edge": {
        "default": {"color": "black", "fontsize": "10"},
        "bounded": {"color": "#1f5fbf", "fontcolor": "#1f5fbf", "style": "bold"},
        "taken": {"color": "#d62728", "fontcolor": "#d62728", "penwidth": "2.5"},
    },
    "graph": {"default": {"fontname": "Helvetica"}},
}


# ------------------------------------------------------------------ traces


def load_trace(path: str | os.PathLike[str]) -> list[Event]:
    """The events of a JSON-lines file (``-``: standard input), one event per line. Lines end at
    ``\n`` only: ``str.splitlines()`` would also split at U+2028, U+2029 and U+0085, which a JSON
    string holds raw."""
    if str(path) == "-":
        lines = sys.stdin.read().split("\n")
    else:
        try:
            lines = Path(path).read_text(encoding="utf-8").split("\n")
        except OSError as exc:
            raise ConfigurationError(f"cannot read trace {str(path)!r}: {exc.strerror or exc}") from None
    events: list[Event] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(EVENT_ADAPTER.validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigurationError(
                f"line {n} of trace {str(path)!r} is not a loopwright event ({first['msg']}); a trace is one JSON "
                "event per line, as `loopwright demo --json` prints"
            ) from None
    return events


def events_of(trace: Trace) -> list[Any]:
    """The events of a trace: a RunResult's, a JSONL file's (``loopwright run --json``), or the list given."""
    if isinstance(trace, RunResult):
        return list(trace.events)
    if isinstance(trace, str | os.PathLike):
        return list(load_trace(trace))
    return list(trace)


def _unmatched(machine: LoopMachine, events: Sequence[Any]) -> tuple[Counter[Row], list[str]]:
    taken: Counter[Row] = Counter()
    missing: list[str] = []
    for e in events:
        if getattr(e, "type", None) != "state_entered" or e.guard == "raised":
            continue  # the engine's abort edge is in no table
        rows = machine.rows_from(e.source) if e.source in machine.states else ()
        match = [r for r in rows if r.dest == e.state and (e.guard is None or r.label == e.guard)]
        if match:
            taken[match[0]] += 1
        else:
            missing.append(f"{e.source} -> {e.state} ({e.guard})")
    return taken, missing


def trace_counts(machine: LoopMachine, trace: Trace) -> Counter[Row]:
    """How often the run took each row of ``machine`` (ConfigurationError if it took an edge
    the machine does not have: it ran on another machine)."""
    taken, missing = _unmatched(machine, events_of(trace))
    if missing:
        raise ConfigurationError(
            f"the trace took edges that machine {machine.name!r} does not have: {', '.join(dict.fromkeys(missing))}; "
            "draw it on the machine the run used (--agent module:attr)"
        )
    return taken


def machine_of_trace(trace: Trace) -> LoopMachine:
    """The first built-in variant that has every edge the run took."""
    events = events_of(trace)
    for machine in VARIANTS.values():
        if not _unmatched(machine, events)[1]:
            return machine
    missing = _unmatched(next(iter(VARIANTS.values())), events)[1]
    raise ConfigurationError(
        f"no built-in machine has every edge of this trace (e.g. {missing[0]}); name the agent the run used "
        "(--agent module:attr, or diagram(agent, trace=...))"
    )


# ------------------------------------------------------------------ drawing


class _Model:
    """The one model of a drawing machine (identity equality, as transitions needs)."""


def _label(row: Row, taken: int, graphviz: bool) -> str:
    text = (" &\\n" if graphviz else " & ").join(row.guard_names) if row.guards else "else"
    if row.bounded_by:
        text = f"⟲ {text} [bounded: {row.bounded_by}]"
    if row.outcome:
        text = f"{text} ⇒ {row.outcome}"
    if taken:
        text = f"{text} ✔ {taken}×"
    return text


def graph(machine: LoopMachine, engine: Literal["mermaid", "graphviz"], taken: Mapping[Row, int] | None = None) -> Any:
    """The ``transitions`` graph of ``machine`` (a mermaid source holder or a graphviz
    ``Digraph``), with this package's styles and, given ``taken``, a run's trace."""
    from transitions.extensions import GraphMachine  # only when drawing: a slow import

    taken = taken or {}
    graphviz = engine == "graphviz"
    gm: Any = GraphMachine(
        model=None,
        states=list(machine.states),
        initial=machine.initial,
        auto_transitions=False,
        graph_engine=engine,
        title=machine.name,
        show_conditions=False,
    )
    if graphviz:
        gm.style_attributes = _STYLES_GRAPHVIZ
        gm.machine_attributes = {"directed": "true", "strict": "false", "rankdir": "TB", "nodesep": "0.4"}
    else:
        gm.style_attributes = {"node": _NODE_MERMAID, "edge": {}, "graph": {}}
        gm.machine_attributes = {"direction": "TB"}
    event = machine.machine.events[TRIGGER]  # the running machine's own transitions, in its order
    for state in machine.states:
        for row, tr in zip(machine.rows_from(state), event.transitions.get(state, []), strict=True):
            conditions = [c.func for c in tr.conditions]
            label = _label(row, taken.get(row, 0), graphviz)
            gm.add_transition(TRIGGER, tr.source, tr.dest, conditions=conditions, label=label)
    model = _Model()
    gm.add_model(model)
    drawing: Any = gm.model_graphs[id(model)]
    drawing.reset_styling()
    waiting = frozenset(getattr(machine, "waiting", ()))
    visited = {r.source for r in taken} | {r.dest for r in taken}
    for state in machine.states:
        style = (
            "visited"
            if state in visited
            else "terminal"
            if state in machine.terminals
            else "waiting"
            if state in waiting
            else ""
        )
        if style:
            drawing.set_node_style(state, style)
    for row in machine.rows:
        style = "taken" if taken.get(row) else "bounded" if row.bounded_by else ""
        if style and drawing.custom_styles["edge"][row.source][row.dest] != "taken":
            drawing.custom_styles["edge"][row.source][row.dest] = style
    return drawing.get_graph(title=machine.name)


def _mermaid(machine: LoopMachine, taken: Mapping[Row, int]) -> str:
    source: str = graph(machine, "mermaid", taken).source
    lines = [line.rstrip() for line in source.splitlines()]
    lines[1] = f"title: {machine.name}"  # transitions writes the bare title: YAML front matter wants a key
    lines += [f"  {t} --> [*]" for t in machine.states if t in machine.terminals]
    lines += _composites(machine, "", "  ")
    return "\n".join(lines) + "\n"


def _composites(machine: LoopMachine, prefix: str, indent: str) -> list[str]:
    """A workflow's states that run children (its ``composites``: state -> (label, machine)),
    each drawn as a composite state holding its children's machines (concurrent regions,
    split by ``--``, when they run at once); inner states are named ``state__child__inner``."""
    composites: Mapping[str, Sequence[tuple[str, LoopMachine]]] = getattr(machine, "composites", None) or {}
    lines: list[str] = []
    for state, children in composites.items():
        lines.append(f"{indent}state {prefix}{state} {{")
        for n, (label, child) in enumerate(children):
            if n:
                lines.append(f"{indent}  --")
            inner = f"{prefix}{state}__{label}__"
            lines += _inner(child, inner, indent + "  ")
        lines.append(f"{indent}}}")
    return lines


def _inner(machine: LoopMachine, prefix: str, indent: str) -> list[str]:
    """One child's machine inside a composite state (its rows between two states joined by ``|``)."""
    lines = [f'{indent}state "{s}" as {prefix}{s}' for s in machine.states]
    lines.append(f"{indent}[*] --> {prefix}{machine.initial}")
    edges: dict[tuple[str, str], list[str]] = {}
    for row in machine.rows:
        edges.setdefault((row.source, row.dest), []).append(_label(row, 0, False))
    lines += [f"{indent}{prefix}{a} --> {prefix}{b}: {' | '.join(labels)}" for (a, b), labels in edges.items()]
    lines += [f"{indent}{prefix}{t} --> [*]" for t in machine.states if t in machine.terminals]
    return lines + _composites(machine, prefix, indent)


def _digraph(machine: LoopMachine, taken: Mapping[Row, int]) -> Any:
    if importlib.util.find_spec("graphviz") is None:
        raise ConfigurationError(
            "dot, svg and png diagrams need the graphviz package: pip install 'loopwright[diagrams]' (or pip install "
            "graphviz); mermaid text needs nothing: diagram(agent, 'mermaid')"
        )
    g = graph(machine, "graphviz", taken)
    g.node("__start__", label="", shape="circle", style="filled", fillcolor="black", width="0.2")
    g.edge("__start__", machine.initial)
    return g


def _render(g: Any, fmt: str) -> bytes:
    if shutil.which("dot") is None:
        raise ConfigurationError(
            f"{fmt} diagrams need the Graphviz programs (the `dot` command): apt-get install graphviz, brew install "
            "graphviz, or see graphviz.org; mermaid and dot text need no programs"
        )
    data: bytes = g.pipe(format=fmt)
    if fmt == "svg":  # stamp the drawing's source, so a stale SVG shows even without `dot`
        digest = hashlib.sha256(g.source.encode()).hexdigest()
        head, _, rest = data.partition(b"\n")
        data = head + f"\n<!-- loopwright diagram source sha256:{digest} -->\n".encode() + rest
    return data


def _machine(target: Agent | LoopMachine | RunResult | None, trace: Trace | None) -> LoopMachine:
    if isinstance(target, RunResult):
        return target.machine or machine_of_trace(target)
    if isinstance(target, Agent):
        return machine_for(target)
    if isinstance(target, LoopMachine):
        return target
    if target is None:
        return machine_of_trace(trace) if trace is not None else VARIANTS["agent"]
    raise ConfigurationError(f"diagram() draws an Agent or a LoopMachine, got {type(target).__name__}")


@overload
def diagram(
    target: Agent | LoopMachine | RunResult | None = ...,
    format: Literal["mermaid", "dot", "svg"] = ...,
    *,
    trace: Trace | None = ...,
) -> str: ...
@overload
def diagram(
    target: Agent | LoopMachine | RunResult | None, format: Literal["png"], *, trace: Trace | None = ...
) -> bytes: ...
@overload
def diagram(
    target: Agent | LoopMachine | RunResult | None, format: str, *, trace: Trace | None = ...
) -> str | bytes: ...
def diagram(
    target: Agent | LoopMachine | RunResult | None = None, format: str = "mermaid", *, trace: Trace | None = None
) -> str | bytes:
    """Draw ``target`` (an Agent: the machine it runs on; a LoopMachine; a RunResult: the
    machine the run used, with its path; None: the plain loop, or with a trace the built-in
    machine the run used) as ``format``: ``"mermaid"`` (text),
    ``"dot"`` (text), ``"svg"`` (text) or ``"png"`` (bytes). ``trace`` overlays a run."""
    if format not in FORMATS:
        raise ConfigurationError(f"unknown diagram format {format!r}; use one of {', '.join(FORMATS)}")
    if isinstance(target, RunResult) and trace is None:
        trace = target
    machine = _machine(target, trace)
    taken = trace_counts(machine, trace) if trace is not None else Counter[Row]()
    if format == "mermaid":
        return _mermaid(machine, taken)
    if format == "svg" and not dot_available():  # no Graphviz here: drawn in pure Python
        return pure_svg(machine, taken)
    g = _digraph(machine, taken)
    if format == "dot":
        return str(g.source)
    data = _render(g, format)
    return data.decode() if format == "svg" else data


def pure_svg(machine: LoopMachine, taken: Mapping[Row, int] | None = None) -> str:
    """The SVG drawing of ``machine`` made in pure Python (:mod:`.svg`), whether or not Graphviz
    is here: what ``diagram(machine, "svg")`` gives where it is not. ``taken``: a run's
    :func:`trace_counts`."""
    from .svg import draw

    return draw(machine, taken, lambda row, n: _label(row, n, False))


def markdown(machine: LoopMachine, *, trace: Trace | None = None) -> str:
    """A Markdown page with the machine's mermaid diagram (GitHub renders it) and a legend."""
    bounded = [f"`{r.source} -> {r.dest}` ({r.bounded_by})" for r in machine.rows if r.bounded_by]
    working = [s for s in machine.states if s not in machine.terminals]
    waiting = sorted(getattr(machine, "waiting", ()))
    lines = [
        "<!-- Generated by `loopwright diagram` from the machine itself; do not edit. -->",
        f"# The `{machine.name}` loop",
        "",
        f"{len(machine.states)} states ({len(working)} working, terminals: "
        f"{', '.join(s for s in machine.states if s in machine.terminals)}), {len(machine.rows)} rows. "
        f"Bounded edges: {', '.join(bounded) or 'none'}."
        + (f" Waiting states: {', '.join(waiting)}." if waiting else ""),
        "",
        "```mermaid",
        diagram(machine, "mermaid", trace=trace).rstrip("\n"),
        "```",
        "",
        "Each edge lists the guards of its rows, tried in table order (`else`: the state's fallback row; rows "
        "between the same two states are joined by `|`). `⟲ … [bounded: budget]` marks a bounded edge: its "
        "budget's guard stops the cycle, so every run ends. `⇒ outcome`: the outcome of a run that takes the "
        "edge. Terminals have a thick border and lead to the end "
        "marker; waiting states are dashed."
        + (" Edges the run took read `✔ n×`; the states it visited are highlighted." if trace is not None else ""),
        "",
    ]
    return "\n".join(lines)


def dot_available() -> bool:
    """Whether Graphviz can draw here (the graphviz package and the ``dot`` program): PNG needs
    it; SVG is drawn without it (in pure Python) when it is missing."""
    return importlib.util.find_spec("graphviz") is not None and shutil.which("dot") is not None


def write_diagrams(
    out_dir: str | os.PathLike[str] = DIAGRAMS_DIR,
    machines: Mapping[str, LoopMachine] | None = None,
    formats: Sequence[Format] = ("mermaid", "svg"),
) -> list[Path]:
    """Write the diagrams of ``machines`` (default: the built-in variants) into ``out_dir``:
    ``NAME.md`` for mermaid, ``NAME.svg``/``.dot``/``.png`` for the others. Returns the paths."""
    return [
        write_diagram(machine, out_dir, fmt, name=name)
        for name, machine in (machines or VARIANTS).items()
        for fmt in formats
    ]


def write_diagram(
    machine: LoopMachine,
    out_dir: str | os.PathLike[str] = DIAGRAMS_DIR,
    format: str = "mermaid",
    *,
    trace: Trace | None = None,
    name: str | None = None,
) -> Path:
    """Write one drawing of ``machine`` into ``out_dir`` (made if missing) and return its path:
    ``NAME.md`` for mermaid (the :func:`markdown` page), ``NAME.svg``/``.dot``/``.png`` for the
    others; ``NAME-trace.*`` with a ``trace`` overlaid. ``NAME``: ``name``, or the machine's."""
    suffix = "md" if format == "mermaid" else format
    path = Path(out_dir) / f"{name or machine.name}{'-trace' if trace is not None else ''}.{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if format == "mermaid":
        path.write_text(markdown(machine, trace=trace), encoding="utf-8")
    else:
        data = diagram(machine, format, trace=trace)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def machine_for_target(target: str | None) -> LoopMachine | None:
    """The machine ``module:attr`` names (an Agent's: the one it runs on), or None."""
    if target is None:
        return None
    obj = load_target(target)
    return machine_for(obj) if isinstance(obj, Agent) else obj
