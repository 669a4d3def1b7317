"""Parts, usage and replies made from what a provider handed back (its SDK's objects, its JSON),
for the three SDK adapters: the fast constructors (:mod:`loopwright.data.reply_builder`) where
every value is of the exact type validation keeps as it is (a ``str`` for text, an ``int`` >= 0
for a count, a ``dict`` with ``str`` keys for a call's arguments), the validated constructors
otherwise, which coerce or refuse the value exactly as they always did. So a reply comes out the
same as when every piece was validated (``==``, ``model_dump``, the fields given), or the same
error is raised, and only the usual case is cheaper.

An SDK's objects are not always what their types say: the Anthropic SDK builds its replies
without validating them (a value of another type is kept as it came), and the OpenAI adapter reads
the API's JSON. Lone surrogates in text are kept here, as validation keeps them; the engine
cleans them when the reply enters the run (:func:`loopwright.data.values.storable_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from ..data.parts import ModelResponse, ProviderPart, StopReason, TextPart, ThoughtPart, ToolCall, Usage
from ..data.reply_builder import build_call, build_reply, build_text, build_thought, build_usage

__all__ = ["call", "reply", "text", "thought", "usage"]

_SCALARS = frozenset({str, int, float, bool, type(None)})
"""What a ``details`` value may be to be kept as it is (a JsonValue validation keeps unchanged)."""
_STOP_REASONS = frozenset(get_args(StopReason))
_THOUGHT_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "signature": (str, type(None)),
    "redacted": (bool,),
    "data": (str, type(None)),
}


def text(value: Any) -> TextPart:
    """``TextPart(text=value)``."""
    if type(value) is str:
        return build_text(value)
    return TextPart(text=value)


def thought(**fields: Any) -> ThoughtPart:
    """``ThoughtPart(**fields)``."""
    for name, value in fields.items():
        kinds = _THOUGHT_TYPES.get(name)
        if kinds is None or type(value) not in kinds:
            return ThoughtPart(**fields)
    return build_thought(**fields)


def call(id: Any, name: Any, args: Any) -> ToolCall:
    """``ToolCall(id=id, name=name, args=args)``; ``args`` (a dict the adapter made) is kept, not copied."""
    if type(id) is str and type(name) is str and type(args) is dict:
        for key in args:
            if type(key) is not str:
                break
        else:
            return build_call(id, name, args)
    return ToolCall(id=id, name=name, args=args)


def usage(**counts: Any) -> Usage:
    """``Usage(**counts)`` (token counts and ``requests``)."""
    for value in counts.values():
        if type(value) is not int or value < 0:
            return Usage(**counts)
    return build_usage(**counts)


def reply(
    parts: Sequence[TextPart | ThoughtPart | ToolCall | ProviderPart],
    stop_reason: StopReason | None,
    model: Any,
    usage: Usage,
    details: dict[str, Any],
) -> ModelResponse:
    """``ModelResponse(parts=tuple(parts), stop_reason=stop_reason, model=model, usage=usage,
    details=details)`` (every field given); ``details`` (a dict the adapter made) is kept, not copied."""
    known = stop_reason is None or (type(stop_reason) is str and stop_reason in _STOP_REASONS)
    if known and type(model) is str and type(details) is dict and details:
        for key, value in details.items():
            if type(key) is not str or type(value) not in _SCALARS:
                break
        else:
            return build_reply(tuple(parts), usage, stop_reason, model, details)
    return ModelResponse(parts=tuple(parts), stop_reason=stop_reason, model=model, usage=usage, details=details)
