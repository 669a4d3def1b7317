"""The budget registry: every bound of a run, by name, in one place.

A :class:`Budget` says how much of it a run has used (its counter), how a person reads it (its
words, for salvage's prompt and ``limit_reached``), and where its cap comes from. Everything
else is derived from it: the ``within_*`` guard the table's rows test, the answer to "which
budget ended this run" (the budget of the first bounded row that could not fire), salvage's
wording, and the names ``bounded_by`` may use, which ``verify`` checks.

Budgets that may bound a row (``cycle=True``) are *enforced*: each time a row bounded by one
fires, the engine charges it (``RunState.charges``), and once the charges reach the cap the
row cannot fire, whatever its guards say. So a machine whose every cycle crosses a bounded row
terminates, even if a user's guard always says yes.

Scopes:

- ``"run"``: one counter for the whole run, capped by the root agent's :class:`Limits`;
- ``"turn"``: the run-wide counter is capped by the root's limits, and the counter since the
  active agent took over is capped by that agent's own ``limits=`` (when it has some);
- ``"pass"``: capped by the active agent's limits, and its charges start again whenever a
  run-wide cycle budget is charged (retries are counted per pass through ``reason``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from operator import attrgetter, le, lt
from types import FunctionType
from typing import Any, Literal

from ..data.errors import MachineError
from ..data.run_state import RunState

Guard = Callable[[RunState], bool]
Scope = Literal["run", "turn", "pass"]


@dataclass(frozen=True, slots=True, eq=False)
class Budget:
    """One bound of a run (see the module docstring).

    ``name`` is the :class:`~loopwright.Limits` field holding its cap; a budget of a user's
    extension that Limits has no field for gives its cap as ``limit``. ``used`` reads the
    counter from the run state (default, for cycle budgets: the engine's own charges).
    ``room`` replaces the usual ``used < cap`` test where a budget needs another (time).
    """

    name: str
    words: str
    """How salvage names it: ``"steps (max_iterations={value})"``."""
    guard_name: str
    """The name of the derived guard, as rows, logs and diagrams show it."""
    used: Callable[[RunState], float] | None = None
    cycle: bool = False
    scope: Scope = "run"
    limit: int | None = None
    inclusive: bool = False
    """Room while ``used <= cap`` (the counter includes the step being decided)."""
    room: Callable[[RunState], bool] | None = None
    guard: Guard = field(init=False, repr=False)
    spent: Guard = field(init=False, repr=False)
    """:meth:`charged_out` as a small function specialised to the budget's scope (a compiled
    table calls it each time it tries a row the budget bounds)."""

    def __post_init__(self) -> None:
        if self.used is None:
            name = self.name
            object.__setattr__(self, "used", lambda rs: rs.charges.get(name, 0))
        object.__setattr__(self, "guard", _guard_for(self))
        object.__setattr__(self, "spent", _spent_for(self))

    def counter(self, rs: RunState) -> float:
        assert self.used is not None
        return self.used(rs)

    def cap(self, rs: RunState) -> Any:
        """The cap in force (None: no cap): the active agent's for a pass budget, else the
        root's (the engine charges rows against this)."""
        limits = (rs.turn_limits or rs.limits) if self.scope == "pass" else rs.limits
        return getattr(limits, self.name, self.limit)

    def charged_out(self, rs: RunState) -> bool:
        """The engine's own count of rows bounded by this budget has reached its cap."""
        return self.spent(rs)

    def binding(self, rs: RunState) -> tuple[float, Any]:
        """(used, cap) of the bound that binds now: for a turn budget whose active agent has
        its own cap and has used it up, the turn's count and that cap; else the run's."""
        used, own = self.counter(rs), rs.turn_limits if self.scope == "turn" else None
        own_cap = getattr(own, self.name, None) if own is not None else None
        if own_cap is not None and used - rs.turn_start.get(self.name, 0) >= own_cap:
            return used - rs.turn_start.get(self.name, 0), own_cap
        return used, self.cap(rs)

    def describe(self, rs: RunState) -> str:
        return self.words.format(value=self.binding(rs)[1])


def _spent_for(budget: Budget) -> Guard:
    """:meth:`Budget.charged_out` of ``budget``: its charges have reached the cap in force
    (:meth:`Budget.cap`: the active agent's for a pass budget, else the root's)."""
    name, limit = budget.name, budget.limit

    def run_spent(rs: RunState) -> bool:
        cap: Any = getattr(rs.limits, name, limit)  # (a cycle budget always has a cap)
        return bool(rs.charges.get(name, 0) >= cap)

    def pass_spent(rs: RunState) -> bool:
        cap: Any = getattr(rs.turn_limits or rs.limits, name, limit)
        return bool(rs.charges.get(name, 0) >= cap)

    return pass_spent if budget.scope == "pass" else run_spent


def _guard_for(budget: Budget) -> Guard:
    """The ``within_*`` guard of ``budget``: a small function named ``budget.guard_name``,
    specialised to the budget's scope (it runs at every pass through decide)."""
    name, used, limit, room = budget.name, budget.used, budget.limit, budget.room
    assert used is not None
    inclusive = budget.inclusive

    fits = le if inclusive else lt  # (count, cap)

    def run_guard(rs: RunState) -> bool:
        cap = getattr(rs.limits, name, limit)
        return cap is None or fits(used(rs), cap)  # an uncapped budget is not even counted

    def pass_guard(rs: RunState) -> bool:
        cap = getattr(rs.turn_limits or rs.limits, name, limit)
        return cap is None or fits(used(rs), cap)

    def turn_guard(rs: RunState) -> bool:
        cap = getattr(rs.limits, name, limit)
        own = rs.turn_limits
        if own is None:
            return cap is None or fits(used(rs), cap)
        count = used(rs)
        if cap is not None and not fits(count, cap):
            return False
        own_cap = getattr(own, name, None)
        return own_cap is None or count - rs.turn_start.get(name, 0) < own_cap

    scoped = {"run": run_guard, "pass": pass_guard, "turn": turn_guard}
    guard = _copy_of(room) if room is not None else scoped[budget.scope]
    guard.__name__ = guard.__qualname__ = budget.guard_name
    guard.__doc__ = f"Room left in the {name} budget ({budget.words.format(value='cap')})."
    guard.budget = name  # type: ignore[attr-defined]
    return guard


def _copy_of(room: Callable[[RunState], bool]) -> Guard:
    """A budget's own ``room`` test as its guard: a copy of the function (its code, globals,
    defaults and closure; no wrapper calling it), so naming the guard leaves ``room`` as it was."""
    if not isinstance(room, FunctionType):
        return lambda rs: room(rs)
    copy = FunctionType(room.__code__, room.__globals__, room.__name__, room.__defaults__, room.__closure__)
    copy.__kwdefaults__ = room.__kwdefaults__
    return copy


def budget_of(guard: Callable[..., Any]) -> str | None:
    """The budget a guard tests (None for guards that test something else)."""
    return getattr(guard, "budget", None)


def budget_spent_by(guard: Callable[..., Any]) -> str | None:
    """The budget a guard says is spent when it holds (``request_over_token_budget``: the
    token budget), or None."""
    return getattr(guard, "spends", None)


def _retries_made(rs: RunState) -> float:
    return rs.attempt - 1


def _cost_spent(rs: RunState) -> float:
    """The run's cost so far in US dollars (a Decimal: compared with the cap exactly); a run
    whose cost is unknown (a step whose model has no price) has spent any cost budget."""
    usage = rs.usage
    cost = usage.cost_usd
    if cost is None:
        return 0.0 if usage.total_tokens == 0 and usage.requests == 0 else float("inf")
    return cost  # type: ignore[return-value]  # (a Decimal: compared with a float cap exactly)


def _cost_room(rs: RunState) -> bool:
    cap = rs.limits.max_cost_usd
    return cap is None or _cost_spent(rs) < Decimal(str(cap))  # (the cap as written: 0.02, not the float's 0.0200...04)


def _time_left(rs: RunState) -> bool:
    return not rs.deadline_hit


def _timeout(rs: RunState) -> float:
    return rs.limits.timeout_s or 0.0


ITERATIONS = Budget(
    "max_iterations",
    "steps (max_iterations={value})",
    "within_iteration_budget",
    used=attrgetter("iteration"),
    cycle=True,
    scope="turn",
)
RETRIES = Budget(
    "max_model_retries",
    "retries of a failed model call (max_model_retries={value})",
    "retries_left",
    used=_retries_made,
    cycle=True,
    scope="pass",
)
TOOL_CALLS = Budget(
    "max_tool_calls", "tool calls (max_tool_calls={value})", "within_tool_call_budget",
    used=attrgetter("tool_calls_made"), scope="turn",
)  # fmt: skip
TOKENS = Budget(
    "max_total_tokens", "tokens (max_total_tokens={value})", "within_token_budget",
    used=attrgetter("usage.total_tokens"), scope="turn",
)  # fmt: skip
COST = Budget(
    "max_cost_usd", "money (max_cost_usd=${value})", "within_cost_budget", used=_cost_spent, room=_cost_room,
)  # fmt: skip
FALLBACKS = Budget(
    "max_fallbacks",
    "switches to a fallback model (max_fallbacks={value})",
    "fallback_left",
    cycle=True,
)
TIME = Budget("timeout_s", "time (timeout_s={value})", "within_time_budget", used=_timeout, room=_time_left)

CORE_BUDGETS: tuple[Budget, ...] = (ITERATIONS, RETRIES, FALLBACKS, TOOL_CALLS, TOKENS, COST, TIME)
"""The core loop's budgets. Features register theirs in their :class:`~loopwright.table.machine.Extension`."""

TURN_BUDGETS: tuple[Budget, ...] = tuple(b for b in CORE_BUDGETS if b.scope == "turn")


def start_turn(rs: RunState, own_limits: Any) -> None:
    """A new agent takes over: its own limits (None: only the run's) bound its turn from now."""
    rs.turn_limits = own_limits
    rs.turn_start = {b.name: b.counter(rs) for b in TURN_BUDGETS} if own_limits is not None else {}


def registry(budgets: Iterable[Budget]) -> dict[str, Budget]:
    """Budgets by name; two budgets of one name are a configuration error."""
    found: dict[str, Budget] = {}
    for budget in budgets:
        if budget.name in found and found[budget.name] is not budget:
            raise MachineError(f"two budgets are named {budget.name!r}; give the extension's budget another name")
        found[budget.name] = budget
    return found
