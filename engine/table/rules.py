"""The five rules of a transition table, one function each: the one checker behind
:func:`loopwright.machines.verify` and the machine's own check when it is built.

A low layer: it knows rows only by :class:`RowLike` (source, dest, guards, bounded_by) and
takes the guard names and budget names it should accept in the :class:`Table`, so it imports
nothing of the engine above it.

1. :func:`reachable`: every state is reachable from the initial state;
2. :func:`can_end`: every working (non-terminal) state can reach a terminal;
3. :func:`bounded_cycles`: every cycle passes through a bounded row: with the bounded rows
   removed, what is left is acyclic, so every run terminates by construction;
4. :func:`fallbacks`: every working state ends in exactly one fallback row (no guards, no
   bound), so some row always matches and no run can get stuck. A bounded row is skipped once
   its budget is spent, so it is never the fallback;
5. :func:`names`: every state, guard and budget the table names exists, and a terminal has
   no rows;
6. :func:`held_calls_wait` (tables with waiting states only): every way out of ``act`` meets
   the row that sends held calls to wait (``decide -> suspended``, guarded by
   ``has_pending_requests``) before the loop goes on to another core stage.

:func:`check` runs all six in that order; :func:`structural` runs only 4 and 5, what a
machine must satisfy before it can be built at all (rules 1-3 are about the graph as a whole:
``loopwright check`` reports them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ..data.stage import Stage
from .graph import cycles, reach
from .table_spec import RULES as RULES
from .table_spec import G as G
from .table_spec import GuardFn as GuardFn
from .table_spec import GuardRef as GuardRef
from .table_spec import RowLike as RowLike
from .table_spec import Table as Table
from .table_spec import Violation as Violation
from .table_spec import describe_row as describe_row
from .table_spec import guard_name as guard_name
from .table_spec import guard_problem as guard_problem
from .table_spec import is_fallback as is_fallback
from .table_spec import resolve_guard as resolve_guard

# ------------------------------------------------------------------ the rules


def check(table: Table) -> list[Violation]:
    """Every rule, in rule order."""
    return [v for rule in CHECKS.values() for v in rule(table)]


def structural(table: Table) -> list[Violation]:
    """Rules 4 and 5 only: what a machine must satisfy to be built (a fallback for every
    working state, every name known)."""
    return [*fallbacks(table), *names(table)]


def reachable(table: Table) -> list[Violation]:
    """Rule 1: every state is reachable from the initial state."""
    if table.initial not in table.states:
        return []  # rule 5 reports it
    seen = reach(table.initial, _successors(table))
    unreachable = [s for s in table.states if s not in seen]
    if not unreachable:
        return []
    return [
        Violation(
            1,
            "unreachable",
            f"state{'s' * (len(unreachable) > 1)} {', '.join(unreachable)} cannot be reached from {table.initial!r}: "
            "no path of rows leads there; add a row into it from a reachable state, or remove it and its rows",
            tuple(unreachable),
        )
    ]


def can_end(table: Table) -> list[Violation]:
    """Rule 2: every working state can reach a terminal."""
    pred = _predecessors(table)
    ends: set[str] = set()
    for terminal in table.terminals.intersection(table.states):
        ends |= reach(terminal, pred)
    stuck = [s for s in table.working if s not in ends]
    if not stuck:
        return []
    return [
        Violation(
            2,
            "dead_end",
            f"state{'s' * (len(stuck) > 1)} {', '.join(stuck)} cannot reach a terminal "
            f"({', '.join(sorted(table.terminals))}): a run that enters them never ends; add a row from them toward "
            "a terminal (e.g. -> cancelled if cancel_requested, or a fallback -> done)",
            tuple(stuck),
        )
    ]


def bounded_cycles(table: Table) -> list[Violation]:
    """Rule 3: with the bounded rows removed, the graph is acyclic (one violation per
    strongly connected part that has a cycle, naming a shortest cycle through it)."""
    return [_unbounded_cycle(cycle) for cycle in _cycles(table)]


def fallbacks(table: Table) -> list[Violation]:
    """Rule 4: every working state ends in exactly one fallback row."""
    by_source = _by_source(table)
    return [v for state in table.working for v in _fallback_problems(state, by_source.get(state, []))]


def names(table: Table) -> list[Violation]:
    """Rule 5: the initial state, the terminals and every state, guard and budget a row names
    exist; no row leaves a terminal."""
    out = _unknown_ends(table)
    for row in table.rows:
        out += _row_names(table, row)
    return out


_CORE = frozenset(Stage)
HOLDS_CALLS = "has_pending_requests"
"""The guard of the row that sends a step's held calls to wait (the waiting feature's)."""


def held_calls_wait(table: Table) -> list[Violation]:
    """Rule 6 (tables with waiting states): from ``act``, every path meets a row into a waiting
    state guarded by ``has_pending_requests`` before it reaches another core stage. A state
    on act's exit (an extension's) that goes back to ``preprocess`` or ``reason`` would carry
    the run past its held calls: the held step would no longer answer the last reply, and
    resume refuses such a state."""
    if not table.waiting or Stage.ACT not in table.states:
        return []
    holders = [r for r in table.rows if str(r.dest) in table.waiting and HOLDS_CALLS in map(guard_name, r.guards)]
    if not holders:
        return []
    waits_at = {str(r.source) for r in holders}
    stop = waits_at | table.waiting | table.terminals
    by_source = _by_source(table)
    out: list[Violation] = []
    seen, todo = {str(Stage.ACT)}, [str(Stage.ACT)]
    while todo:
        state = todo.pop()
        for row in by_source.get(state, []):
            dest = str(row.dest)
            if dest in stop:
                continue
            if dest in _CORE:
                out.append(_skips_the_wait(row, holders))
            elif dest not in seen:
                seen.add(dest)
                todo.append(dest)
    return out


def _skips_the_wait(row: RowLike, holders: Sequence[RowLike]) -> Violation:
    first = holders[0]
    where = str(first.source)
    return Violation(
        6,
        "held_calls_skipped",
        f"row {describe_row(row)} takes a run from act's step of tools to {str(row.dest)!r} without passing "
        f"{describe_row(first)}: calls that act holds (waiting for an approval, a credential or a later result) "
        f"would be left behind, the held step would no longer answer the last reply, and resume would refuse the "
        f"run. End {str(row.source)!r}'s way with a row to {where!r} (the loop goes back from there once nothing "
        f"waits), or put the loop back on a state after {where!r}",
        (str(row.source),),
        (describe_row(row),),
    )


CHECKS: dict[int, Callable[[Table], list[Violation]]] = {
    1: reachable,
    2: can_end,
    3: bounded_cycles,
    4: fallbacks,
    5: names,
    6: held_calls_wait,
}
"""Each rule's function, by rule number."""


# ------------------------------------------------------------------ rule 3: the message


def _unbounded_cycle(cycle: Sequence[RowLike]) -> Violation:
    path = " -> ".join([*(str(r.source) for r in cycle), str(cycle[0].source)])
    rows = tuple(describe_row(r) for r in cycle)
    return Violation(
        3,
        "unbounded_cycle",
        f"cycle {path} has no bounded edge, so a run could go round it forever; bound one of its rows "
        f"(Row(..., bounded_by='max_iterations') with a guard that tests that budget, e.g. "
        f"within_iteration_budget) or break the cycle. Rows: {'; '.join(rows)}",
        tuple(dict.fromkeys(str(r.source) for r in cycle)),
        rows,
    )


# ------------------------------------------------------------------ rule 4: one state


def _fallback_problems(state: str, rows: Sequence[RowLike]) -> list[Violation]:
    if not rows:
        return [
            Violation(
                4,
                "no_rows",
                f"state {state!r} has no rows: a run that enters it is stuck; add a fallback row {state} -> ... "
                "(a row with no guards), or make it a terminal",
                (state,),
            )
        ]
    first = next((i for i, r in enumerate(rows) if is_fallback(r)), None)
    if first is None:
        return [_missing_fallback(state, rows)]
    if first == len(rows) - 1:
        return []
    dead = tuple(describe_row(r) for r in rows[first + 1 :])
    return [
        Violation(
            4,
            "rows_after_fallback",
            f"state {state!r} has rows after its fallback row {describe_row(rows[first])}, which can never fire: "
            f"{'; '.join(dead)}; move the fallback last",
            (state,),
            dead,
        )
    ]


def _missing_fallback(state: str, rows: Sequence[RowLike]) -> Violation:
    last = rows[-1]
    text = describe_row(last)
    if last.bounded_by is not None and not last.guards:
        return Violation(
            4,
            "unguarded_bound",
            f"row {text} is bounded by {last.bounded_by!r} but has no guard: a bounded row is skipped once its "
            "budget is spent, so it cannot be the fallback; add a guard (or a fallback row after it)",
            (state,),
            (text,),
        )
    return Violation(
        4,
        "no_fallback",
        f"state {state!r} has no fallback row: when none of its guards holds, a run is stuck there; add a "
        f"last row {state} -> ... with no guards (after {text})",
        (state,),
        tuple(describe_row(r) for r in rows),
    )


# ------------------------------------------------------------------ rule 5: names


def _unknown_ends(table: Table) -> list[Violation]:
    out: list[Violation] = []
    if table.initial not in table.states:
        out.append(
            Violation(
                5,
                "unknown_state",
                f"initial state {table.initial!r} is not a state; add it to states=",
                (table.initial,),
            )
        )
    for t in sorted(table.terminals.difference(table.states)):
        out.append(Violation(5, "unknown_state", f"terminal {t!r} is not a state; add it to states=", (t,)))
    return out


def _row_names(table: Table, row: RowLike) -> list[Violation]:
    text = describe_row(row)
    source = str(row.source)
    out = [
        Violation(
            5,
            "unknown_state",
            f"row {text} names state {end!r}, which is not a state; add it to states=",
            (end,),
            (text,),
        )
        for end in dict.fromkeys((source, str(row.dest)))
        if end not in table.states
    ]
    for problem in filter(None, (guard_problem(ref, table.guards) for ref in row.guards)):
        out.append(Violation(5, "unknown_guard", f"row {text} {problem}", (source,), (text,)))
    if row.bounded_by is not None and row.bounded_by not in table.budgets:
        out.append(
            Violation(
                5,
                "unknown_budget",
                f"row {text} is bounded by {row.bounded_by!r}, which is not a budget; {_budget_hint(table.budgets)}",
                (source,),
                (text,),
            )
        )
    if source in table.terminals:
        out.append(
            Violation(
                5,
                "terminal_has_rows",
                f"row {text} leaves terminal state {source!r}; a terminal has no outgoing rows: remove the row "
                "or make the state a working state",
                (source,),
                (text,),
            )
        )
    return out


def _budget_hint(budgets: Collection[str]) -> str:
    if not budgets:
        return "this machine has no budgets: register one, or remove the bound"
    return f"use one of {', '.join(sorted(budgets))}"


# ------------------------------------------------------------------ the graph


def _by_source(table: Table) -> dict[str, list[RowLike]]:
    by_source: dict[str, list[RowLike]] = {}
    for row in table.rows:
        by_source.setdefault(str(row.source), []).append(row)
    return by_source


def _edges(table: Table, *, unbounded: bool = False) -> list[tuple[str, str, RowLike]]:
    """The rows between known states as ``(source, dest, row)``, in table order (only the
    unbounded ones if ``unbounded``)."""
    known = set(table.states)
    edges = [(str(r.source), str(r.dest), r) for r in table.rows]
    return [e for e in edges if e[0] in known and e[1] in known and not (unbounded and e[2].bounded_by is not None)]


def _successors(table: Table) -> dict[str, list[str]]:
    succ: dict[str, list[str]] = {s: [] for s in table.states}
    for a, b, _ in _edges(table):
        if b not in succ[a]:
            succ[a].append(b)
    return succ


def _predecessors(table: Table) -> dict[str, list[str]]:
    pred: dict[str, list[str]] = {s: [] for s in table.states}
    for a, b, _ in _edges(table):
        pred[b].append(a)
    return pred


def _cycles(table: Table) -> list[list[RowLike]]:
    """One cycle of rows for each strongly connected part of the unbounded graph that has one,
    in table order of each cycle's first state (so reports are stable)."""
    return cycles(table.states, _edges(table, unbounded=True))
