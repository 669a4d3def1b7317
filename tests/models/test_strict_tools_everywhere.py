"""``Agent(strict_tools=True)`` reaches every tool a request carries (a toolset's, and those
``prepare_tools`` returns), seen in the request body over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

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
