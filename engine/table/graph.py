"""Graph algorithms the rules use, on any graph of named states: what is reachable, the strongly
connected parts (Tarjan's, iterative), and a shortest cycle through each part. Generic over the
edges' payload (a table's rows), so it knows nothing of rows or machines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

R = TypeVar("R")
"""What an edge carries (the rules: the row it comes from)."""


def reach(start: str, succ: Mapping[str, Sequence[str]]) -> set[str]:
    """Every state reachable from ``start`` (itself included) along ``succ``."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in succ.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(states: Sequence[str], edges: Iterable[tuple[str, str, R]]) -> list[list[R]]:
    """One shortest cycle (as its edges' payloads, from its first state) for each strongly
    connected part of the graph that has one, in the order of ``states`` of each cycle's first
    state; ``edges`` are ``(source, dest, payload)`` between known states, in the order tried."""
    free: dict[str, list[tuple[str, R]]] = {s: [] for s in states}
    for a, b, payload in edges:
        free[a].append((b, payload))
    order = {s: i for i, s in enumerate(states)}
    found: list[tuple[int, list[R]]] = []
    for part in strongly_connected(states, {s: [d for d, _ in nexts] for s, nexts in free.items()}):
        first = min(part, key=order.__getitem__)
        if len(part) > 1 or any(dest == first for dest, _ in free[first]):
            found.append((order[first], _shortest_cycle(first, set(part), free)))
    found.sort(key=lambda f: f[0])
    return [cycle for _, cycle in found]


def strongly_connected(states: Sequence[str], succ: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected parts of the graph ``succ`` (Tarjan's algorithm, iterative)."""
    tarjan = _Tarjan(succ)
    for root in states:
        if root not in tarjan.index:
            tarjan.visit(root)
    return tarjan.parts


@dataclass(slots=True)
class _Tarjan:
    """The state of one run of Tarjan's algorithm over ``succ``."""

    succ: Mapping[str, Sequence[str]]
    index: dict[str, int] = field(default_factory=dict)
    low: dict[str, int] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)
    on_stack: set[str] = field(default_factory=set)
    parts: list[list[str]] = field(default_factory=list)

    def visit(self, root: str) -> None:
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                self._enter(node)
            nexts = self.succ[node]
            if i < len(nexts):
                work.append((node, i + 1))
                self._follow(node, nexts[i], work)
            else:
                self._leave(node, work[-1][0] if work else None)

    def _enter(self, node: str) -> None:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)

    def _follow(self, node: str, nxt: str, work: list[tuple[str, int]]) -> None:
        if nxt not in self.index:
            work.append((nxt, 0))
        elif nxt in self.on_stack:
            self.low[node] = min(self.low[node], self.index[nxt])

    def _leave(self, node: str, parent: str | None) -> None:
        if parent is not None:
            self.low[parent] = min(self.low[parent], self.low[node])
        if self.low[node] == self.index[node]:
            self.parts.append(self._pop_part(node))

    def _pop_part(self, node: str) -> list[str]:
        part: list[str] = []
        while not part or part[-1] != node:
            member = self.stack.pop()
            self.on_stack.discard(member)
            part.append(member)
        return part


def _shortest_cycle(first: str, members: set[str], free: Mapping[str, Sequence[tuple[str, R]]]) -> list[R]:
    """A shortest cycle of rows from ``first`` back to it inside one strongly connected part."""
    back = _back_links(first, members, free)
    path: list[R] = []
    node = first
    while not path or node != first:
        node, row = back[node]
        path.append(row)
    return path[::-1]


def _back_links(first: str, members: set[str], free: Mapping[str, Sequence[tuple[str, R]]]) -> dict[str, tuple[str, R]]:
    """Breadth-first from ``first`` inside ``members``: for each state reached, the state and
    row it was reached from, until ``first`` itself is reached again."""
    back: dict[str, tuple[str, R]] = {}
    frontier = [first]
    while frontier and first not in back:
        frontier = _expand(frontier, first, members, free, back)
    return back


def _expand(
    frontier: list[str],
    first: str,
    members: set[str],
    free: Mapping[str, Sequence[tuple[str, R]]],
    back: dict[str, tuple[str, R]],
) -> list[str]:
    nxt: list[str] = []
    for node in frontier:
        for dest, row in free[node]:
            if dest not in members or dest in back:
                continue
            back[dest] = (node, row)
            if dest == first:
                return []
            nxt.append(dest)
    return nxt
