"""rules: each rule is a function of a Table, seen broken and clean; check() runs all five, structural() 4 and 5."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright.table.rules import (
    CHECKS,
    RULES,
    GuardRef,
    Table,
    Violation,
    bounded_cycles,
    can_end,
    check,
    describe_row,
    fallbacks,
    is_fallback,
    names,
    reachable,
    structural,
)

BUDGETS = frozenset({"max_iterations", "max_model_retries"})


def ready(rs: object) -> bool:
    return True


@dataclass(frozen=True)
class R:
    """A row as the rules read it."""

    source: str
    dest: str
    guards: tuple[GuardRef, ...] = ()
    bounded_by: str | None = None


def table(*rows: R, states: str = "start work done", terminals: str = "done") -> Table:
    return Table.of(
        rows,
        states=states.split(),
        terminals=terminals.split(),
        initial="start",
        budgets=BUDGETS,
        guards={"ready": ready},
    )


CLEAN = table(R("start", "work"), R("work", "work", (ready,), "max_iterations"), R("work", "done"))


def kinds(found: list[Violation]) -> list[tuple[int, str]]:
    return [(v.rule, v.kind) for v in found]


def test_a_clean_table_passes_every_rule() -> None:
    assert check(CLEAN) == [] and structural(CLEAN) == []
    assert all(rule(CLEAN) == [] for rule in CHECKS.values())
    assert list(CHECKS) == list(RULES) == [1, 2, 3, 4, 5, 6]


def test_reachable() -> None:
    t = table(R("start", "done"), R("work", "done"))
    assert kinds(reachable(t)) == [(1, "unreachable")]
    assert reachable(t)[0].states == ("work",)
    assert reachable(CLEAN) == []


def test_can_end() -> None:
    t = table(R("start", "work"), R("work", "work", (ready,), "max_iterations"), R("work", "work"))
    (v,) = can_end(t)
    assert (v.rule, v.kind, v.states) == (2, "dead_end", ("start", "work"))
    assert can_end(CLEAN) == []


def test_bounded_cycles() -> None:
    t = table(R("start", "work"), R("work", "work", (ready,)), R("work", "done"))
    (v,) = bounded_cycles(t)
    assert (v.rule, v.kind, v.rows) == (3, "unbounded_cycle", ("work -> work (ready)",))
    assert bounded_cycles(CLEAN) == []


def test_bounded_cycles_names_one_shortest_cycle_per_strongly_connected_part() -> None:
    t = table(
        R("start", "a"),
        R("a", "b", (ready,)),
        R("a", "done"),
        R("b", "c", (ready,)),
        R("b", "a"),
        R("c", "a"),
        R("d", "d", (ready,)),
        R("d", "done"),
        states="start a b c d done",
    )
    found = bounded_cycles(t)
    assert [v.rows for v in found] == [("a -> b (ready)", "b -> a (else)"), ("d -> d (ready)",)]


def test_fallbacks() -> None:
    t = table(
        R("start", "work", (ready,)),
        R("work", "done"),
        R("work", "done", (ready,)),
        R("idle", "idle", bounded_by="max_iterations"),
        states="start work idle lost done",
    )
    assert [(v.kind, v.states) for v in fallbacks(t)] == [
        ("no_fallback", ("start",)),
        ("rows_after_fallback", ("work",)),
        ("unguarded_bound", ("idle",)),
        ("no_rows", ("lost",)),
    ]
    assert fallbacks(CLEAN) == []


def test_a_bounded_row_is_never_the_fallback() -> None:
    bounded = R("work", "work", bounded_by="max_iterations")
    assert not is_fallback(bounded) and is_fallback(R("work", "done"))
    assert fallbacks(table(R("start", "work"), bounded, R("work", "done"))) == []
    (v,) = fallbacks(table(R("start", "work"), R("work", "done", (ready,)), bounded))
    assert v.message == (
        "row work -> work (else) [bounded: max_iterations] is bounded by 'max_iterations' but has no guard: a bounded "
        "row is skipped once its budget is spent, so it cannot be the fallback; add a guard (or a fallback row after "
        "it)"
    )


def test_names() -> None:
    t = Table.of(
        [
            R("start", "work", ("ready", "has_tool_cals")),
            R("work", "nowhere", (ready,), "max_loops"),
            R("work", "done"),
            R("done", "work"),
        ],
        states=["start", "work", "done"],
        terminals=["done", "stopped"],
        initial="begin",
        budgets=BUDGETS,
        guards={"ready": ready, "has_tool_calls": ready},
    )
    assert [(v.kind, v.states) for v in names(t)] == [
        ("unknown_state", ("begin",)),
        ("unknown_state", ("stopped",)),
        ("unknown_guard", ("start",)),
        ("unknown_state", ("nowhere",)),
        ("unknown_budget", ("work",)),
        ("terminal_has_rows", ("done",)),
    ]
    assert "(did you mean 'has_tool_calls'?)" in names(t)[2].message
    assert names(t)[4].message.endswith("which is not a budget; use one of max_iterations, max_model_retries")
    assert names(CLEAN) == []


def test_a_lambda_is_not_a_guard() -> None:
    (v,) = names(table(R("start", "work", (lambda rs: True,)), R("start", "done"), R("work", "done")))
    assert v.kind == "unknown_guard" and "guards are named functions" in v.message


def test_structural_reports_only_rules_4_and_5() -> None:
    t = table(
        R("start", "work"),
        R("work", "work", (ready,)),  # 3: an unbounded cycle, and 2: work never ends
        R("work", "work", (ready,), "max_loops"),  # 5: no such budget
        R("idle", "done", (ready,)),  # 1: unreachable, 4: no fallback
        states="start work idle done",
    )
    assert {v.rule for v in check(t)} == {1, 2, 3, 4, 5}
    assert kinds(structural(t)) == [(4, "no_fallback"), (4, "no_fallback"), (5, "unknown_budget")]
    assert structural(t) == [v for v in check(t) if v.rule in (4, 5)]
    assert [v.rule for v in check(t)] == sorted(v.rule for v in check(t))


def test_describe_row() -> None:
    assert (
        describe_row(R("a", "b", (ready, "named"), "max_iterations"))
        == "a -> b (ready & named) [bounded: max_iterations]"
    )
    assert describe_row(R("a", "b")) == "a -> b (else)"


# ------------------------------------------------------------------ rule 3, as a property

STATES = ("start", "a", "b", "c", "done")
_rows = st.lists(
    st.builds(
        R,
        st.sampled_from(STATES),
        st.sampled_from(STATES),
        st.sampled_from([(), (ready,)]),
        st.sampled_from([None, *sorted(BUDGETS)]),
    ),
    max_size=12,
)


def _has_cycle(rows: list[R]) -> bool:
    """The reference answer: a depth-first search for a back edge among the unbounded rows."""
    succ: dict[str, list[str]] = {s: [] for s in STATES}
    for r in rows:
        if r.bounded_by is None:
            succ[r.source].append(r.dest)
    colour = dict.fromkeys(STATES, "white")

    def visit(node: str) -> bool:
        colour[node] = "grey"
        for nxt in succ[node]:
            if colour[nxt] == "grey" or (colour[nxt] == "white" and visit(nxt)):
                return True
        colour[node] = "black"
        return False

    return any(colour[s] == "white" and visit(s) for s in STATES)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_rows, st.sampled_from([("done",), ("done", "c"), ()]))
def test_rule_3_is_reported_iff_the_unbounded_graph_has_a_cycle(rows: list[R], terminals: tuple[str, ...]) -> None:
    t = Table.of(rows, states=STATES, terminals=terminals, initial="start", budgets=BUDGETS, guards={})
    found = check(t)
    cycles = [v for v in found if v.rule == 3]
    assert bool(cycles) == _has_cycle(rows)
    by_text = {describe_row(r): r for r in rows}
    for v in cycles:  # each names a real cycle of unbounded rows
        path = [by_text[text] for text in v.rows]
        assert all(r.bounded_by is None for r in path)
        assert all(a.dest == b.source for a, b in zip(path, [*path[1:], path[0]], strict=True))
    assert {v.rule for v in structural(t)} <= {4, 5}
