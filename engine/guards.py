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


def transfer_requested(rs: RunState) -> bool:
    """The latest act accepted a ``transfer_to_agent`` call."""
    return rs.transfer_to is not None


def no_transfer_requested(rs: RunState) -> bool:
    """No transfer is pending."""
    return rs.transfer_to is None


def within_transfer_budget(rs: RunState) -> bool:
    """Fewer transfers than ``max_transfers`` so far."""
    return len(rs.transfers) < rs.limits.max_transfers


def ping_pong_transfers(rs: RunState) -> int:
    """How many transfers at the end of the run (the requested one included) bounce between
    the same two agents."""
    hops = [*rs.transfers, (rs.active_agent, rs.transfer_to)] if rs.transfer_to else rs.transfers
    if not hops:
        return 0
    pair = set(hops[-1])
    count = 0
    for hop in reversed(hops):
        if set(hop) != pair:
            break
        count += 1
    return count


def not_ping_pong(rs: RunState) -> bool:
    """The requested transfer keeps the back-and-forth within ``max_ping_pong``."""
    return ping_pong_transfers(rs) <= rs.limits.max_ping_pong


def has_pending_requests(rs: RunState) -> bool:
    """Tool calls wait for a confirmation, a credential or a long-running result."""
    return bool(rs.pending)


def within_suspension_budget(rs: RunState) -> bool:
    """Fewer suspensions than ``max_suspensions`` so far."""
    return rs.suspensions < rs.limits.max_suspensions


def salvage_allowed(rs: RunState) -> bool:
    """Salvage is on and time is left for one more model call."""
    return rs.limits.salvage and not rs.deadline_hit


def spent_budget(rs: RunState) -> LimitName | None:
    """The budget that stops the loop, in the order the decide rows test them, or None."""
    if transfer_requested(rs):
        if not within_transfer_budget(rs):
            return "max_transfers"
        if not not_ping_pong(rs):
            return "max_ping_pong"
    if not within_iteration_budget(rs):
        return "max_iterations"
    if not within_tool_call_budget(rs):
        return "max_tool_calls"
    if not within_token_budget(rs):
        return "max_total_tokens"
    if not within_time_budget(rs):
        return "timeout_s"
    return None
