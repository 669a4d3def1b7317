"""Each SDK adapter's replies, built with the fast constructors (issue 38), are what the
validated constructors make: for generated replies (any text, lone surrogates included, calls
with any JSON arguments, usage, reasoning, the server quirks its API sends) sent by its fake
server over real HTTP, ``complete``'s and ``stream``'s reply equal the same reply rebuilt through
the validated constructors, every value of the same type, with the fields the adapter always
gave (a reply's five, its usage's counts, each part's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Message, ModelRequest, ModelResponse, TextPart, ThoughtPart, ToolCall, ToolSpec
from loopwright.testing.adapter_kit import AdapterHarness, Call, Reply
from tests.adapter_harnesses import ClaudeHarness, OpenAIHarness, QuirkyGeminiHarness
from tests.fake_claude import FakeClaude
from tests.fake_gemini import FakeGemini
from tests.fake_openai import FakeOpenAI
from tests.models.reply_checks import assert_same, revalidated

ALL_FIELDS = set(ModelResponse.model_fields)
USAGE_GIVEN = {
    "anthropic": {"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "requests",
                  "cache_creation_1h_tokens", "server_tool_uses"},
    "openai": {"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "requests"},
    "gemini": {"input_tokens", "output_tokens", "cache_read_tokens", "requests"},
}  # fmt: skip
"""The counts each adapter gives its reply's Usage (what its validated ``Usage(...)`` was given)."""
QUIRKS = ("calls_without_index", "calls_at_one_index", "calls_without_ids", "object_arguments", "no_usage")


@contextlib.contextmanager
def claude() -> Iterator[AdapterHarness]:
    with FakeClaude() as fake:
        yield ClaudeHarness(fake)


@contextlib.contextmanager
def responses() -> Iterator[AdapterHarness]:
    with FakeOpenAI() as fake:
        yield OpenAIHarness(fake, "responses")


@contextlib.contextmanager
def chat() -> Iterator[AdapterHarness]:
    with FakeOpenAI() as fake:
        yield OpenAIHarness(fake, "chat")


@contextlib.contextmanager
def gemini() -> Iterator[AdapterHarness]:
    with FakeGemini() as fake:
        yield QuirkyGeminiHarness(fake)


HARNESSES: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[AdapterHarness]], str]] = {
    "anthropic": (claude, "anthropic"),
    "openai-responses": (responses, "openai"),
    "openai-chat": (chat, "openai"),
    "gemini": (gemini, "gemini"),
}

text = st.text(st.characters(exclude_categories=("Cc",)), min_size=1, max_size=30).filter(str.strip)
"""Any text but control characters, lone surrogates included (a JSON escape carries them)."""
keys = st.text(st.characters(exclude_categories=("Cc",)), min_size=1, max_size=6)
scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    scalars | keys, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=6
)
counts = st.integers(0, 10**6)


@st.composite
def replies(draw: st.DrawFn, harness: AdapterHarness) -> Reply:
    ids = draw(st.lists(st.from_regex(r"call_[a-z0-9]{1,10}", fullmatch=True), max_size=3, unique=True))
    calls = tuple(Call(i, "lookup", draw(st.dictionaries(keys, json_values, max_size=3))) for i in ids)
    can_send = [q for q in QUIRKS if harness.cannot_send(q) is None]  # type: ignore[attr-defined]
    return Reply(
        text=draw(text) if not calls or draw(st.booleans()) else "",
        calls=calls,
        input_tokens=draw(counts),
        cached_tokens=draw(counts),
        output_tokens=draw(counts),
        reasoning=draw(st.just("") | st.from_regex(r"[a-z ]{1,20}", fullmatch=True)),
        quirks=tuple(draw(st.lists(st.sampled_from(can_send), max_size=2, unique=True))) if can_send else (),
    )


def _request() -> ModelRequest:
    spec = ToolSpec(name="lookup", description="Look something up.", input_schema={"type": "object"})
    return ModelRequest(messages=[Message(role="user", parts=(TextPart(text="Find x."),))], tools=(spec,))


def assert_as_validated(reply: ModelResponse, sent: Reply, usage_given: set[str]) -> None:
    assert_same(reply, revalidated(reply))
    assert reply.model_fields_set == ALL_FIELDS
    if "no_usage" not in sent.quirks:
        assert reply.usage.model_fields_set == usage_given
        assert reply.usage == sent.usage
    for part in reply.parts:
        if type(part) is TextPart:
            assert part.model_fields_set == {"text"}
        elif type(part) is ToolCall:
            assert part.model_fields_set == {"id", "name", "args"}
        elif type(part) is ThoughtPart:
            assert part.text and part.model_fields_set >= {"text"}
    assert reply.text == sent.text
    assert [(c.name, c.args) for c in reply.tool_calls] == [(c.name, c.args) for c in sent.calls]


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # (the OpenAI SDK's, on arguments sent as an object)
@pytest.mark.parametrize("name", list(HARNESSES))
def test_an_adapters_reply_is_what_validation_makes(name: str) -> None:
    make, family = HARNESSES[name]
    with make() as harness:

        @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(replies(harness))
        def check(sent: Reply) -> None:
            harness.clear()
            harness.script(sent, sent)
            model: Any = harness.make_model()

            async def both() -> tuple[ModelResponse, ModelResponse]:
                whole = await model.complete(_request())
                items = [item async for item in model.stream(_request())]
                return whole, items[-1]

            whole, streamed = asyncio.run(both())
            assert_as_validated(whole, sent, USAGE_GIVEN[family])
            assert_as_validated(streamed, sent, USAGE_GIVEN[family])

        check()
