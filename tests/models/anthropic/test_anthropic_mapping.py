"""AnthropicModel's request and response mapping, called directly: options and settings over
real HTTP (tests/fake_claude.py), and the history mapping as a pure function, by example and
as a property of any history."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import AnthropicModel, ContextWindowError
from loopwright.data.events import (
    Instruction,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from loopwright.models.anthropic import to_messages
from loopwright.models.anthropic.mapping import CONTINUE
from tests.fake_claude import FakeClaude, message, text

SPEC = ToolSpec(name="look", description="Look.", input_schema={"type": "object", "properties": {}})


def complete(fake: FakeClaude, request: ModelRequest, **options: Any) -> ModelResponse:
    async def go() -> ModelResponse:
        async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0) as client:
            return await AnthropicModel("claude-test", client=client, **options).complete(request)

    return asyncio.run(go())


def user(*parts: Any) -> Message:
    return Message(role="user", parts=parts)


def assistant(*parts: Any) -> Message:
    return Message(role="assistant", parts=parts)


def test_options_settings_and_tool_choice_reach_the_api(fake: FakeClaude) -> None:
    fake.script.append(message(text("ok")))
    request = ModelRequest(
        instructions=(Instruction(text="Be brief."),),
        messages=[user(TextPart(text="hi"))],
        tools=(SPEC,),
        tool_choice="any",
        settings={"max_tokens": 99, "top_k": 5},  # an agent's model_settings win over the model's options
    )
    reply = complete(
        fake, request, max_tokens=4096, top_k=1, stop_sequences=["STOP"], metadata={"user_id": "u1"}, cache=None
    )
    assert reply.text == "ok" and reply.stop_reason == "end_turn" and reply.model == "claude-test"
    body = fake.requests[0]
    assert body["max_tokens"] == 99 and body["top_k"] == 5
    assert body["stop_sequences"] == ["STOP"] and body["metadata"] == {"user_id": "u1"}
    assert body["tool_choice"] == {"type": "any"}
    assert body["system"] == [{"type": "text", "text": "Be brief."}]  # cache=None: no breakpoint


def test_no_tools_means_no_tools_and_no_tool_choice(fake: FakeClaude) -> None:
    fake.script.append(message(text("ok")))
    complete(fake, ModelRequest(messages=[user(TextPart(text="hi"))], tool_choice="auto"))
    assert "tools" not in fake.requests[0] and "tool_choice" not in fake.requests[0]
    assert "system" not in fake.requests[0]


def test_a_full_context_window_is_the_token_budget_edge_with_the_partial_kept(fake: FakeClaude) -> None:
    """Not a cut reply to continue (a continuation cannot fit): a ContextWindowError (the run
    takes the token-budget edge) holding what the reply said."""
    fake.script.append(message(text("and so"), stop_reason="model_context_window_exceeded"))
    with pytest.raises(ContextWindowError) as caught:
        complete(fake, ModelRequest(messages=[user(TextPart(text="hi"))]))
    assert caught.value.partial == "and so" and not caught.value.retryable


def test_history_maps_to_alternating_turns() -> None:
    history = [
        user(TextPart(text="Look twice.")),
        assistant(
            ThoughtPart(text="two looks", signature="sig"),
            ThoughtPart(text="someone else's thought"),  # no signature: cannot go back to Claude
            ToolCall(id="a", name="look", args={"at": 1}),
            ToolCall(id="b", name="look", args={}),
        ),
        user(ToolResult(call_id="a", name="look", content={"seen": [1]})),  # results in two turns...
        user(ToolResult(call_id="b", name="look", content="boom", is_error=True), TextPart(text="Hurry.")),
        assistant(TextPart(text="I saw ")),
        assistant(TextPart(text="one thing.  \n")),  # a partial turn being continued
    ]
    assert to_messages(history) == [
        {"role": "user", "content": [{"type": "text", "text": "Look twice."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two looks", "signature": "sig"},
                {"type": "tool_use", "id": "a", "name": "look", "input": {"at": 1}},
                {"type": "tool_use", "id": "b", "name": "look", "input": {}},
            ],
        },
        {
            "role": "user",  # ...are answered in one user turn, in call order, before any text
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": '{"seen": [1]}', "is_error": False},
                {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
                {"type": "text", "text": "Hurry."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "I saw "}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE}]},  # a cut turn is continued on request
        {"role": "assistant", "content": [{"type": "text", "text": "one thing.  \n"}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE}]},  # never a prefill
    ]


def test_blank_text_is_not_sent() -> None:
    history = [
        user(TextPart(text="hi")),
        assistant(TextPart(text=" ")),
        user(TextPart(text="again")),
        assistant(TextPart(text="so "), TextPart(text=" \n")),  # a continued turn ending in blank text
    ]
    assert to_messages(history) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "so "}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE}]},
    ]


def test_history_is_not_mutated() -> None:
    history = [user(TextPart(text="hi")), assistant(TextPart(text="so "))]
    before = [m.model_copy(deep=True) for m in history]
    to_messages(history)
    assert history == before


_parts = st.one_of(
    st.builds(TextPart, text=st.sampled_from(["", " ", "a", "b ", "\n"])),
    st.builds(ThoughtPart, text=st.just("t"), signature=st.sampled_from([None, "", "s"]), redacted=st.booleans()),
    st.builds(ToolCall, id=st.sampled_from(["x", "y"]), name=st.just("look")),
    st.builds(ToolResult, call_id=st.sampled_from(["x", "y"]), name=st.just("look"), content=st.just("r")),
)
_messages = st.builds(
    Message, role=st.sampled_from(["user", "assistant"]), parts=st.lists(_parts, max_size=4).map(tuple)
)


@settings(max_examples=300)
@given(st.lists(_messages, max_size=8))
def test_any_history_maps_to_turns_the_api_accepts_in_shape(history: list[Message]) -> None:
    turns = to_messages(history)
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in pairwise(roles))  # roles alternate
    for turn in turns:
        assert turn["content"]  # no empty turn
        kinds = [b["type"] for b in turn["content"]]
        assert kinds == sorted(kinds, key=lambda k: k != "tool_result") or turn["role"] == "assistant"
        assert not any(b["type"] == "text" and not b["text"].strip() for b in turn["content"])
    assert not turns or turns[-1]["role"] == "user"  # no prefill: models from 4.6 on refuse it
