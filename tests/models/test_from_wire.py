"""The adapters' reply constructors (``loopwright.models.from_wire``) make what the validated
constructors make of the same values, for any value a provider could hand back (the right types,
lone surrogates, and the wrong types validation coerces or refuses): an equal object with the
same fields given and every value of the same type, or the same error."""

from __future__ import annotations

import collections
import enum
from decimal import Decimal
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright import ModelResponse, ProviderPart, TextPart, ThoughtPart, ToolCall, Usage
from loopwright.models import from_wire
from tests.models.reply_checks import assert_same


class _Str(str):
    pass


class _Kind(enum.StrEnum):
    A = "a"


with_surrogates = st.text(st.characters(exclude_categories=()), max_size=8)
"""Any text, lone surrogates (which a JSON escape can carry) included."""
hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([10**5000, -1, 0, 3.0, 3.5, float("nan"), float("inf"), b"xy", Decimal("2")]),
    st.builds(_Str, with_surrogates),
    st.just(_Kind.A),
    st.lists(st.integers(0, 3), max_size=2),
    st.tuples(st.integers(0, 3)),
)
"""Values of other types than a field wants (validation coerces some, refuses the rest)."""
texts = with_surrogates | hostile
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | with_surrogates
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(with_surrogates, inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
keys = with_surrogates | st.integers(0, 3) | st.builds(_Str, st.text(max_size=3))
args = (
    st.dictionaries(keys, json_values | hostile, max_size=3)
    | st.dictionaries(keys, json_values, max_size=2).map(collections.OrderedDict)
    | hostile
)
counts = st.integers(min_value=0, max_value=10**6) | hostile
USAGE_COUNTS = [name for name in Usage.model_fields if name != "cost_usd"]


def outcome(make: Any, *args: Any, **fields: Any) -> tuple[str, Any]:
    try:
        return "made", make(*args, **fields)
    except Exception as exc:
        return "raised", (type(exc), str(exc))


def assert_same_outcome(fast: tuple[str, Any], validated: tuple[str, Any]) -> None:
    assert fast[0] == validated[0], (fast, validated)
    if fast[0] == "raised":
        assert fast == validated
    else:
        assert isinstance(fast[1], BaseModel)
        assert_same(fast[1], validated[1])


@given(texts)
@example("a\ud800b")
@example(_Str("a"))
@example(b"xy")
def test_text_is_the_validated_text_part(value: Any) -> None:
    assert_same_outcome(outcome(from_wire.text, value), outcome(TextPart, text=value))


@given(
    st.fixed_dictionaries(
        {}, optional={"text": texts, "signature": st.none() | texts, "redacted": st.booleans() | hostile, "data": texts}
    )
)
@example({"text": "t", "signature": _Str("s")})
@example({"redacted": 1})
@example({"data": None, "text": 3})
def test_thought_is_the_validated_thought_part(fields: dict[str, Any]) -> None:
    assert_same_outcome(outcome(from_wire.thought, **fields), outcome(ThoughtPart, **fields))


@given(texts, texts, args)
@example("c1", "add", {0: 1})
@example("c1", "add", {_Str("a"): 1})
@example("c1", "add", collections.OrderedDict(a=1))
@example(None, "add", {})
@example("c1", _Str("add"), {"a": "\udc00"})
def test_call_is_the_validated_tool_call(ident: Any, name: Any, arguments: Any) -> None:
    fast = outcome(from_wire.call, ident, name, arguments)
    assert_same_outcome(fast, outcome(ToolCall, id=ident, name=name, args=arguments))
    if fast[0] == "made" and type(arguments) is dict:
        assert fast[1].args == arguments


@given(st.dictionaries(st.sampled_from(USAGE_COUNTS), counts))
@example({"input_tokens": -1})
@example({"output_tokens": 3.0})
@example({"requests": True})
@example({"cache_read_tokens": 10**5000})
def test_usage_is_the_validated_usage(fields: dict[str, Any]) -> None:
    assert_same_outcome(outcome(from_wire.usage, **fields), outcome(Usage, **fields))


PARTS = [
    TextPart(text="hi"),
    ToolCall(id="c1", name="add", args={"a": 1}),
    ThoughtPart(text="hm", signature="s"),
    ProviderPart(provider="p", kind="k", block={"x": 1}),
]
stops = st.sampled_from([None, "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"])


@given(
    st.lists(st.sampled_from(PARTS), max_size=4),
    stops | st.sampled_from(["stop", "END_TURN", 1]),
    with_surrogates | hostile,
    st.dictionaries(keys, json_values | hostile, max_size=3) | hostile,
    st.dictionaries(st.sampled_from(USAGE_COUNTS), st.integers(0, 99)),
)
@example(PARTS, "end_turn", "m", {"id": "x", "n": [1, (2,)]}, {})
@example(PARTS, "end_turn", "m", {"id": (1,)}, {})
@example(PARTS, "end_turn", "m", {0: "x"}, {})
@example(PARTS, "end_turn", "m", {"id": "x", "big": 10**5000, "nan": float("nan")}, {})
@example(PARTS, "stop", "m", {"id": "x"}, {})
@example(PARTS, None, None, {"id": "x"}, {})
@example(PARTS, "tool_use", 3, {"id": "x"}, {})
@example(PARTS, "tool_use", _Str("m"), {"id": "x"}, {})
@example(PARTS, "tool_use", "m", {}, {"input_tokens": 1})
def test_reply_is_the_validated_model_response(
    parts: list[Any], stop: Any, model: Any, details: Any, usage_fields: dict[str, Any]
) -> None:
    usage = Usage(**usage_fields)
    fast = outcome(from_wire.reply, parts, stop, model, usage, details)
    validated = outcome(ModelResponse, parts=tuple(parts), stop_reason=stop, model=model, usage=usage, details=details)
    assert_same_outcome(fast, validated)
    if fast[0] == "made":
        assert fast[1].model_fields_set == set(ModelResponse.model_fields)  # every field given, as the adapters do
