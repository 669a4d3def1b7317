"""A state's rows compiled into one function: what ``LoopMachine.choose`` runs at every transition."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ..data.errors import NoTransitionError
from ..data.run_state import RunState
from .budgets import Budget
from .guards import cancel_requested, deadline_passed, has_error, has_response
from .rows import Guard, Row

_ONE_ATTRIBUTE: dict[Guard, Guard] = {
    cancel_requested: attrgetter("cancel_requested"),
    deadline_passed: attrgetter("deadline_hit"),
    has_error: attrgetter("error"),  # an ErrorInfo, a ModelResponse: pydantic models, always true
    has_response: attrgetter("response"),
}


def fast_guard(guard: Guard) -> Guard:
    """The core guards that return one attribute of the run state, as a C attrgetter (no
    Python frame: ``cancel_requested`` is tested at every transition); others as they are."""
    return _ONE_ATTRIBUTE.get(guard, guard)


def compile_chooser(
    state: str,
    entries: tuple[tuple[Row, tuple[Guard, ...], Budget | None], ...],
    rows_from: Callable[[str], tuple[Row, ...]],
) -> Callable[[RunState], Row]:
    """``choose`` for one state, compiled: its rows in order, each one ``if`` of its budget's
    room and its guards, written out as one function (no loop over rows and guards, no
    tuples unpacked: it runs at every transition). For ``decide`` of the plain loop::

        def choose_decide(rs):
            if g0_0(rs): return r0                      # decide -> cancelled if cancel_requested
            if not spent1(rs) and g1_0(rs) and ...: return r1
            ...
            return r4                                   # the fallback: no guards, no budget

    A state without a fallback that no row matches raises NoTransitionError."""
    names: dict[str, Any] = {}
    lines = ["def choose(rs):"]
    fallback = False
    for i, (row, guards, budget) in enumerate(entries):
        names[f"r{i}"] = row
        tests = []
        if budget is not None:
            names[f"spent{i}"] = budget.spent
            tests.append(f"not spent{i}(rs)")
        for j, guard in enumerate(guards):
            names[f"g{i}_{j}"] = guard
            tests.append(f"g{i}_{j}(rs)")
        if not tests:
            lines.append(f"    return r{i}")
            fallback = True
            break
        lines.append(f"    if {' and '.join(tests)}: return r{i}")
    if not fallback:

        def unmatched(rs: RunState) -> Row:
            tried = "; ".join(str(r) for r in rows_from(state)) or "none"
            raise NoTransitionError(
                f"no row out of state {state!r} matched (rows tried: {tried}); every working state "
                "must end in a fallback row with no guards"
            )

        names["unmatched"] = unmatched
        lines.append("    return unmatched(rs)")
    exec("\n".join(lines), names)  # (the code is made here from the table: names only, no values)
    chooser: Callable[[RunState], Row] = names["choose"]
    chooser.__name__ = chooser.__qualname__ = f"choose_{state}"
    return chooser
