"""Turning a Messages API reply into a ModelResponse asks the SDK's message for nothing it lacks
(a failing attribute lookup on a pydantic model raises inside pydantic's ``__getattr__``, a
third of the conversion), and still reports what context editing cleared wherever the SDK
keeps it: a beta message's field, a GA message's extras, a plain object's attribute."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from anthropic.types import Message
from anthropic.types.beta import BetaContextManagementResponse, BetaMessage

from loopwright.models.anthropic import to_response
from tests.helpers import frames_entered

REPLY: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 1}}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
CLEARED = {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 50}]}


def test_a_ga_reply_is_read_without_a_failing_lookup() -> None:
    message = Message.model_validate(REPLY)
    assert "context_management" not in to_response(message).details
    assert frames_entered(lambda: to_response(message))["main.py:__getattr__"] == 0


def test_what_context_editing_cleared_is_reported_wherever_the_sdk_keeps_it() -> None:
    edits = BetaContextManagementResponse.model_validate(CLEARED)
    beta = BetaMessage.model_validate({**REPLY, "context_management": CLEARED})
    ga = Message.model_validate(REPLY)
    extra = Message.model_construct(**ga.__dict__, context_management=edits)  # (an unknown key: the extras)
    plain = SimpleNamespace(**ga.__dict__, context_management=edits)
    assert extra.model_extra == {"context_management": edits}
    for message in (beta, extra, plain):
        assert to_response(message).details["context_management"] == CLEARED, type(message)
    assert "context_management" not in to_response(BetaMessage.model_validate(REPLY)).details
