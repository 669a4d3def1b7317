"""Static verification of a transition table: every run ends, no run gets stuck.

:func:`verify` checks five rules and returns a :class:`Report` (``loopwright check module:agent``
prints it and exits 1 on any violation):

1. every state is reachable from the initial state;
2. every working (non-terminal) state can reach a terminal;
3. every cycle passes through a bounded edge: with the bounded edges removed, what is left is
   acyclic, so every run terminates by construction (each bounded edge's budget is finite);
4. every working state ends in exactly one fallback row (a row with no guards), so some row
   always matches and no run can get stuck;
5. every name in the table means something: states, guards (named functions, or names that
   resolve against :mod:`loopwright.guards` and the guards you pass), budgets of bounded edges
   (fields of :class:`~loopwright.Limits`); a bounded edge has a guard that can stop it; a
   terminal has no rows.

It works on a built :class:`~loopwright.machine.LoopMachine` (or an Agent: the machine it
runs on) and on raw rows that no LoopMachine would accept (``verify(rows, states=...)``), so a
broken table gets the whole report, not only the first error.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from . import guards as _guards
from .agent import Agent
from .errors import MachineError
from .features import machine_for
from .machine import CORE, LoopMachine
from .run_state import RunState
from .stage import TERMINALS, Stage

Guard: TypeAlias = Callable[[RunState], bool]
GuardRef: TypeAlias = "Guard | str"
"""A guard in a user table: the function, or its name."""

BUDGETS: tuple[str, ...] = ("max_iterations", "max_model_retries", "max_transfers", "max_suspensions")
"""The budgets that may bound a row when a table names no registry (raw rows)."""
BUILTIN_GUARDS: dict[str, Guard] = dict(_guards.GUARDS)
"""The guards of :mod:`loopwright.guards`, by name: a user table may name them by string."""


class RowLike(Protocol):
    """What verification reads of a row: a :class:`~loopwright.Row`, or a
    :class:`~loopwright.extend.Rule` whose guards may be names."""

    @property
    def source(self) -> str: ...
    @property
    def dest(self) -> str: ...
    @property
    def guards(self) -> tuple[GuardRef, ...]: ...
    @property
    def bounded_by(self) -> str | None: ...


RULES: dict[int, str] = {
    1: "every state is reachable from {initial}",
    2: "every working state can reach a terminal ({terminals})",
    3: "every cycle passes through a bounded edge, so every run terminates",
    4: "every working state ends in one fallback row, so no run gets stuck",
    5: "every state, guard and budget the table names exists",
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``rule`` (1-5), a short ``kind``, the ``states`` and ``rows`` at fault,
    and a ``message`` that says what is wrong and what to do."""

    rule: int
    kind: str
    message: str
    states: tuple[str, ...] = ()
    rows: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    """What :func:`verify` found. ``ok`` when there is no violation; ``str(report)`` reads as
    the ``loopwright check`` output."""

    machine: str
    initial: str
    terminals: tuple[str, ...]
    states: int
    rows: int
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    def broken(self, rule: int) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.rule == rule)

    def __str__(self) -> str:
        lines = [f"machine {self.machine!r}: {self.states} states, {self.rows} rows"]
        for rule, text in RULES.items():
            found = self.broken(rule)
            title = text.format(initial=self.initial, terminals=", ".join(self.terminals) or "none")
            lines.append(f"  {'FAIL' if found else 'ok  '} {rule}. {title}")
            lines += [f"         - {v.message}" for v in found]
        n = len(self.violations)
        lines.append("no violations: every run of this machine ends" if not n else f"{n} violation{'s' * (n > 1)}")
        return "\n".join(lines)


# ------------------------------------------------------------------ guard names


def guard_name(ref: GuardRef) -> str:
    return ref if isinstance(ref, str) else str(getattr(ref, "__name__", repr(ref)))


def guard_problem(ref: GuardRef, known: Mapping[str, Guard]) -> str | None:
    """Why ``ref`` is not a usable guard (None when it is). ``known``: the names a string may
    take (loopwright's guards and the user's)."""
    if isinstance(ref, str):
        if ref in known:
            return None
        close = difflib.get_close_matches(ref, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"names guard {ref!r}, which is not a guard{hint}: define `def {ref}(rs: RunState) -> bool` and pass "
            f"guards={{{ref!r}: {ref}}}, or use one of loopwright.guards"
        )
    if not callable(ref) or getattr(ref, "__name__", "<lambda>") == "<lambda>":
        return (
            f"has guard {ref!r}: guards are named functions (def has_x(rs) -> bool) so logs and diagrams can name them"
        )
    return None


def resolve_guard(ref: GuardRef, known: Mapping[str, Guard], where: str) -> Guard:
    """The guard function ``ref`` stands for; MachineError naming ``where`` when there is none."""
    problem = guard_problem(ref, known)
    if problem is not None:
        raise MachineError(f"{where} {problem}")
    return known[ref] if isinstance(ref, str) else ref


# ------------------------------------------------------------------ verification


def describe_row(row: RowLike) -> str:
    label = " & ".join(guard_name(g) for g in row.guards) or "else"
    bound = f" [bounded: {row.bounded_by}]" if row.bounded_by else ""
    return f"{row.source} -> {row.dest} ({label}){bound}"


def verify(
    target: Agent | LoopMachine | Sequence[RowLike] | None = None,
    *,
    states: Iterable[str] | None = None,
    terminals: Iterable[str] = TERMINALS,
    initial: str = Stage.START,
    guards: Mapping[str, Guard] | None = None,
    name: str = "table",
) -> Report:
    """Check the five rules (module docstring) for an Agent's machine, a LoopMachine, or raw
    ``rows`` (with ``states``, ``terminals``, ``initial``; ``guards`` resolves guard names).
    With no target: the built-in plain loop."""
    if target is None:
        target = CORE
    if isinstance(target, Agent):
        target = machine_for(target)
    budgets: tuple[str, ...] = BUDGETS
    if isinstance(target, LoopMachine):
        rows: Sequence[RowLike] = target.rows
        states, terminals, initial, name = target.states, target.terminals, target.initial, target.name
        budgets = tuple(b.name for b in target.budgets.values() if b.cycle)
        guards = {**target.guards, **(guards or {})}
    else:
        rows = list(target)
    terminal_set = {str(t) for t in terminals}
    if states is None:  # the states the rows name, in Stage order, then any others
        named = {end for row in rows for end in (str(row.source), str(row.dest))} | {str(initial)}
        states = [s for s in Stage if s in named] + sorted(named - set(Stage))
    state_list = list(dict.fromkeys(str(s) for s in states))
    found = _check(rows, state_list, terminal_set, str(initial), {**BUILTIN_GUARDS, **(guards or {})}, budgets)
    return Report(
        machine=name,
        initial=str(initial),
        terminals=tuple(s for s in state_list if s in terminal_set) + tuple(sorted(terminal_set - set(state_list))),
        states=len(state_list),
        rows=len(rows),
        violations=tuple(sorted(found, key=lambda v: v.rule)),
    )


def _check(
    rows: Sequence[RowLike],
    states: list[str],
    terminals: set[str],
    initial: str,
    known: Mapping[str, Guard],
    budgets: tuple[str, ...],
) -> list[Violation]:
    out: list[Violation] = []
    state_set = set(states)
    working = [s for s in states if s not in terminals]
    by_source: dict[str, list[RowLike]] = {}
    for row in rows:
        by_source.setdefault(str(row.source), []).append(row)

    # 5. names
    if initial not in state_set:
        out.append(
            Violation(5, "unknown_state", f"initial state {initial!r} is not a state; add it to states=", (initial,))
        )
    for t in sorted(terminals - state_set):
        out.append(Violation(5, "unknown_state", f"terminal {t!r} is not a state; add it to states=", (t,)))
    for row in rows:
        text = describe_row(row)
        for end in dict.fromkeys((str(row.source), str(row.dest))):
            if end not in state_set:
                out.append(
                    Violation(
                        5,
                        "unknown_state",
                        f"row {text} names state {end!r}, which is not a state; add it to states=",
                        (end,),
                        (text,),
                    )
                )
        for ref in row.guards:
            problem = guard_problem(ref, known)
            if problem is not None:
                out.append(Violation(5, "unknown_guard", f"row {text} {problem}", (str(row.source),), (text,)))
        if row.bounded_by is not None:
            if row.bounded_by not in budgets:
                out.append(
                    Violation(
                        5,
                        "unknown_budget",
                        f"row {text} is bounded by {row.bounded_by!r}, which is not a budget; use one of "
                        f"{', '.join(budgets)}",
                        (str(row.source),),
                        (text,),
                    )
                )
            if not row.guards:
                out.append(
                    Violation(
                        5,
                        "unguarded_bound",
                        f"row {text} is bounded by {row.bounded_by!r} but has no guard, so nothing stops it; add the "
                        f"guard that tests {row.bounded_by} (e.g. within_iteration_budget for max_iterations)",
                        (str(row.source),),
                        (text,),
                    )
                )
        if str(row.source) in terminals:
            out.append(
                Violation(
                    5,
                    "terminal_has_rows",
                    f"row {text} leaves terminal state {row.source!r}; a terminal has no outgoing rows: remove the row "
                    "or make the state a working state",
                    (str(row.source),),
                    (text,),
                )
            )

    # 4. fallback rows
    for state in working:
        out_rows = by_source.get(state, [])
        fallbacks = [i for i, r in enumerate(out_rows) if not r.guards]
        if not out_rows:
            out.append(
                Violation(
                    4,
                    "no_rows",
                    f"state {state!r} has no rows: a run that enters it is stuck; add a fallback row {state} -> ... "
                    "(a row with no guards), or make it a terminal",
                    (state,),
                )
            )
        elif not fallbacks:
            last = describe_row(out_rows[-1])
            out.append(
                Violation(
                    4,
                    "no_fallback",
                    f"state {state!r} has no fallback row: when none of its guards holds, a run is stuck there; add a "
                    f"last row {state} -> ... with no guards (after {last})",
                    (state,),
                    tuple(describe_row(r) for r in out_rows),
                )
            )
        else:
            if len(fallbacks) > 1 or fallbacks[0] != len(out_rows) - 1:
                dead = tuple(describe_row(r) for r in out_rows[fallbacks[0] + 1 :])
                out.append(
                    Violation(
                        4,
                        "rows_after_fallback",
                        f"state {state!r} has rows after its fallback row {describe_row(out_rows[fallbacks[0]])}, "
                        f"which can never fire: {'; '.join(dead)}; move the fallback last",
                        (state,),
                        dead,
                    )
                )

    edges = [(str(r.source), str(r.dest)) for r in rows if str(r.source) in state_set and str(r.dest) in state_set]
    succ: dict[str, list[str]] = {s: [] for s in states}
    for a, b in edges:
        if b not in succ[a]:
            succ[a].append(b)

    # 1. reachability from the initial state
    if initial in state_set:
        seen = _reach(initial, succ)
        unreachable = [s for s in states if s not in seen]
        if unreachable:
            names = ", ".join(unreachable)
            out.append(
                Violation(
                    1,
                    "unreachable",
                    f"state{'s' * (len(unreachable) > 1)} {names} cannot be reached from {initial!r}: no path of rows "
                    "leads there; add a row into it from a reachable state, or remove it and its rows",
                    tuple(unreachable),
                )
            )

    # 2. every working state can reach a terminal
    pred: dict[str, list[str]] = {s: [] for s in states}
    for a, b in edges:
        pred[b].append(a)
    can_end: set[str] = set()
    for t in terminals & state_set:
        can_end |= _reach(t, pred)
    stuck = [s for s in working if s not in can_end]
    if stuck:
        names = ", ".join(stuck)
        out.append(
            Violation(
                2,
                "dead_end",
                f"state{'s' * (len(stuck) > 1)} {names} cannot reach a terminal ({', '.join(sorted(terminals))}): "
                "a run "
                "that enters them never ends; add a row from them toward a terminal (e.g. -> cancelled if "
                "cancel_requested, or a fallback -> done)",
                tuple(stuck),
            )
        )

    # 3. with the bounded edges removed, the graph is acyclic
    free: dict[str, list[tuple[str, RowLike]]] = {s: [] for s in states}
    for r in rows:
        a, b = str(r.source), str(r.dest)
        if r.bounded_by is None and a in state_set and b in state_set:
            free[a].append((b, r))
    for cycle in _cycles(states, free):
        path = " -> ".join([*(str(r.source) for r in cycle), str(cycle[0].source)])
        out.append(
            Violation(
                3,
                "unbounded_cycle",
                f"cycle {path} has no bounded edge, so a run could go round it forever; bound one of its rows "
                f"(Row(..., bounded_by='max_iterations') with a guard that tests that budget, e.g. "
                f"within_iteration_budget) or break the cycle. Rows: {'; '.join(describe_row(r) for r in cycle)}",
                tuple(dict.fromkeys(str(r.source) for r in cycle)),
                tuple(describe_row(r) for r in cycle),
            )
        )
    return out


def _reach(start: str, succ: Mapping[str, list[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in succ.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _cycles(states: list[str], free: Mapping[str, list[tuple[str, RowLike]]]) -> list[list[RowLike]]:
    """One cycle of rows for each strongly connected part of the unbounded graph that has one
    (Tarjan's algorithm, iterative; states in table order so reports are stable)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    parts: list[list[str]] = []
    for root in states:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            nexts = free[node]
            if i < len(nexts):
                work.append((node, i + 1))
                nxt = nexts[i][0]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                parts.append(part)
    order = {s: i for i, s in enumerate(states)}
    cycles = []
    for part in parts:
        members = set(part)
        first = min(part, key=order.__getitem__)
        if len(part) == 1 and not any(dest == first for dest, _ in free[first]):
            continue
        cycles.append(_cycle_through(first, members, free))
    cycles.sort(key=lambda c: order[str(c[0].source)])
    return cycles


def _cycle_through(first: str, members: set[str], free: Mapping[str, list[tuple[str, RowLike]]]) -> list[RowLike]:
    """A shortest cycle of rows from ``first`` back to it inside one strongly connected part."""
    back: dict[str, tuple[str, RowLike]] = {}
    frontier = [first]
    while frontier:
        nxt_frontier: list[str] = []
        for node in frontier:
            for dest, row in free[node]:
                if dest not in members or dest in back:
                    continue
                back[dest] = (node, row)
                if dest == first:
                    nxt_frontier = []
                    break
                nxt_frontier.append(dest)
            if first in back:
                break
        frontier = nxt_frontier
    path: list[RowLike] = []
    node = first
    while True:
        prev, row = back[node]
        path.append(row)
        node = prev
        if node == first:
            break
    return path[::-1]


# ------------------------------------------------------------------ the `check` command


def load_target(target: str) -> Agent | LoopMachine:
    """Import ``module:attr`` (attr may be dotted) naming an Agent or a LoopMachine, or a
    function of no arguments that makes one. Raises LookupError with a message for the user
    when it cannot."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise LookupError(f"{target!r} is not module:attr; name the object, e.g. myapp.agents:support")
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise LookupError(
            f"cannot import module {module_name!r} ({exc}); run from your project's folder or install it"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LookupError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, Agent | LoopMachine | type):
        try:  # a factory: build the agent the way the app does
            obj = obj()
        except TypeError as exc:
            raise LookupError(f"{target} is a function that needs arguments ({exc}); name an Agent instead") from None
    if not isinstance(obj, Agent | LoopMachine):
        raise LookupError(f"{target} is a {type(obj).__name__}; name an Agent, a LoopMachine or a function making one")
    return obj


def cli_check(target: str) -> int:
    """``loopwright check module:attr``: print the verification report of the Agent's machine
    (or the LoopMachine) named by ``target``. Returns 0 when it holds every rule, 1 on any
    violation (or when the machine cannot even be built: its MachineError is printed), 2 when
    ``target`` names nothing usable (the message says why)."""
    try:
        obj = load_target(target)
    except LookupError as exc:
        print(f"loopwright check: {exc.args[0]}", file=sys.stderr)
        return 2
    except MachineError as exc:
        print(f"loopwright check: {target}: the machine cannot be built: {exc}", file=sys.stderr)
        return 1
    report = verify(obj)
    print(report)
    return 0 if report.ok else 1
