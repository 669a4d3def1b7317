"""GeminiModel's explicit caching (instructions, tools and tool config inside the cache, never
beside ``cached_content``), images returned by tools (multimodal function responses), and
``tool_choice`` modes (``allowed_function_names``, ``VALIDATED``): over HTTP against the Gemini
fake, which refuses what the API refuses, through the real SDK and Runner."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from loopwright import Agent, ConfigurationError, ImagePart, Limits, Runner, RunResult, tool
from tests.fake_gemini import CACHE_BESIDE, FakeGemini, call, reply, text
from tests.models.gemini.test_gemini_model import agent, camel, model, run, weather

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


# ---------------------------------------------------------------- explicit caching


def test_cached_content_beside_the_agents_instruction_and_tools_is_refused_before_sending(fake: FakeGemini) -> None:
    """The API answers 400 (the fake's text: ``CACHE_BESIDE``); loopwright says what to do instead."""
    fake.caches["cachedContents/theirs"] = {}
    result = run(agent(fake, options={"cached_content": "cachedContents/theirs"}))
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "create_cache" in result.error.message and "system_instruction" in result.error.message
    assert CACHE_BESIDE not in result.error.message
    assert fake.requests == []  # refused before it was sent


def test_create_cache_moves_the_instruction_tools_and_tool_config_into_the_cache(fake: FakeGemini) -> None:
    m = model(fake, tool_choice="validated")
    fake.script += [reply(call("weather", {"city": "Paris"}, signature=b"s1")), reply(text("Sunny."))]

    async def go() -> tuple[str, RunResult]:
        name = await m.create_cache(instruction="You are terse.", tools=[weather], tool_choice="validated", ttl="600s")
        a = Agent(
            name="gemini",
            model=m,
            static_instruction="You are terse.",
            tools=[weather],
            model_settings={"cached_content": name},
            limits=Limits(max_model_retries=0, retry_backoff_s=0),
        )
        return name, await Runner(a).run("Weather in Paris?")

    name, result = asyncio.run(go())
    assert result.outcome == "final" and result.output == "Sunny.", result.error
    held = fake.caches[name]
    assert held["systemInstruction"]["parts"] == [{"text": "You are terse."}]
    assert held["tools"][0]["functionDeclarations"][0]["name"] == "weather"
    assert held["toolConfig"] == {"functionCallingConfig": {"mode": "VALIDATED"}}
    assert held["ttl"] == "600s"
    generated = fake.requests[1:]
    assert len(generated) == 2
    for body in generated:
        assert body["cachedContent"] == name
        assert not {"systemInstruction", "tools", "toolConfig"} & body.keys()


def test_a_cache_made_for_other_tools_is_refused_naming_what_changed(fake: FakeGemini) -> None:
    m = model(fake)

    async def go() -> RunResult:
        name = await m.create_cache(instruction="Another instruction.", tools=[weather])
        a = agent(fake, model=m, model_settings={"cached_content": name})
        return await Runner(a).run("Weather in Paris?")

    result = asyncio.run(go())
    assert result.outcome == "failed" and result.error is not None
    assert "system_instruction" in result.error.message and "create_cache" in result.error.message
    assert len(fake.requests) == 1  # the cache was made; no generateContent was sent


# ---------------------------------------------------------------- images returned by tools


@tool
def screenshot(page: str) -> list[Any]:
    """A screenshot of a page."""
    return [f"the page {page}", ImagePart.from_bytes(PNG)]


@pytest.mark.parametrize("streamed", [False, True])
def test_an_image_a_tool_returns_goes_as_a_multimodal_function_response(fake: FakeGemini, streamed: bool) -> None:
    fake.script += [reply(call("screenshot", {"page": "home"}, id_="fc_1", signature=b"s")), reply(text("A cat."))]
    a = agent(fake, tools=(screenshot,))
    result = asyncio.run(_run(a, streamed))
    assert result.outcome == "final" and result.output == "A cat."
    (answer,) = [p for p in fake.requests[1]["contents"][-1]["parts"] if "functionResponse" in p]
    response = camel(answer["functionResponse"])
    assert response["response"] == {"result": ["the page home", {"$ref": "fc_1_1"}]}
    (blob,) = response["parts"]
    assert blob["inlineData"]["mimeType"] == "image/png" and blob["inlineData"]["displayName"] == "fc_1_1"
    assert base64.urlsafe_b64decode(blob["inlineData"]["data"]) == PNG
    assert "omitted" not in str(fake.requests[1])


def test_before_gemini_3_the_image_goes_beside_the_function_response(fake: FakeGemini) -> None:
    """Gemini 2.5 takes no media inside a function response (the fake refuses it): the image
    follows the responses in the same turn."""
    fake.script += [reply(call("screenshot", {"page": "home"}, id_="fc_1")), reply(text("A cat."))]
    result = run(agent(fake, tools=(screenshot,), model=model(fake, "gemini-2.5-flash")))
    assert result.outcome == "final", result.error
    parts = camel(fake.requests[1]["contents"][-1]["parts"])
    assert "functionResponse" in parts[0] and "parts" not in parts[0]["functionResponse"]
    assert base64.urlsafe_b64decode(parts[1]["inlineData"]["data"]) == PNG


async def _run(a: Agent, streamed: bool) -> RunResult:
    if not streamed:
        return await Runner(a).run("Look at the home page.")
    s = Runner(a).stream("Look at the home page.")
    async for _ in s:
        pass
    return s.result


# ---------------------------------------------------------------- tool_choice modes


@tool
def forecast(city: str) -> str:
    """Tomorrow's weather."""
    return f"rain in {city}"


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("validated", {"mode": "VALIDATED"}),
        ("any", {"mode": "ANY"}),
        (["forecast"], {"mode": "ANY", "allowedFunctionNames": ["forecast"]}),
        (
            {"mode": "validated", "allowed_function_names": ["weather"]},
            {"mode": "VALIDATED", "allowedFunctionNames": ["weather"]},
        ),
    ],
)
def test_tool_choice_reaches_gemini_modes_and_allowed_names(fake: FakeGemini, choice: Any, config: Any) -> None:
    fake.script += [reply(text("Fine."))]
    result = run(agent(fake, tools=(weather, forecast), model_settings={"tool_choice": choice}))
    assert result.outcome == "final", result.error
    assert camel(fake.requests[0]["toolConfig"]) == {"functionCallingConfig": config}


def test_salvage_none_wins_over_the_option(fake: FakeGemini) -> None:
    from loopwright import ModelRequest
    from loopwright.data.events import ToolSpec

    m = model(fake, tool_choice=["weather"])
    request = ModelRequest(
        messages=[], tools=(ToolSpec(name="weather", description="", input_schema={}),), tool_choice="none"
    )
    _, config = m.params(request)
    assert config["tool_config"] == {"function_calling_config": {"mode": "NONE"}}


def test_tool_choice_naming_a_tool_the_agent_lacks_fails_before_sending(fake: FakeGemini) -> None:
    result = run(agent(fake, model_settings={"tool_choice": ["nope"]}))
    assert result.outcome == "failed" and result.error is not None and "'nope'" in result.error.message
    assert fake.requests == []


@pytest.mark.parametrize("bad", ["sometimes", [], {"mode": "auto", "allowed_function_names": ["weather"]}, 3])
def test_a_bad_tool_choice_is_refused_when_the_model_is_made(fake: FakeGemini, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="tool_choice"):
        model(fake, tool_choice=bad)
