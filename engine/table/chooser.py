"""A state's rows compiled into one function: what ``LoopMachine.choose`` runs at every transition.

The core guards, and the guards of run- and turn-scoped budgets, are written into the chooser
as expressions rather than called (:func:`inline`): a call is a Python frame, about a thousand
instructions, and the quiet iteration's choices test a dozen guards. Each expression is the
guard's own test, word for word (or, for a budget whose cap may be its agent's own, the test of
the usual case with the guard called otherwise), so the choice is the same; the property tests
of ``tests/table/test_machine.py`` compare every compiled chooser with the rows walked in order.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ..data.errors import NoTransitionError
from ..data.events import ToolCall
from ..data.limits import Limits
from ..data.run_state import RunState
from .budgets import COST, TIME, Budget, budget_of
from .guards import (
    TRUNCATED,
    cancel_requested,
    deadline_passed,
    has_error,
    has_response,
    has_tool_calls,
    is_final_response,
)
from .rows import Guard, Row

_ONE_ATTRIBUTE: dict[Guard, Guard] = {
    cancel_requested: attrgetter("cancel_requested"),
    deadline_passed: attrgetter("deadline_hit"),
    has_error: attrgetter("error"),  # an ErrorInfo, a ModelResponse: pydantic models, always true
    has_response: attrgetter("response"),
}

_PARTS_HAVE_CALL = "(type({p}[0]) is ToolCall if len({p}) == 1 else ToolCall in map(type, {p}))"
_INLINE: dict[Guard, str] = {
    cancel_requested: "rs.cancel_requested",
    deadline_passed: "rs.deadline_hit",
    has_error: "rs.error is not None",
    has_response: "rs.response is not None",
    has_tool_calls: f"(({{r}} := rs.response) is not None and {_PARTS_HAVE_CALL.format(p='{r}.parts')})",
    is_final_response: (
        f"(({{r}} := rs.response) is not None and {{r}}.stop_reason not in TRUNCATED and not "
        f"{_PARTS_HAVE_CALL.format(p='{r}.parts')})"
    ),
    COST.guard: "(rs.limits.max_cost_usd is None or {g}(rs))",  # (no cost budget: no frame, no Decimal)
    TIME.guard: "not rs.deadline_hit",
}
"""Guards written into a chooser: ``{r}`` a local of its own, ``{g}`` the guard itself."""
_GLOBALS: dict[str, Any] = {"ToolCall": ToolCall, "TRUNCATED": TRUNCATED}


def fast_guard(guard: Guard) -> Guard:
    """The core guards that return one attribute of the run state, as a C attrgetter (no
    Python frame); others as they are."""
    return _ONE_ATTRIBUTE.get(guard, guard)


def _cap_of(budget: Budget, limits: str, names: dict[str, Any], key: str) -> str:
    """The expression of ``getattr(limits, budget.name, budget.limit)``: an attribute read where
    ``name`` is a field of :class:`Limits` (every Limits has it), else that very getattr."""
    if budget.name in Limits.model_fields:
        return f"{limits}.{budget.name}"
    names[f"n{key}"], names[f"l{key}"] = budget.name, budget.limit
    return f"getattr({limits}, n{key}, l{key})"


def inline(guard: Guard, key: str, names: dict[str, Any], budgets: dict[str, Budget]) -> str:
    """The expression a chooser tests for ``guard`` (its truth is the guard's): the guard's own
    test written out where :data:`_INLINE` or its budget has one, else a call of the guard (as
    its C attrgetter where it reads one attribute). ``names`` gets the names it uses; ``key`` makes
    them the expression's own."""
    names[f"g{key}"] = guard
    written = _INLINE.get(guard)
    if written is not None:
        return written.format(r=f"r{key}", g=f"g{key}")
    budget = budgets.get(budget_of(guard) or "")
    if budget is not None and budget.guard is guard and budget.room is None and budget.scope in ("run", "turn"):
        names[f"u{key}"] = budget.used
        fits = "<=" if budget.inclusive else "<"
        cap = _cap_of(budget, "rs.limits", names, key)
        test = f"((c{key} := {cap}) is None or u{key}(rs) {fits} c{key})"  # (run_guard / turn_guard, written out)
        return test if budget.scope == "run" else f"({test} if rs.turn_limits is None else g{key}(rs))"
    names[f"g{key}"] = fast_guard(guard)
    return f"g{key}(rs)"


def _room(budget: Budget, key: str, names: dict[str, Any]) -> str:
    """``not budget.spent(rs)`` written out: the engine's charges of the budget are under its cap."""
    limits = "(rs.turn_limits or rs.limits)" if budget.scope == "pass" else "rs.limits"
    names[f"b{key}"] = budget.name
    return f"not (rs.charges.get(b{key}, 0) >= {_cap_of(budget, limits, names, key)})"


def compile_chooser(
    state: str,
    entries: tuple[tuple[Row, tuple[Guard, ...], Budget | None], ...],
    rows_from: Callable[[str], tuple[Row, ...]],
    budgets: dict[str, Budget] | None = None,
    *,
    written: bool = True,
) -> Callable[[RunState], Row]:
    """``choose`` for one state, compiled: its rows in order, each one ``if`` of its budget's
    room and its guards, written out as one function (no loop over rows and guards, no
    tuples unpacked: it runs at every transition). For ``decide`` of the plain loop::

        def choose_decide(rs):
            if rs.cancel_requested: return r0                # decide -> cancelled if cancel_requested
            if ((r1_0 := rs.response) is not None and ...): return r1    # decide -> done if is_final_response
            if not (rs.charges.get(b2, 0) >= rs.limits.max_iterations) and ...: return r2
            ...
            return r4                                        # the fallback: no guards, no budget

    With ``written=False`` every guard is called (the chooser before :func:`inline`: for tests).
    A state without a fallback that no row matches raises NoTransitionError."""
    names: dict[str, Any] = dict(_GLOBALS)
    known = budgets or {}
    lines = ["def choose(rs):"]
    fallback = False
    for i, (row, guards, budget) in enumerate(entries):
        names[f"r{i}"] = row
        tests = []
        if budget is not None:
            if written:
                tests.append(_room(budget, str(i), names))
            else:
                names[f"spent{i}"] = budget.spent
                tests.append(f"not spent{i}(rs)")
        for j, guard in enumerate(guards):
            key = f"{i}_{j}"
            if written:
                tests.append(inline(guard, key, names, known))
            else:
                names[f"g{key}"] = guard
                tests.append(f"g{key}(rs)")
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
