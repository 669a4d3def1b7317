"""Claude tool definitions over real HTTP against the fake Messages API: strict tools, tools
Anthropic defines run by the user's handlers, and provider fields (defer_loading with tool
search, input_examples, eager_input_streaming)."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Literal

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright import Agent, AnthropicModel, ConfigurationError, Limits, Runner, RunResult, Tool, tool
from loopwright.runtime.claude_tools import claude_tool
from tests.fake_claude import FakeClaude, message, server_tool_use, text, tool_use, tools_refusal


@tool(strict=True)
def book(city: str, nights: int) -> str:
    """Book a hotel."""
    return f"booked {nights} nights in {city}"


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def run(fake: FakeClaude, tools: list[Any], *, prompt: str = "go", **kw: Any) -> RunResult:
    async def go() -> RunResult:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
        options = kw.pop("options", {})
        model = AnthropicModel("claude-opus-4-6", max_tokens=256, client=client, cache=None, **options)
        a = Agent(name="a", model=model, tools=tools, limits=Limits(max_model_retries=0), **kw)
        try:
            return await Runner(a).run(prompt)
        finally:
            await client.close()

    return asyncio.run(go())


def sent_tools(fake: FakeClaude, n: int = 0) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in fake.requests[n]["tools"]}


def test_a_strict_tool_is_sent_strict_with_a_closed_schema() -> None:
    with FakeClaude(script=[message(tool_use("t1", "book", {"city": "Oslo", "nights": 2}), stop_reason="tool_use"),
                            message(text("done"))]) as fake:  # fmt: skip
        result = run(fake, [book, weather])
    assert result.outcome == "final", result.error
    tools = sent_tools(fake)
    assert tools["book"]["strict"] is True
    assert tools["book"]["input_schema"]["additionalProperties"] is False
    assert "strict" not in tools["weather"]  # not asked for


def test_strict_tools_on_the_agent_is_every_tools_default() -> None:
    @tool(strict=False)
    def loose(q: str) -> str:
        """Loose."""
        return q

    with FakeClaude(script=[message(text("ok"))]) as fake:
        result = run(fake, [weather, loose], strict_tools=True)
    assert result.outcome == "final", result.error
    tools = sent_tools(fake)
    assert tools["weather"]["strict"] is True and tools["weather"]["input_schema"]["additionalProperties"] is False
    assert "strict" not in tools["loose"]  # a tool's own choice wins


def test_strict_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="strict must be True, False or None"):
        tool(strict="yes")(weather.fn)  # type: ignore[call-overload]


def test_an_anthropic_defined_tool_is_declared_by_type_and_run_by_its_handler() -> None:
    seen: list[dict[str, Any]] = []

    def run_bash(command: str | None = None, restart: bool = False) -> str:
        seen.append({"command": command, "restart": restart})
        return "file.txt"

    bash = claude_tool("bash_20250124", run_bash)
    script = [message(tool_use("t1", "bash", {"command": "ls"}), stop_reason="tool_use"), message(text("one file"))]
    with FakeClaude(script=script) as fake:
        result = run(fake, [bash])
    assert result.outcome == "final", result.error
    assert fake.requests[0]["tools"] == [{"type": "bash_20250124", "name": "bash"}]
    assert seen == [{"command": "ls", "restart": False}]
    answer = fake.requests[1]["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and answer["content"] == "file.txt"


def test_text_editor_and_memory_get_the_names_the_api_wants() -> None:
    def edit(command: str, path: str) -> str:
        return "ok"

    assert claude_tool("text_editor_20250728", edit).spec.provider["anthropic"]["name"] == "str_replace_based_edit_tool"
    assert claude_tool("memory_20250818", edit).name == "memory"
    with pytest.raises(ConfigurationError, match="no known name"):
        claude_tool("gadget_20990101", edit)


def test_defer_loading_and_input_examples_reach_the_api_with_tool_search() -> None:
    @tool(provider={"anthropic": {"defer_loading": True, "input_examples": [{"city": "Oslo", "nights": 1}]}})
    def rare(city: str, nights: int) -> str:
        """A rarely used tool."""
        return "rare"

    search = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    reference = {"type": "tool_search_tool_result", "tool_use_id": "s1",
                 "content": {"type": "tool_search_tool_search_result",
                             "tool_references": [{"type": "tool_reference", "tool_name": "rare"}]}}  # fmt: skip
    script = [
        message(server_tool_use("s1", "tool_search_tool_regex", {"query": "rare"}), reference,
                tool_use("t1", "rare", {"city": "Oslo", "nights": 1}), stop_reason="tool_use"),
        message(text("done")),
    ]  # fmt: skip
    with FakeClaude(script=script) as fake:
        result = run(fake, [weather, rare], options={"tools": [search]})
    assert result.outcome == "final", result.error
    tools = sent_tools(fake)
    assert tools["rare"]["defer_loading"] is True
    assert tools["rare"]["input_examples"] == [{"city": "Oslo", "nights": 1}]
    assert tools["tool_search_tool_regex"] == search
    kept = [b["type"] for b in fake.requests[1]["messages"][1]["content"]]
    assert kept[:2] == ["server_tool_use", "tool_search_tool_result"]  # the search went back as it came


@tool(provider={"anthropic": {"eager_input_streaming": True}})
def write(body: str) -> str:
    """Write a long text."""
    return "written"


def streamed(fake: FakeClaude, tools: list[Any]) -> list[Any]:
    async def go() -> list[Any]:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
        model = AnthropicModel("claude-opus-4-6", max_tokens=256, client=client, cache=None)
        try:
            return [e async for e in Runner(Agent(name="a", model=model, tools=tools)).stream("go")]
        finally:
            await client.close()

    return asyncio.run(go())


def test_an_eager_tools_input_streams_as_tool_input_delta_events() -> None:
    body = "A long letter, " * 8
    script = [
        message(tool_use("t1", "write", {"body": body}), tool_use("t2", "weather", {"city": "Oslo"}),
                stop_reason="tool_use"),
        message(text("sent")),
    ]  # fmt: skip
    with FakeClaude(script=script) as fake:
        events = streamed(fake, [write, weather])
    assert sent_tools(fake)["write"]["eager_input_streaming"] is True
    pieces = [e for e in events if e.type == "tool_input_delta"]
    assert len(pieces) > 3 and {(e.call_id, e.name) for e in pieces} == {("t1", "write")}  # weather is not eager
    assert json.loads("".join(e.partial_json for e in pieces)) == {"body": body}
    assert events[-1].type == "run_finished"


class Address(BaseModel):
    street: str
    zip_code: int | None = None


_TYPES: list[Any] = [str, int, float, bool, list[str], dict[str, int], Address, list[Address], str | None,
                     Literal["a", "b"], tuple[int, str]]  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=5), st.booleans())
def test_every_strict_schema_a_tool_can_have_is_one_the_api_takes(types: list[Any], defaults: bool) -> None:
    """Whatever the parameters' types (nested models, lists, optionals, literals), the strict
    definition closes every object, as the fake's rule (the API's) demands."""
    params = [
        inspect.Parameter(f"p{i}", inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                          default=None if defaults and i % 2 else inspect.Parameter.empty)
        for i, kind in enumerate(types)
    ]  # fmt: skip

    def fn(**kwargs: Any) -> str:
        return ""

    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params}
    made = Tool(fn, name="shaped", description="Shaped.", strict=True, localns={"Address": Address})
    definition = AnthropicModel("claude-opus-4-6", cache=None)._definitions(made.spec)
    assert definition["strict"] is True
    assert tools_refusal([definition]) is None, definition
