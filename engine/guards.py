"""Guards: small pure predicates of the run state, named for what they test.

Each is ``(RunState) -> bool``, reads the state and nothing else (no clock, no I/O: the runner
records the passing of the deadline in ``deadline_hit`` before it consults the table), so the
table's choice is a function of the state alone and can be property-tested.
"""

from __future__ import annotations

from .events import ToolCall
from .limits import LimitName
from .run_state import RunState


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


def retries_left(rs: RunState) -> bool:
    """Fewer than ``max_model_retries`` retries were made in this pass."""
    return rs.attempt <= rs.limits.max_model_retries


def has_tool_calls(rs: RunState) -> bool:
    """The latest reply asks for at least one tool call."""
    response = rs.response
    return response is not None and any(type(p) is ToolCall for p in response.parts)


TRUNCATED = frozenset({"max_tokens", "pause_turn"})
"""Stop reasons of a reply that is not finished: the loop goes round and the model continues."""


def is_final_response(rs: RunState) -> bool:
    """The latest reply is an answer: it asks for no tool call and was not cut short
    (``max_tokens``, ``pause_turn``)."""
    response = rs.response
    return (
        response is not None
        and response.stop_reason not in TRUNCATED
        and not any(type(p) is ToolCall for p in response.parts)
    )


def within_iteration_budget(rs: RunState) -> bool:
    """Fewer passes through ``reason`` than ``max_iterations``."""
    return rs.iteration < rs.limits.max_iterations


def within_tool_call_budget(rs: RunState) -> bool:
    """Fewer tool calls than ``max_tool_calls`` (or no such limit)."""
    cap = rs.limits.max_tool_calls
    return cap is None or rs.tool_calls_made < cap


def within_token_budget(rs: RunState) -> bool:
    """Fewer tokens than ``max_total_tokens`` (or no such limit)."""
    cap = rs.limits.max_total_tokens
    return cap is None or rs.usage.total_tokens < cap


def within_time_budget(rs: RunState) -> bool:
    """The run's deadline has not passed (or it has none)."""
    return not rs.deadline_hit


def salvage_allowed(rs: RunState) -> bool:
    """Salvage is on and time is left for one more model call."""
    return rs.limits.salvage and not rs.deadline_hit


def spent_budget(rs: RunState) -> LimitName | None:
    """The first budget that is spent, in the order the decide row tests them, or None."""
    if not within_iteration_budget(rs):
        return "max_iterations"
    if not within_tool_call_budget(rs):
        return "max_tool_calls"
    if not within_token_budget(rs):
        return "max_total_tokens"
    if not within_time_budget(rs):
        return "timeout_s"
    return None
