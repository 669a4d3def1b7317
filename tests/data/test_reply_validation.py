"""The validated construction of a reply (what a user's own model does, and the shared peers
harness): a tool call's reply enters no Python frame of its own beyond pydantic's ``__init__``s,
and its parts are read as they always were, whatever is given (instances, dicts with or without
their ``type``, invalid ones: the same member, or the same errors)."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, JsonValue, ValidationError

from loopwright import ModelResponse, ProviderPart, TextPart, ThoughtPart, ToolCall, Usage
from tests.helpers import frames_entered
from tests.models.reply_checks import typed


class FormerOrder(BaseModel):
    """ModelResponse with its parts' union in the order it had before (text first)."""

    model_config = ModelResponse.model_config
    parts: tuple[TextPart | ThoughtPart | ToolCall | ProviderPart, ...] = ()
    usage: Usage = Usage()
    stop_reason: str | None = None
    model: str | None = None
    details: dict[str, JsonValue] = Field(default_factory=dict)


def test_a_tool_calls_reply_enters_only_pydantics_own_init() -> None:
    def reply() -> ModelResponse:
        call = ToolCall(id="call_1", name="add", args={"a": 1, "b": 1})
        return ModelResponse(
            parts=(call,), stop_reason="tool_use", usage=Usage(input_tokens=1, output_tokens=1, requests=1)
        )

    seen = frames_entered(reply)
    seen.pop("test_reply_validation.py:reply")
    assert seen == {"main.py:__init__": 3}  # ToolCall, Usage, ModelResponse: no ABC instance check of a part


texts = st.text(max_size=4)
fields = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "thought", "tool_call", "provider", "other"]),
        "text": texts | st.integers(0, 2),
        "id": texts,
        "name": texts,
        "args": st.dictionaries(texts, st.integers(0, 2), max_size=2),
        "signature": st.none() | texts,
        "redacted": st.booleans(),
        "provider": texts,
        "kind": texts,
        "block": st.dictionaries(texts, st.integers(0, 2), max_size=2),
    },
)
instances = st.sampled_from(
    [
        TextPart(text="t"),
        ThoughtPart(text="h"),
        ToolCall(id="c", name="n"),
        ProviderPart(provider="p", kind="k", block={}),
    ]
)


def read(model: type[BaseModel], parts: list[Any]) -> tuple[str, Any]:
    try:
        made = model(parts=parts)
    except ValidationError as exc:
        return "refused", sorted((str(e["loc"]), e["type"], e["msg"]) for e in exc.errors())
    return "made", [_shown(p) for p in made.parts]  # type: ignore[attr-defined]


def _shown(part: BaseModel) -> Any:
    if type(part) is ToolCall:  # (a call given without its id gets a new one each time)
        return "ToolCall", sorted(part.model_fields_set), typed(part.model_dump(exclude={"id"}))
    return type(part).__name__, typed(part)


@given(st.lists(fields | instances, max_size=3))
@example([{"text": "hi"}])
@example([{}])
@example([{"name": "n"}])
@example([{"type": "text"}])
def test_parts_are_read_as_before(parts: list[Any]) -> None:
    assert read(ModelResponse, parts) == read(FormerOrder, parts)
