"""The fast constructor of model replies, for adapters (public as ``loopwright.models``'s
``build_reply``, ``build_text``, ``build_thought``, ``build_call``, ``build_usage``).

An adapter turns a provider SDK's own typed objects (its text is a ``str``, its token counts
``int``, a tool call's arguments a ``dict`` it parsed from JSON) into a :class:`ModelResponse`.
Validating what is typed already costs a third of the engine's time an iteration on a workload
that builds a reply per call (issue 38); these functions build the same pydantic objects
without validating them again: equal (``==``) to what the validated constructors make from the
same arguments, with the same fields set (``model_dump(exclude_unset=True)`` agrees), frozen,
and ``model_dump`` / ``model_validate`` work on them as on any other
(``tests/data/test_reply_builder.py`` proves it for every generated reply).

The types are the caller's promise: a value of a wrong type is not caught here. The engine still
checks what every reply must hold (a model's replies are checked unless it sets
``trusted_replies = True``) and cleans what a saved run could not hold (lone surrogates), so a
wrong value fails the model call with a message rather than a later step. A value given is
kept, not copied (the ``dict`` of a call's arguments becomes the call's): give each reply its own.

Fields sets are shared immutable sets (as the history keeps its replies: :func:`kept`), so a reply
built here enters the history without being touched again.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, JsonValue

from .build import new_call_id, new_object, set_dict, set_extra, set_fields_set, set_private
from .parts import ZERO_USAGE, ModelResponse, ProviderPart, StopReason, TextPart, ThoughtPart, ToolCall, Usage

__all__ = ["build_call", "build_reply", "build_text", "build_thought", "build_usage"]

Part = TextPart | ThoughtPart | ToolCall | ProviderPart


class SharedFieldsSet(set[str]):
    """A ``__pydantic_fields_set__`` shared by every built instance with the same fields given: a
    ``set`` (pydantic's serializer reads it for ``exclude_unset``) that refuses to change (a
    copy, what ``model_copy`` and pickling take, is a plain ``set``)."""

    def _shared(self, *args: Any) -> Any:
        raise TypeError("a fields set shared by built replies cannot change; copy it first")

    add = discard = remove = pop = clear = update = _shared
    difference_update = intersection_update = symmetric_difference_update = _shared
    __ior__ = __iand__ = __isub__ = __ixor__ = _shared

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return set, (list(self),)


_SETS: dict[frozenset[str], SharedFieldsSet] = {}


def _shared(names: frozenset[str]) -> SharedFieldsSet:
    fields_set = _SETS.get(names)
    if fields_set is None:
        fields_set = _SETS[names] = SharedFieldsSet()
        set.update(fields_set, names)
    return fields_set


_TEXT_SET = _shared(frozenset({"text"}))
_CALL_SET = _shared(frozenset({"id", "name", "args"}))
_CALL_SET_NO_ID = _shared(frozenset({"name", "args"}))
_REPLY_SETS = {
    (model, details): _shared(
        frozenset({"parts", "usage", "stop_reason", *(("model",) if model else ()), *(("details",) if details else ())})
    )
    for model in (False, True)
    for details in (False, True)
}
_USAGE_DEFAULTS: dict[str, Any] = {name: field.default for name, field in Usage.model_fields.items()}
_THOUGHT_DEFAULTS: dict[str, Any] = {name: field.default for name, field in ThoughtPart.model_fields.items()}


def _made(cls: type[BaseModel], fields: dict[str, Any], fields_set: SharedFieldsSet) -> Any:
    obj = new_object(cls)
    set_dict(obj, fields)
    set_fields_set(obj, fields_set)
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def build_text(text: str) -> TextPart:
    """``TextPart(text=text)``, not validated again."""
    obj = new_object(TextPart)
    set_dict(obj, {"type": "text", "text": text})
    set_fields_set(obj, _TEXT_SET)
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def build_call(id: str | None, name: str, args: dict[str, Any]) -> ToolCall:
    """``ToolCall(id=id, name=name, args=args)`` (``id`` None: ``ToolCall(name=name, args=args)``,
    a new id), not validated again; ``args`` is kept, not copied."""
    obj = new_object(ToolCall)
    if id is None:
        set_dict(obj, {"type": "tool_call", "id": new_call_id(), "name": name, "args": args})
        set_fields_set(obj, _CALL_SET_NO_ID)
    else:
        set_dict(obj, {"type": "tool_call", "id": id, "name": name, "args": args})
        set_fields_set(obj, _CALL_SET)
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def build_thought(**fields: Any) -> ThoughtPart:
    """``ThoughtPart(**fields)`` (``text``, ``signature``, ``redacted``, ``data``), not validated again."""
    values = dict(_THOUGHT_DEFAULTS, **fields)
    if len(values) != len(_THOUGHT_DEFAULTS):
        raise TypeError(f"build_thought takes text, signature, redacted, data; got {', '.join(sorted(fields))}")
    values["type"] = "thought"
    return _made(ThoughtPart, values, _shared(frozenset(fields)))  # type: ignore[no-any-return]


def build_usage(**counts: int | Decimal | None) -> Usage:
    """``Usage(**counts)`` (``input_tokens``, ``output_tokens``, ``requests``, ... and ``cost_usd``),
    not validated again: counts are ``int`` >= 0, ``cost_usd`` a ``Decimal`` or None."""
    values = dict(_USAGE_DEFAULTS, **counts)
    if len(values) != len(_USAGE_DEFAULTS):
        unknown = ", ".join(sorted(set(counts) - set(_USAGE_DEFAULTS)))
        raise TypeError(f"build_usage got {unknown}: a Usage has {', '.join(_USAGE_DEFAULTS)}")
    names = frozenset(counts)
    obj = new_object(Usage)  # (_made's body: a usage is built per reply)
    set_dict(obj, values)
    set_fields_set(obj, _SETS.get(names) or _shared(names))
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def build_reply(
    parts: Sequence[Part],
    usage: Usage = ZERO_USAGE,
    stop_reason: StopReason | None = None,
    model: str | None = None,
    details: dict[str, JsonValue] | None = None,
) -> ModelResponse:
    """``ModelResponse(parts=parts, usage=usage, stop_reason=stop_reason)`` (with ``model`` and
    ``details`` when given), not validated again: ``parts`` built here (or validated), ``usage``
    a :class:`Usage`. What the validated constructor makes of the same arguments, with the same
    fields set."""
    obj = new_object(ModelResponse)
    set_dict(
        obj,
        {
            "parts": parts if type(parts) is tuple else tuple(parts),
            "usage": usage,
            "stop_reason": stop_reason,
            "model": model,
            "details": details if details else {},
        },
    )
    set_fields_set(obj, _REPLY_SETS[model is not None, bool(details)])
    set_extra(obj, None)
    set_private(obj, None)
    return obj
