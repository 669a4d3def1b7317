"""The rows of a transition table and the core loop's own (:data:`CORE_ROWS`).

A :class:`Row` is ``source -> dest`` when every guard holds; :func:`Rule` writes one the short
way; :func:`cancellable`, :func:`detour` and :func:`abort_row` make the rows every feature
needs. The table these rows make is drawn in :mod:`loopwright.table.machine`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..data.events import Outcome
from ..data.run_state import RunState
from ..data.stage import Stage
from .guards import (
    cancel_requested,
    deadline_passed,
    fallback_left,
    has_error,
    has_failed_model,
    has_response,
    has_retryable_model_error,
    has_tool_calls,
    is_final_response,
    request_over_cost_budget,
    request_over_token_budget,
    retries_left,
    salvage_allowed,
    within_cost_budget,
    within_iteration_budget,
    within_time_budget,
    within_token_budget,
    within_tool_call_budget,
)

Guard = Callable[[RunState], bool]
GuardRef = Guard | str
DEFAULT_OUTCOMES: dict[str, Outcome] = {Stage.DONE: "final", Stage.CANCELLED: "cancelled", Stage.FAILED: "failed"}
"""The outcome of a row into a core terminal that says none."""


@dataclass(frozen=True, slots=True)
class Row:
    """One edge: ``source -> dest`` when every guard holds.

    ``guards`` are functions ``(RunState) -> bool`` or, in a row a user writes, their names
    (resolved when the machine is built). ``bounded_by`` names the budget this row is charged
    to (required on cycle-closing rows). ``outcome`` is the run's outcome when this row enters a
    terminal (rows into ``done``, ``cancelled``, ``failed`` default to ``final``,
    ``cancelled``, ``failed``). ``records_limit``: taking
    this row means a budget ran out, and the engine records which (the budget of the first
    bounded row out of ``source`` that could not fire)."""

    source: str
    dest: str
    guards: tuple[GuardRef, ...] = ()
    bounded_by: str | None = None
    outcome: Outcome | None = None
    records_limit: bool = False
    origin: str = field(default="core", compare=False)
    """The extension that added the row (``core`` for the core's own)."""
    label: str = field(init=False, compare=False, repr=False)
    """How the row reads in logs and diagrams: its guards joined by ``&``, or ``else``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", str(self.source))
        object.__setattr__(self, "dest", str(self.dest))
        object.__setattr__(self, "guards", tuple(self.guards))
        if self.outcome is None and self.dest in DEFAULT_OUTCOMES:
            object.__setattr__(self, "outcome", DEFAULT_OUTCOMES[self.dest])
        object.__setattr__(self, "label", " & ".join(self.guard_names) if self.guards else "else")

    @property
    def guard_names(self) -> tuple[str, ...]:
        return tuple(g if isinstance(g, str) else getattr(g, "__name__", repr(g)) for g in self.guards)

    @property
    def is_fallback(self) -> bool:
        return not self.guards and self.bounded_by is None

    def __str__(self) -> str:
        bound = f" [bounded: {self.bounded_by}]" if self.bounded_by else ""
        return f"{self.source} -> {self.dest} ({self.label}){bound}"


def Rule(
    source: str, dest: str, *guards: GuardRef, bounded_by: str | None = None, outcome: Outcome | None = None
) -> Row:
    """A row written the short way: ``Rule("review", "act", "has_tool_calls")``."""
    return Row(source, dest, guards, bounded_by, outcome)


def cancellable(stage: str) -> Row:
    """The first row out of each working stage: a cancelled run goes to ``cancelled``."""
    return Row(stage, Stage.CANCELLED, (cancel_requested,))


START, PRE, REASON, POST, ACT, DECIDE, SALVAGE = (
    Stage.START,
    Stage.PREPROCESS,
    Stage.REASON,
    Stage.POSTPROCESS,
    Stage.ACT,
    Stage.DECIDE,
    Stage.SALVAGE,
)
DONE, FAILED, CANCELLED = Stage.DONE, Stage.FAILED, Stage.CANCELLED

WITHIN_BUDGETS: tuple[Guard, ...] = (
    within_iteration_budget,
    within_tool_call_budget,
    within_token_budget,
    within_cost_budget,
    within_time_budget,
)
"""Every budget has room: every way back into the loop (go round, hand over) requires it."""


def detour(state: str, guards: tuple[GuardRef, ...], budget: str) -> dict[str, Any]:
    """An :class:`Extension`'s rows for a bounded side trip from decide: ``decide -> state``
    (tried before decide's loop back to preprocess, with the same budgets, then ``guards``),
    then ``state -> preprocess``; ``budget`` bounds the trip. Use as ``Extension(...,
    **detour(...))``."""
    return {
        "rows_before": {(DECIDE, PRE): [Row(DECIDE, state, (*WITHIN_BUDGETS, *guards), bounded_by=budget)]},
        "rows": [cancellable(state), Row(state, PRE)],
    }


# fmt: off
CORE_ROWS: tuple[Row, ...] = (
    Row(START,    PRE),
    cancellable(PRE),
    Row(PRE,      FAILED,    (has_error,)),
    Row(PRE,      REASON),
    cancellable(REASON),
    Row(REASON,   POST,      (has_response,)),
    Row(REASON,   DECIDE,    (deadline_passed,)),
    Row(REASON,   REASON,    (has_retryable_model_error, retries_left), bounded_by="max_model_retries"),
    Row(REASON,   REASON,    (has_failed_model, fallback_left), bounded_by="max_fallbacks"),
    Row(REASON,   SALVAGE,   (request_over_token_budget, salvage_allowed), records_limit=True),
    Row(REASON,   DONE,      (request_over_token_budget,), outcome="limit", records_limit=True),
    Row(REASON,   DONE,      (request_over_cost_budget,), outcome="limit", records_limit=True),
    Row(REASON,   FAILED),
    cancellable(POST),
    Row(POST,     ACT,       (has_tool_calls,)),
    Row(POST,     DECIDE),
    cancellable(ACT),
    Row(ACT,      DECIDE),
    cancellable(DECIDE),
    Row(DECIDE,   DONE,      (is_final_response,), outcome="final"),
    Row(DECIDE,   PRE,       WITHIN_BUDGETS, bounded_by="max_iterations"),
    Row(DECIDE,   SALVAGE,   (salvage_allowed,), records_limit=True),
    Row(DECIDE,   DONE,      outcome="limit", records_limit=True),
    cancellable(SALVAGE),
    Row(SALVAGE,  DONE,      (has_response,), outcome="salvaged"),
    Row(SALVAGE,  DONE,      outcome="limit", records_limit=True),
)
"""Every row of the core loop, in the order the machine tries them."""
# fmt: on


def raised(rs: RunState) -> bool:
    """The engine's abort edge: a stage or a guard raised (never chosen by the table; the
    engine takes it itself, and it is in no table)."""
    return False


_ABORT_ROWS: dict[str, Row] = {}


def abort_row(state: str) -> Row:
    """``state -> failed (raised)``: the row the engine takes when a stage or guard raises."""
    row = _ABORT_ROWS.get(state)
    if row is None:
        row = _ABORT_ROWS[state] = Row(state, FAILED, (raised,), outcome="failed", origin="engine")
    return row
