"""The fast constructor of replies (issue 38): what ``build_reply`` and its kin make is what the
validated constructors make of the same arguments, for every generated reply."""

from __future__ import annotations

import copy
import pickle
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright import ModelResponse, TextPart, ThoughtPart, ToolCall, Usage
from loopwright.models import build_call, build_reply, build_text, build_thought, build_usage

finite = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.none() | st.booleans() | st.integers() | finite | st.text(max_size=8)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
counts = st.integers(min_value=0, max_value=10**12)
usage_fields = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": counts,
        "output_tokens": counts,
        "cache_read_tokens": counts,
        "cache_creation_tokens": counts,
        "requests": counts,
        "cost_usd": st.none() | st.decimals(min_value=0, max_value=10**6, allow_nan=False, places=6),
        "cache_creation_1h_tokens": counts,
        "server_tool_uses": counts,
    },
)
thought_fields = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=8),
        "signature": st.none() | st.text(max_size=8),
        "redacted": st.booleans(),
        "data": st.none() | st.text(max_size=8),
    },
)


@st.composite
def parts(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """(built parts, validated parts) from the same arguments."""
    built: list[Any] = []
    validated: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(["text", "thought", "call", "call_no_id"]), max_size=4)):
        if kind == "text":
            text = draw(st.text(max_size=12))
            built.append(build_text(text))
            validated.append(TextPart(text=text))
        elif kind == "thought":
            fields = draw(thought_fields)
            built.append(build_thought(**fields))
            validated.append(ThoughtPart(**fields))
        else:
            name = draw(st.text(min_size=1, max_size=8))
            args = draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
            if kind == "call":
                ident = draw(st.text(min_size=1, max_size=8))
                built.append(build_call(ident, name, copy.deepcopy(args)))
                validated.append(ToolCall(id=ident, name=name, args=args))
            else:
                call = build_call(None, name, copy.deepcopy(args))
                built.append(call)
                validated.append(ToolCall(id=call.id, name=name, args=args))  # (a new id is new each time)
                validated[-1].__pydantic_fields_set__.discard("id")
    return built, validated


@given(
    parts(),
    usage_fields,
    st.sampled_from([None, "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]),
    st.none() | st.text(min_size=1, max_size=8),
    st.none() | st.dictionaries(st.text(min_size=1, max_size=4), json_values, min_size=1, max_size=2),
)
def test_a_built_reply_is_the_validated_one(
    both: tuple[list[Any], list[Any]],
    usage: dict[str, Any],
    stop_reason: Any,
    model: str | None,
    details: dict[str, Any] | None,
) -> None:
    built_parts, validated_parts = both
    built = build_reply(built_parts, build_usage(**usage), stop_reason, model, copy.deepcopy(details))
    given_fields: dict[str, Any] = {"parts": validated_parts, "usage": Usage(**usage), "stop_reason": stop_reason}
    if model is not None:
        given_fields["model"] = model
    if details:
        given_fields["details"] = details
    validated = ModelResponse(**given_fields)
    assert built == validated
    assert type(built.parts) is tuple
    assert [type(a) for a in built.parts] == [type(b) for b in validated.parts]
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert built.model_dump_json() == validated.model_dump_json()
    assert ModelResponse.model_validate_json(built.model_dump_json()) == built
    assert pickle.loads(pickle.dumps(built)) == built and copy.deepcopy(built) == built
    for a, b in zip(built.parts, validated.parts, strict=True):
        assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    assert built.usage.model_dump(exclude_unset=True) == validated.usage.model_dump(exclude_unset=True)


def test_built_values_stay_frozen_and_their_shared_fields_sets_do_not_change() -> None:
    reply = build_reply((build_call("c1", "add", {"a": 1}),), build_usage(requests=1), "tool_use")
    with pytest.raises(Exception, match="frozen"):
        reply.stop_reason = "end_turn"  # type: ignore[misc]
    with pytest.raises(TypeError, match="cannot change"):
        reply.__pydantic_fields_set__.add("model")
    changed = reply.model_copy(update={"model": "m"})
    assert changed.model == "m" and "model" in changed.model_dump(exclude_unset=True)
    assert "model" not in build_reply((), build_usage(requests=1)).model_dump(exclude_unset=True)


def test_a_usage_field_that_does_not_exist_is_named() -> None:
    with pytest.raises(TypeError, match=r"build_usage got input_token: a Usage has input_tokens"):
        build_usage(input_token=1)
    with pytest.raises(TypeError, match="build_thought takes text"):
        build_thought(txt="x")
    assert build_usage(cost_usd=Decimal("0.5")) == Usage(cost_usd=Decimal("0.5"))
