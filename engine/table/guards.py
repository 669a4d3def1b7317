"""Guards of the core loop: small pure predicates of the run state, named for what they test.

Each is ``(RunState) -> bool``, reads the state and nothing else (no clock, no I/O: the runner
records the passing of the deadline in ``deadline_hit`` before it consults the table), so the
table's choice is a function of the state alone and can be property-tested. The ``within_*``
guards (and ``retries_left``) are derived from the budget registry (:mod:`loopwright.table.budgets`).
Features bring their own guards in their modules.
"""

from __future__ import annotations

from collections.abc import Callable

from ..data.events import ToolCall
from ..data.run_state import RunState
from .budgets import COST, FALLBACKS, ITERATIONS, RETRIES, TIME, TOKENS, TOOL_CALLS

Guard = Callable[[RunState], bool]


def cancel_requested(rs: RunState) -> bool:
    """The run was cancelled (``runner.cancel`` or the task running it)."""
    return rs.cancel_requested


def has_error(rs: RunState) -> bool:
    """A stage recorded an error that ends the run (e.g. an instruction placeholder missing)."""
    return rs.error is not None


def has_response(rs: RunState) -> bool:
    """The model call of this pass returned a reply."""
    return rs.response is not None


def deadline_passed(rs: RunState) -> bool:
    """The run's ``timeout_s`` ran out."""
    return rs.deadline_hit


def has_retryable_model_error(rs: RunState) -> bool:
    """The model call failed with an error a retry may fix (429, 5xx, connection)."""
    return rs.model_error is not None and rs.model_error.retryable


def has_failed_model(rs: RunState) -> bool:
    """The model call failed for good in a way the active agent's ``fallback_models`` cover (a
    retryable error whose retries are spent, or a kind its ``fallback_on`` lists), and it has
    a next model: ``reason`` names it in ``next_model``."""
    return rs.next_model is not None and rs.model_error is not None


def request_over_token_budget(rs: RunState) -> bool:
    """The model did not send this pass's request: it holds more tokens than are left of
    ``max_total_tokens`` (a :class:`~loopwright.data.errors.TokenBudgetError`). The token budget is
    as good as spent: the rows it guards record ``max_total_tokens`` as the limit."""
    error = rs.model_error
    return error is not None and error.kind == "token_budget"


request_over_token_budget.spends = TOKENS.name  # type: ignore[attr-defined]


def request_over_cost_budget(rs: RunState) -> bool:
    """The request was not sent: at the least it would have cost more than is left of
    ``max_cost_usd`` (its input alone, estimated from below). The rows it guards record
    ``max_cost_usd`` as the limit."""
    error = rs.model_error
    return error is not None and error.kind == "cost_budget"


request_over_cost_budget.spends = COST.name  # type: ignore[attr-defined]


def has_tool_calls(rs: RunState) -> bool:
    """The latest reply asks for at least one tool call."""
    response = rs.response
    if response is None:
        return False
    parts = response.parts
    return type(parts[0]) is ToolCall if len(parts) == 1 else ToolCall in map(type, parts)


TRUNCATED = frozenset({"max_tokens", "pause_turn"})
"""Stop reasons of a reply that is not finished: the loop goes round and the model continues."""


def is_final_response(rs: RunState) -> bool:
    """The latest reply is an answer: it asks for no tool call and was not cut short
    (``max_tokens``, ``pause_turn``)."""
    response = rs.response
    if response is None or response.stop_reason in TRUNCATED:
        return False
    parts = response.parts
    return type(parts[0]) is not ToolCall if len(parts) == 1 else ToolCall not in map(type, parts)


def salvage_allowed(rs: RunState) -> bool:
    """Salvage is on (for the active agent) and time is left for one more model call (past
    the loop's deadline: the run's ``salvage_reserve``)."""
    return (rs.turn_limits or rs.limits).salvage and (not rs.deadline_hit or rs.limits.salvage_reserve > 0)


within_iteration_budget = ITERATIONS.guard
within_tool_call_budget = TOOL_CALLS.guard
within_token_budget = TOKENS.guard
within_time_budget = TIME.guard
within_cost_budget = COST.guard
retries_left = RETRIES.guard
fallback_left = FALLBACKS.guard

GUARDS: dict[str, Guard] = {
    g.__name__: g
    for g in (
        cancel_requested,
        has_error,
        has_response,
        deadline_passed,
        has_retryable_model_error,
        retries_left,
        has_failed_model,
        fallback_left,
        request_over_token_budget,
        request_over_cost_budget,
        has_tool_calls,
        is_final_response,
        within_iteration_budget,
        within_tool_call_budget,
        within_token_budget,
        within_time_budget,
        within_cost_budget,
        salvage_allowed,
    )
}
"""The core guards by name: a user's rows may name them by string."""
