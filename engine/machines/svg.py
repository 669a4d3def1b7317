"""The machine drawn as SVG in pure Python: no Graphviz, no system program.

:func:`draw` lays the machine out in layers (Sugiyama-style) and writes an SVG with the same
structure and hooks as Graphviz's: each state a ``<g class="node">`` and each pair of states
joined by rows a ``<g class="edge">``, each with a ``<title>`` naming it (``state``, or
``source->dest``), ids ``nodeN``/``edgeN``, states drawn as ``<path>``, edges as a ``<path>``
with a ``<polygon>`` arrowhead. So the trace page's marks (``lw-taken``, ``lw-visited``,
``data-edge``, ``data-state``) and the dev UI's live lighting work on either drawing.

The layout:

1. **Back edges.** A depth-first walk from the initial state (rows in table order) finds the
   edges that close a cycle; they are laid out reversed (and drawn pointing back up).
2. **Ranks.** Each state's rank is its longest path from the initial state over the other
   edges. Ranks are doubled: every edge passes through a label slot (a dummy node as wide as its
   label) in the odd rank between, and a longer edge through a dummy at each rank it crosses,
   so labels never overlap states or each other.
3. **Order.** Within each rank, nodes are sorted by the barycenter of their neighbours, sweeping
   down and up a few times (fewer crossings); ties keep the walk's order.
4. **Positions.** Each node moves toward the mean of its neighbours' centers, then the rank is
   packed left to right keeping the order and a gap (a few rounds).

Everything is computed from the machine in table order with no randomness and written with
fixed precision: the same machine (and trace) gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TypeAlias
from xml.sax.saxutils import escape, quoteattr

from ..table.machine import LoopMachine, Row

START = "__start__"
Label: TypeAlias = Callable[[Row, int], str]
"""A row's label on the drawing, given the row and how often the run took it."""
_FONT = "Helvetica,Arial,sans-serif"
_STATE_FONT = 14.0
_LABEL_FONT = 10.0
_STATE_H = 36.0
_PAD = 12.0
_GAP_X = 22.0
_GAP_Y = 14.0
_LINE = 12.0
_SWEEPS = 6
_ROUNDS = 24
_WRAP = 40


def _plain(row: Row, taken: int) -> str:
    text = " & ".join(row.guard_names) if row.guards else "else"
    if row.bounded_by:
        text = f"⟲ {text} [bounded: {row.bounded_by}]"
    return f"{text} ✔ {taken}×" if taken else text


def _text_width(text: str, size: float) -> float:
    """An estimate of the text's width (no font metrics in pure Python: a generous average)."""
    return round(sum((0.62 if ch.isupper() or ord(ch) > 0x2000 else 0.55) for ch in text) * size, 1)


@dataclass(eq=False)
class _Node:
    name: str
    rank: int
    width: float
    height: float
    kind: str  # "state", "start", "slot" (an edge's label) or "dummy" (a long edge's bend)
    lines: tuple[str, ...] = ()
    order: float = 0.0
    x: float = 0.0
    y: float = 0.0
    room: float = 0.0  # taken on the right by the state's loop
    up: list[_Node] = field(default_factory=list)
    down: list[_Node] = field(default_factory=list)


@dataclass(eq=False)
class _Edge:
    source: str
    dest: str
    rows: list[Row]
    lines: list[str]
    reversed: bool = False
    chain: list[_Node] = field(default_factory=list)  # laid out from the upper end to the lower end


def _f(v: float) -> str:
    """A coordinate, fixed precision (deterministic bytes)."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _back_edges(states: Sequence[str], initial: str, out: Mapping[str, list[str]]) -> set[tuple[str, str]]:
    back: set[tuple[str, str]] = set()
    seen: set[str] = set()
    on_stack: set[str] = set()

    def walk(root: str) -> None:
        stack: list[tuple[str, int]] = [(root, 0)]
        seen.add(root)
        on_stack.add(root)
        while stack:
            node, i = stack[-1]
            nexts = out.get(node, [])
            if i == len(nexts):
                stack.pop()
                on_stack.discard(node)
                continue
            stack[-1] = (node, i + 1)
            dest = nexts[i]
            if dest in on_stack:
                back.add((node, dest))
            elif dest not in seen:
                seen.add(dest)
                on_stack.add(dest)
                stack.append((dest, 0))

    walk(initial)
    for s in states:
        if s not in seen:
            walk(s)
    return back


def _ranks(states: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest path from the sources of the acyclic graph ``edges`` (Kahn's order, stable)."""
    indeg = dict.fromkeys(states, 0)
    out: dict[str, list[str]] = {s: [] for s in states}
    for a, b in edges:
        out[a].append(b)
        indeg[b] += 1
    rank = dict.fromkeys(states, 0)
    ready = [s for s in states if indeg[s] == 0]
    while ready:
        s = ready.pop(0)
        for d in out[s]:
            rank[d] = max(rank[d], rank[s] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    return rank


def _label_lines(rows: Sequence[Row], taken: Mapping[Row, int], label: Label) -> list[str]:
    """Each row's label (``label(row, times taken)``, as the other drawings write it), wrapped
    after an ``&`` past :data:`_WRAP` characters; a continued line is indented."""
    lines: list[str] = []
    for row in rows:
        words = label(row, taken.get(row, 0)).split(" & ")
        line = words[0]
        for word in words[1:]:
            if len(line) + len(word) + 2 > _WRAP:
                lines.append(line + " &")
                line = "   " + word
            else:
                line = f"{line} & {word}"
        lines.append(line)
    return lines


def draw(machine: LoopMachine, taken: Mapping[Row, int] | None = None, label: Label = _plain) -> str:
    """``machine`` as an SVG document (with a run's path when ``taken`` counts its rows); each
    row labelled ``label(row, times taken)`` (:mod:`.diagram` gives its own, as in its mermaid)."""
    taken = taken or {}
    edges = _edges(machine, taken, label)
    loops = {e.source: e for e in edges if e.source == e.dest}
    nodes, layers = _layers(machine, edges)
    for name, e in loops.items():
        nodes[name].room = _loop_room(e)
    _order(layers)
    width, height = _place(layers)
    return _document(machine, taken, nodes, edges, width, height)


def _edges(machine: LoopMachine, taken: Mapping[Row, int], label: Label) -> list[_Edge]:
    """The start marker's edge, then one edge per pair of states joined by rows (table order),
    those that close a cycle marked ``reversed``."""
    pairs: dict[tuple[str, str], list[Row]] = {}
    for state in machine.states:
        for row in machine.rows_from(state):
            pairs.setdefault((row.source, row.dest), []).append(row)
    edges = [_Edge(START, machine.initial, [], [])]
    edges += [_Edge(a, b, rows, _label_lines(rows, taken, label)) for (a, b), rows in pairs.items()]
    out: dict[str, list[str]] = {}
    for e in edges[1:]:
        if e.source != e.dest:
            out.setdefault(e.source, []).append(e.dest)
    back = _back_edges(list(machine.states), machine.initial, out)
    for e in edges:
        e.reversed = (e.source, e.dest) in back
    return edges


def _layers(machine: LoopMachine, edges: Sequence[_Edge]) -> tuple[dict[str, _Node], dict[int, list[_Node]]]:
    """The states on even ranks (doubled longest-path ranks), each edge's label slot and bends
    on the ranks between; every edge's ``chain`` of nodes from its upper to its lower end."""
    laid = [(e.dest, e.source) if e.reversed else (e.source, e.dest) for e in edges if e.source != e.dest]
    rank = _ranks([START, *machine.states], laid)
    nodes: dict[str, _Node] = {START: _Node(START, 0, 14.0, 14.0, "start")}
    for s in machine.states:
        w = _text_width(s, _STATE_FONT) + 2 * _PAD + (8 if s in machine.terminals else 0)
        nodes[s] = _Node(s, 2 * rank[s], w, _STATE_H, "state")
    layers: dict[int, list[_Node]] = {}
    for n in nodes.values():
        layers.setdefault(n.rank, []).append(n)
    for n_edge, e in enumerate(edges):
        if e.source == e.dest:
            continue
        top, bottom = (nodes[e.dest], nodes[e.source]) if e.reversed else (nodes[e.source], nodes[e.dest])
        chain = [top]
        for r in range(top.rank + 1, bottom.rank):
            if r == top.rank + 1 and e.lines:
                width = max(_text_width(line, _LABEL_FONT) for line in e.lines) + 10
                mid = _Node(f"slot{n_edge}", r, width, len(e.lines) * _LINE + 4, "slot", tuple(e.lines))
            else:
                mid = _Node(f"bend{n_edge}.{r}", r, 4.0, 4.0, "dummy")
            layers.setdefault(r, []).append(mid)
            chain.append(mid)
        chain.append(bottom)
        for a, b in pairwise(chain):
            a.down.append(b)
            b.up.append(a)
        e.chain = chain
    return nodes, layers


def _order(layers: Mapping[int, list[_Node]]) -> None:
    """Each rank sorted by its nodes' barycenters (of the rank above, then below, in turn)."""
    ranks = sorted(layers)
    for r in ranks:
        for i, n in enumerate(layers[r]):
            n.order = float(i)
    for sweep in range(_SWEEPS):
        for r in ranks if sweep % 2 == 0 else reversed(ranks):
            layer = layers[r]
            for n in layer:
                near = n.up if sweep % 2 == 0 else n.down
                if near:
                    n.order = sum(m.order for m in near) / len(near)
            layer.sort(key=lambda n: n.order)
            for i, n in enumerate(layer):
                n.order = float(i)


def _pack(layer: list[_Node], want: Mapping[int, float]) -> None:
    """Each node at its wanted center, pushed right past its left neighbour (the order kept),
    then the rank shifted so its mean center is the mean wanted one."""
    left = None
    for n in layer:
        x = want[id(n)] - n.width / 2
        if left is not None:
            x = max(x, left + _GAP_X)
        n.x = x + n.width / 2
        left = x + n.width + n.room
    shift = sum(want[id(n)] - n.x for n in layer) / len(layer)
    for n in layer:
        n.x += shift


def _place(layers: Mapping[int, list[_Node]]) -> tuple[float, float]:
    """Every node's center (x pulled toward its neighbours, y by rank); the drawing's size."""
    ranks = sorted(layers)
    for r in ranks:
        want, x = {}, 0.0
        for n in layers[r]:
            want[id(n)] = x + n.width / 2
            x += n.width + _GAP_X + n.room
        _pack(layers[r], want)
    for rnd in range(_ROUNDS):
        for r in ranks if rnd % 2 == 0 else reversed(ranks):
            _pack(layers[r], {id(n): _mean([m.x for m in n.up + n.down], n.x) for n in layers[r]})
    every = [n for r in ranks for n in layers[r]]
    low = min(n.x - n.width / 2 for n in every)
    for n in every:
        n.x += 20 - low
    y = 44.0
    for r in ranks:
        h = max(n.height for n in layers[r])
        for n in layers[r]:
            n.y = y + h / 2
        y += h + _GAP_Y
    return max(n.x + n.width / 2 + n.room for n in every) + 20, y + 10


def _mean(values: Sequence[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def _document(
    machine: LoopMachine,
    taken: Mapping[Row, int],
    nodes: Mapping[str, _Node],
    edges: Sequence[_Edge],
    width: float,
    height: float,
) -> str:
    visited = {r.source for r in taken} | {r.dest for r in taken}
    waiting = frozenset(getattr(machine, "waiting", ()))
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<!-- loopwright diagram, drawn in pure Python (loopwright.machines.svg) -->",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}pt" height="{_f(height)}pt" '
        f'viewBox="0 0 {_f(width)} {_f(height)}">',
        '<g id="graph0" class="graph">',
        f"<title>{escape(machine.name)}</title>",
        f'<rect fill="white" stroke="none" x="0" y="0" width="{_f(width)}" height="{_f(height)}"/>',
        f'<text text-anchor="middle" x="{_f(width / 2)}" y="24" font-family="{_FONT}" font-size="16">'
        f"{escape(machine.name)}</text>",
    ]
    for i, name in enumerate([START, *machine.states], 1):
        parts += _node_svg(i, nodes[name], machine, name in visited, name in waiting)
    ports = _ports(edges)
    for i, e in enumerate(edges, 1):
        hit = any(taken.get(r) for r in e.rows)
        bounded = any(r.bounded_by for r in e.rows)
        parts += _edge_svg(i, e, nodes, hit, bounded, ports)
    parts += ["</g>", "</svg>", ""]
    return "\n".join(parts)


def _loop_room(e: _Edge) -> float:
    """The room a state's loop and its label take on the state's right."""
    return 22 + max(_text_width(line, _LABEL_FONT) for line in e.lines) + 6


def _rounded(x0: float, y0: float, x1: float, y1: float, r: float = 6) -> str:
    return (
        f"M{_f(x0 + r)},{_f(y0)}H{_f(x1 - r)}Q{_f(x1)},{_f(y0)} {_f(x1)},{_f(y0 + r)}"
        f"V{_f(y1 - r)}Q{_f(x1)},{_f(y1)} {_f(x1 - r)},{_f(y1)}H{_f(x0 + r)}"
        f"Q{_f(x0)},{_f(y1)} {_f(x0)},{_f(y1 - r)}V{_f(y0 + r)}Q{_f(x0)},{_f(y0)} {_f(x0 + r)},{_f(y0)}Z"
    )


def _node_svg(i: int, n: _Node, machine: LoopMachine, visited: bool, waiting: bool) -> list[str]:
    head = [f'<g id="node{i}" class="node">', f"<title>{escape(n.name)}</title>"]
    if n.kind == "start":
        return [*head, f'<ellipse fill="black" stroke="black" cx="{_f(n.x)}" cy="{_f(n.y)}" rx="7" ry="7"/>', "</g>"]
    terminal = n.name in machine.terminals
    fill, stroke, extra = "white", "black", ""
    if visited:
        fill, stroke, extra = "#ffe0c2", "#d62728", ' stroke-width="2"'
    elif terminal:
        fill = "#eeeeee"
    elif waiting:
        fill, stroke, extra = "#fff4cc", "#b8860b", ' stroke-dasharray="5,3"'
    x0, y0, x1, y1 = n.x - n.width / 2, n.y - n.height / 2, n.x + n.width / 2, n.y + n.height / 2
    body = [f'<path fill="{fill}" stroke="{stroke}"{extra} d="{_rounded(x0, y0, x1, y1)}"/>']
    if terminal:  # a double border, as Graphviz's peripheries=2
        body.append(f'<path fill="{fill}" stroke="{stroke}"{extra} d="{_rounded(x0 + 4, y0 + 4, x1 - 4, y1 - 4, 4)}"/>')
    body.append(
        f'<text text-anchor="middle" x="{_f(n.x)}" y="{_f(n.y + 5)}" font-family="{_FONT}" '
        f'font-size="{_f(_STATE_FONT)}">{escape(n.name)}</text>'
    )
    return [*head, *body, "</g>"]


def _spline(pts: Sequence[tuple[float, float]]) -> str:
    """A smooth curve through ``pts`` (Catmull-Rom as cubic Béziers), leaving the first point and
    reaching the last one vertically."""
    ext = [(pts[0][0], pts[0][1] - (pts[1][1] - pts[0][1])), *pts, (pts[-1][0], pts[-1][1] + (pts[-1][1] - pts[-2][1]))]
    d = ""
    for k in range(1, len(ext) - 2):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = ext[k - 1], ext[k], ext[k + 1], ext[k + 2]
        c1 = (x1 + (x2 - x0) / 6, y1 + (y2 - y0) / 6)
        c2 = (x2 - (x3 - x1) / 6, y2 - (y3 - y1) / 6)
        if k == 1:
            c1 = (x1, c1[1])
        if k == len(ext) - 3:
            c2 = (x2, c2[1])
        d += f"C{_f(c1[0])},{_f(c1[1])} {_f(c2[0])},{_f(c2[1])} {_f(x2)},{_f(y2)}"
    return d


def _ports(edges: Sequence[_Edge]) -> dict[tuple[int, str], float]:
    """Where each edge meets its states, as an offset from the state's center: the edges
    leaving a state's bottom (or entering its top) spread along it in the order of where they
    go (or come from), so they do not all meet at one point."""
    ends: dict[tuple[int, str], list[tuple[float, int, str]]] = {}
    for e in edges:
        if len(e.chain) < 2:
            continue
        top, bottom = e.chain[0], e.chain[-1]
        upper_key = (id(top), "bottom")
        lower_key = (id(bottom), "top")
        ends.setdefault(upper_key, []).append((e.chain[1].x, id(e), "upper"))
        ends.setdefault(lower_key, []).append((e.chain[-2].x, id(e), "lower"))
    width = {id(n): n.width for e in edges for n in e.chain}
    ports: dict[tuple[int, str], float] = {}
    for (node, _side), items in ends.items():
        items.sort(key=lambda t: t[0])
        span = min(width[node] * 0.6, 12.0 * (len(items) - 1))
        for k, (_x, edge, end) in enumerate(items):
            ports[(edge, end)] = -span / 2 + (span * k / (len(items) - 1) if len(items) > 1 else 0.0)
    return ports


def _edge_svg(
    i: int,
    e: _Edge,
    nodes: Mapping[str, _Node],
    hit: bool,
    bounded: bool,
    ports: Mapping[tuple[int, str], float],
) -> list[str]:
    color, extra = "black", ""
    if hit:
        color, extra = "#d62728", ' stroke-width="2.5"'
    elif bounded:
        color, extra = "#1f5fbf", ' stroke-width="2"'
    head = [f'<g id="edge{i}" class="edge">', f"<title>{escape(f'{e.source}->{e.dest}')}</title>"]
    texts: list[str] = []
    if e.source == e.dest:  # a loop on the state's right side, its label beside it
        n = nodes[e.source]
        x1, top, bottom = n.x + n.width / 2, n.y - 8, n.y + 8
        d = f"M{_f(x1)},{_f(top)}C{_f(x1 + 26)},{_f(top - 14)} {_f(x1 + 26)},{_f(bottom + 14)} "
        d += f"{_f(x1 + 6)},{_f(bottom + 2)}"
        tip, direction = (x1, bottom), (-1.0, -0.4)
        lx, ly = x1 + 24, n.y - (len(e.lines) - 1) * _LINE / 2 + 3
    else:
        chain = e.chain
        pts: list[tuple[float, float]] = []
        for k, m in enumerate(chain):
            if m.kind == "slot":
                pts.append((m.x - m.width / 2 + 3, m.y))
            elif k == 0:
                pts.append((m.x, m.y + m.height / 2))
            elif k == len(chain) - 1:
                pts.append((m.x, m.y - m.height / 2))
            else:
                pts.append((m.x, m.y))
        pts[0] = (pts[0][0] + ports.get((id(e), "upper"), 0.0), pts[0][1])
        pts[-1] = (pts[-1][0] + ports.get((id(e), "lower"), 0.0), pts[-1][1])
        if e.reversed:
            pts.reverse()
        d = f"M{_f(pts[0][0])},{_f(pts[0][1])}" + _spline(pts)
        tip = pts[-1]
        direction = (0.0, 1.0) if pts[-1][1] > pts[-2][1] else (0.0, -1.0)
        slot = next((m for m in chain if m.kind == "slot"), None)
        lx = slot.x - slot.width / 2 + 9 if slot else 0.0
        ly = slot.y - (len(e.lines) - 1) * _LINE / 2 + 3.5 if slot else 0.0
    # the arrowhead: its tip on the state's border, pointing along the edge's last direction
    dx, dy = direction
    norm = (dx * dx + dy * dy) ** 0.5
    dx, dy = dx / norm, dy / norm
    tx, ty = tip
    bx, by = tx - dx * 9, ty - dy * 9
    points = f"{_f(tx)},{_f(ty)} {_f(bx - dy * 4)},{_f(by + dx * 4)} {_f(bx + dy * 4)},{_f(by - dx * 4)}"
    for k, line in enumerate(e.lines):
        texts.append(
            f'<text text-anchor="start" x="{_f(lx)}" y="{_f(ly + k * _LINE)}" font-family="{_FONT}" '
            f'font-size="{_f(_LABEL_FONT)}" fill={quoteattr(color)} stroke="white" stroke-width="3" '
            f'paint-order="stroke">{escape(line)}</text>'
        )
    return [
        *head,
        f'<path fill="none" stroke="{color}"{extra} d="{d}"/>',
        f'<polygon fill="{color}" stroke="{color}" points="{points}"/>',
        *texts,
        "</g>",
    ]


__all__ = ["draw"]
