"""What the three model adapters share has one owner each: the per-event-loop clients
(:mod:`loopwright.models.clients`) and the ``Retry-After`` reader (:mod:`loopwright.models.http_errors`),
pinned for Claude, OpenAI and Gemini alike over real HTTP against the fake servers."""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from hypothesis import given
from hypothesis import strategies as st

from loopwright import AnthropicModel, ModelError
from loopwright.data.events import Message, ModelRequest, TextPart
from loopwright.models.clients import PerLoopClients
from loopwright.models.gemini import GeminiModel
from loopwright.models.http_errors import retry_after, wait_seconds
from loopwright.models.openai import OpenAIModel
from tests import fake_claude as fc
from tests import fake_gemini as fg
from tests import fake_openai as fo


@dataclass
class Provider:
    """One adapter against its fake server: how to make its SDK client, its model, a reply and
    a 429 with a given ``Retry-After`` header."""

    name: str
    fake: Callable[[], AbstractContextManager[Any]]
    sdk_client: Callable[[str], Any]
    model: Callable[[Any], Any]
    ok: Callable[[str], Any]
    busy: Callable[[str], Any]


PROVIDERS = {
    "claude": Provider(
        "AnthropicModel",
        fc.FakeClaude,
        lambda url: anthropic.AsyncAnthropic(base_url=url, api_key="k"),
        lambda client: AnthropicModel("claude-test", max_tokens=64, cache=None, client=client),
        lambda text: fc.message(fc.text(text)),
        lambda after: fc.Error(429, "rate_limit_error", "slow down", retry_after=after),
    ),
    "openai": Provider(
        "OpenAIModel",
        fo.FakeOpenAI,
        lambda url: openai.AsyncOpenAI(base_url=url, api_key="k"),
        lambda client: OpenAIModel("gpt-5.5", client=client),
        lambda text: fo.response(fo.text(text)),
        lambda after: fo.Error(429, "slow down", kind="rate_limit_error", retry_after=after),
    ),
    "gemini": Provider(
        "GeminiModel",
        fg.FakeGemini,
        lambda url: genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=url)),
        lambda client: GeminiModel(fg.MODEL, client=client),
        lambda text: fg.reply(fg.text(text)),
        lambda after: fg.Error(429, "slow down", retry_after=after),
    ),
}


@pytest.fixture(params=sorted(PROVIDERS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Provider, Any]]:
    provider = PROVIDERS[request.param]
    with provider.fake() as fake:
        yield provider, fake


def ask() -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", parts=(TextPart(text="hi"),))])


# ---------------------------------------------------------------- per-loop clients


def test_every_adapter_takes_its_clients_from_the_one_owner() -> None:
    for model in (AnthropicModel, OpenAIModel, GeminiModel):
        assert issubclass(model, PerLoopClients), model
        for name in ("client", "aclose", "_given_client", "_make_client", "_init_clients"):
            assert getattr(model, name) is getattr(PerLoopClients, name), (model, name)


def test_a_factory_gives_each_loop_its_own_client_closed_with_the_loop(served: tuple[Provider, Any]) -> None:
    provider, fake = served
    made: list[Any] = []

    def factory() -> Any:
        made.append(provider.sdk_client(fake.base_url))
        return made[-1]

    m = provider.model(factory)
    fake.script += [provider.ok("a"), provider.ok("b"), provider.ok("c")]

    async def twice() -> tuple[Any, Any]:
        await m.complete(ask())
        first = await m.client()
        await m.complete(ask())
        return first, await m.client()

    one, again = asyncio.run(twice())
    assert one is again  # one client for the loop
    asyncio.run(m.complete(ask()))
    assert len(made) == 2 and not m._own  # both loops closed theirs and left no entry behind
    for client in made:
        if hasattr(client, "is_closed"):
            assert client.is_closed()


def test_aclose_closes_the_loops_client_and_the_next_call_makes_another(served: tuple[Provider, Any]) -> None:
    provider, fake = served
    made: list[Any] = []
    m = provider.model(lambda: made.append(provider.sdk_client(fake.base_url)) or made[-1])
    fake.script += [provider.ok("a"), provider.ok("b")]

    async def go() -> None:
        await m.complete(ask())
        await m.aclose()
        assert not m._own
        await m.complete(ask())

    asyncio.run(go())
    assert len(made) == 2


def test_a_given_client_is_bound_to_its_first_loop(served: tuple[Provider, Any]) -> None:
    provider, fake = served
    m = provider.model(provider.sdk_client(fake.base_url))
    fake.script += [provider.ok("one")]
    assert asyncio.run(m.complete(ask())).text == "one"
    with pytest.raises(ModelError, match="first used in another event loop") as caught:
        asyncio.run(m.complete(ask()))
    assert provider.name in str(caught.value) and "client=lambda:" in str(caught.value)
    assert not caught.value.retryable and len(fake.requests) == 1


def test_a_factory_that_returns_something_else_is_a_clear_error(served: tuple[Provider, Any]) -> None:
    provider, _ = served
    m = provider.model(lambda: "not a client")
    with pytest.raises(ModelError, match="the client factory returned str, not a"):
        asyncio.run(m.complete(ask()))


# ---------------------------------------------------------------- Retry-After


def _http_date(seconds_ahead: float) -> str:
    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


HEADERS = st.one_of(
    st.text(max_size=40),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(min_value=-1e6, max_value=1e6).map(lambda s: _http_date(s)),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "Infinity", "37s", "1.5s", "", " ", "Wed, 32 Foo 2026"]),
)


@pytest.mark.slow
@given(after=st.none() | HEADERS, after_ms=st.none() | HEADERS)
def test_the_retry_after_reader_never_raises_and_gives_a_finite_wait_or_none(
    after: str | None, after_ms: str | None
) -> None:
    headers = {k: v for k, v in (("retry-after", after), ("retry-after-ms", after_ms)) if v is not None}
    ascii_only = all(v.isascii() for v in headers.values())
    for given_headers in (headers, httpx.Headers(headers)) if ascii_only else (headers,):
        wait = retry_after(given_headers)
        assert wait is None or (isinstance(wait, float) and math.isfinite(wait) and wait >= 0), (headers, wait)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "garbage", "retry-after": "9"}, 9.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "1e999"}, None),
        ({"retry-after": ""}, None),
        ({}, None),
        (None, None),
        ({"retry-after": _http_date(-60)}, 0.0),
    ],
)
def test_the_retry_after_reader_reads_seconds_milliseconds_and_dates(headers: Any, wait: float | None) -> None:
    found = retry_after(httpx.Headers(headers) if headers else headers)
    assert found == wait


def test_an_http_date_is_the_seconds_until_it() -> None:
    found = retry_after({"retry-after": _http_date(30)})
    assert found is not None and 28 <= found <= 31


def test_a_google_duration_is_seconds() -> None:
    assert wait_seconds("37s") == 37.0 and wait_seconds("1.5s") == 1.5 and wait_seconds("s") is None


@pytest.mark.parametrize(("header", "wait"), [("7", 7.0), ("nan", None), ("1e999", None), ("soon", None)])
def test_every_adapter_reads_retry_after_the_same_way(
    served: tuple[Provider, Any], header: str, wait: float | None
) -> None:
    """A garbage header (``nan``, an overflow) was a NaN or infinite wait in every adapter."""
    provider, fake = served
    m = provider.model(lambda: provider.sdk_client(fake.base_url))
    fake.script.append(provider.busy(header))
    with pytest.raises(ModelError) as caught:
        asyncio.run(m.complete(ask()))
    assert caught.value.status == 429 and caught.value.retryable
    assert caught.value.retry_after == wait, (provider.name, header, caught.value.retry_after)


# ---------------------------------------------------------------- the OpenAI APIs' shared request shapes


@pytest.mark.parametrize("choice", [None, "auto", "any", "none"])
def test_both_openai_apis_carry_the_same_tools_choice_and_schema(choice: Any) -> None:
    """Chat Completions and the Responses API wrap them their own way, from one owner."""
    from pydantic import BaseModel

    from loopwright.data.events import ToolSpec
    from loopwright.features.structured_output import instruction_for

    class Answer(BaseModel):
        city: str

    weather = ToolSpec(name="weather", description="The weather.", input_schema={"type": "object"})
    request = ModelRequest(
        instructions=(instruction_for(Answer),), messages=ask().messages, tools=(weather,), tool_choice=choice
    )
    chat = OpenAIModel("gpt-5.5", api="chat", client=lambda: None).params(request)  # type: ignore[arg-type, return-value]
    responses = OpenAIModel("gpt-5.5", client=lambda: None).params(request)  # type: ignore[arg-type, return-value]
    declared = {"name": "weather", "description": "The weather.", "parameters": {"type": "object"}}
    assert chat["tools"] == [{"type": "function", "function": declared}]
    assert responses["tools"] == [{"type": "function", **declared, "strict": False}]
    wanted = {None: None, "auto": "auto", "any": "required", "none": "none"}[choice]
    assert chat.get("tool_choice") == responses.get("tool_choice") == wanted
    schema = chat["response_format"]["json_schema"]
    assert chat["response_format"]["type"] == "json_schema" and schema["name"] == "Answer"
    assert responses["text"]["format"] == {"type": "json_schema", **schema} and not schema["strict"]
    assert schema["schema"]["properties"] == {"city": {"title": "City", "type": "string"}}
