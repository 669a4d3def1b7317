"""Gemini replies put together from streamed chunks equal the non-streamed reply (a hypothesis
property over the SDK's own types, chunked as tests/fake_gemini.py streams them), and the reply
mapping's edge cases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai import types as genai_types
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import ProviderPart, TextPart, ThoughtPart, ToolCall
from loopwright.models.gemini.mapping import to_parts
from loopwright.models.gemini.replies import merge_chunk, read_parts
from tests.fake_gemini import call, chunks, reply, text

words = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30)
signatures = st.none() | st.binary(min_size=1, max_size=12)


@st.composite
def reply_parts(draw: Any) -> list[dict[str, Any]]:
    """Parts a reply may hold: text and thoughts (signed or not), calls (signed or not). Two text
    parts of one kind are never adjacent with the first unsigned (streamed, they are one part)."""
    parts: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            thought = draw(st.booleans())
            last = parts[-1] if parts else {}
            if "text" in last and bool(last.get("thought")) == thought and "thoughtSignature" not in last:
                continue
            parts.append(text(draw(words), thought=thought, signature=draw(signatures)))
        else:
            args = draw(st.dictionaries(st.sampled_from(["q", "n"]), st.integers(0, 9) | st.text(max_size=5)))
            parts.append(call("lookup", args, id_=f"fc_{n}", signature=draw(signatures)))
    return parts


def parsed(body: dict[str, Any]) -> list[Any]:
    response = genai_types.GenerateContentResponse.model_validate_json(json.dumps(body))
    assert response.candidates and response.candidates[0].content
    return list(response.candidates[0].content.parts or ())


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(parts=reply_parts(), apart=st.booleans())
def test_a_streamed_reply_assembles_to_the_whole_one(parts: list[dict[str, Any]], apart: bool) -> None:
    body = reply(*parts)
    whole = read_parts(parsed(body))
    merged: list[Any] = []
    for chunk in chunks(body, apart):
        if chunk["candidates"][0].get("content"):
            merge_chunk(merged, parsed(chunk))
    assert read_parts(merged) == whole
    # and what goes back is what came: each part, its signature on it, in order
    sent = to_parts(whole)
    for got, came in zip(sent, parts, strict=True):
        assert ("thought_signature" in got) == ("thoughtSignature" in came)
        assert got.get("text") == came.get("text") and bool(got.get("thought")) == bool(came.get("thought"))


def test_parts_loopwright_does_not_interpret_are_kept_and_sent_back() -> None:
    code = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    out = read_parts(parsed(reply(code, text("1"))))
    assert type(out[0]) is ProviderPart and out[0].kind == "part" and out[0].provider == "gemini"
    assert to_parts(out)[0] == {"executable_code": {"language": "PYTHON", "code": "print(1)"}}


def test_local_ids_are_unique_and_never_sent() -> None:
    out = read_parts(parsed(reply(call("a", {}), call("a", {}))))
    calls = [p for p in out if type(p) is ToolCall]
    assert len({c.id for c in calls}) == 2
    assert to_parts(calls) == [{"function_call": {"name": "a", "args": {}}}] * 2


def test_thoughts_and_text_stay_apart() -> None:
    out = read_parts(parsed(reply(text("plan", thought=True), text("answer"))))
    assert out == [ThoughtPart(text="plan"), TextPart(text="answer")]
