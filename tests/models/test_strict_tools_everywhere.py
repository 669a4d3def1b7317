"""``Agent(strict_tools=True)`` reaches every tool a request carries (a toolset's, and those
``prepare_tools`` returns), seen in the request body over HTTP; ``@tool(strict=True)`` sends
``strict: true`` on Claude and on both OpenAI APIs."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, Limits, Runner, RunResult, tool
from tests.fake_claude import FakeClaude, message, text
from tests.runtime.test_toolsets import Local


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


@tool(strict=False)
def loose(q: str) -> str:
    """Loose on purpose."""
    return q


def run(fake: FakeClaude, tools: list[Any], **kw: Any) -> RunResult:
    async def go() -> RunResult:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
        model = AnthropicModel("claude-opus-4-6", max_tokens=256, client=client, cache=None)
        agent = Agent(name="a", model=model, tools=tools, limits=Limits(max_model_retries=0), strict_tools=True, **kw)
        try:
            async with Runner(agent) as runner:
                return await runner.run("go")
        finally:
            await client.close()

    return asyncio.run(go())


def sent(fake: FakeClaude) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in fake.requests[0]["tools"]}


def test_a_toolsets_tools_are_sent_strict() -> None:
    with FakeClaude(script=[message(text("ok"))]) as fake:
        result = run(fake, [weather, Local()])
    assert result.outcome == "final", result.error
    tools = sent(fake)
    assert tools["weather"]["strict"] is True
    assert tools["double"]["strict"] is True and tools["double"]["input_schema"]["additionalProperties"] is False


def test_the_tools_prepare_tools_returns_are_sent_strict() -> None:
    def offer(ctx: Any, specs: Any) -> list[Any]:
        return [weather, loose, *(s for s in specs if s.name == "double")]  # Tools, and a toolset's spec

    with FakeClaude(script=[message(text("ok"))]) as fake:
        result = run(fake, [weather, loose, Local()], prepare_tools=offer)
    assert result.outcome == "final", result.error
    tools = sent(fake)
    assert tools["weather"]["strict"] is True and tools["double"]["strict"] is True
    assert "strict" not in tools["loose"]  # a tool's own choice still wins


def test_without_strict_tools_nothing_is_made_strict() -> None:
    async def go(fake: FakeClaude) -> RunResult:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
        model = AnthropicModel("claude-opus-4-6", max_tokens=256, client=client, cache=None)
        offer = lambda ctx, specs: [weather, *specs]  # noqa: E731
        agent = Agent(name="a", model=model, tools=[weather, Local()], prepare_tools=offer)
        try:
            async with Runner(agent) as runner:
                return await runner.run("go")
        finally:
            await client.close()

    with FakeClaude(script=[message(text("ok"))]) as fake:
        assert asyncio.run(go(fake)).outcome == "final"
    assert all("strict" not in t for t in fake.requests[0]["tools"])


# ---------------------------------------------------------------- OpenAI: both APIs


@tool(strict=True)
def forecast(city: str, days: int = 1) -> str:
    """Forecast for a city."""
    return f"{city}: {days} day(s) of sun"


def openai_run(api: str, tools: list[Any], script: list[Any], **kw: Any) -> tuple[RunResult, list[dict[str, Any]]]:
    import openai

    from loopwright.models.openai import OpenAIModel
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(script=script) as fake:
        url = fake.base_url
        model = OpenAIModel("gpt-5.5", api=api, client=lambda: openai.AsyncOpenAI(base_url=url, api_key="k"))  # type: ignore[arg-type]
        agent = Agent(name="a", model=model, tools=tools, limits=Limits(max_model_retries=0), **kw)
        result = asyncio.run(Runner(agent).run("go"))
    return result, fake.requests


def openai_tools(api: str, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body["tools"]} if api == "chat" else {
        t["name"]: t for t in body["tools"]}  # fmt: skip


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_strict_tool_is_sent_strict_on_both_openai_apis(api: str) -> None:
    from tests.fake_openai import function_call, response, text

    script = [response(function_call("call_1", "forecast", {"city": "Paris", "days": None})), response(text("ok"))]
    result, bodies = openai_run(api, [forecast, loose], script)
    assert result.outcome == "final", result.error
    tools = openai_tools(api, bodies[0])
    strict = tools["forecast"]
    assert strict["strict"] is True
    assert strict["parameters"]["additionalProperties"] is False
    assert sorted(strict["parameters"]["required"]) == ["city", "days"]  # strict mode wants every property
    assert {"type": "null"} in strict["parameters"]["properties"]["days"]["anyOf"]
    assert tools["loose"].get("strict") in (None, False)
    # the null strict mode made the model send for the optional argument is dropped: the default applies
    answered = [p.content for m in result.messages for p in m.parts if p.type == "tool_result"]
    assert answered == ["Paris: 1 day(s) of sun"]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_strict_tools_on_the_agent_reach_openai(api: str) -> None:
    from tests.fake_openai import response, text

    _, bodies = openai_run(api, [weather, loose], [response(text("ok"))], strict_tools=True)
    tools = openai_tools(api, bodies[0])
    assert tools["weather"]["strict"] is True and tools["weather"]["parameters"]["additionalProperties"] is False
    assert tools["loose"].get("strict") in (None, False)
