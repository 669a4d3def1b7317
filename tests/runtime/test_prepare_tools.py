"""``Agent(prepare_tools=fn)`` chooses the tools each pass's request offers (sync or async,
``ctx.deps`` in reach); act refuses a call to a tool not offered; a bad ``prepare_tools`` fails
the run with one clear line; an agent without one builds its request without awaiting."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from loopwright import Agent, ConfigurationError, RunContext, Runner, ScriptedModel, ToolCall, tool
from loopwright.data.events import ModelRequest, ToolResult, ToolSpec
from loopwright.states import preprocess

ran: list[str] = []


@tool
def search(query: str) -> str:
    """Search the web."""
    ran.append("search")
    return f"results for {query}"


@tool
def delete_all() -> str:
    """Delete everything (admins only)."""
    ran.append("delete_all")
    return "deleted"


def setup_function() -> None:
    ran.clear()


def only_search(ctx: RunContext, tools: tuple[ToolSpec, ...]) -> list[ToolSpec]:
    return [t for t in tools if t.name == "search"]


def _offered(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


def _results(request: ModelRequest) -> list[ToolResult]:
    return [p for p in request.messages[-1].parts if isinstance(p, ToolResult)]


def test_only_the_prepared_tools_are_offered_and_a_call_to_another_is_refused() -> None:
    script: list[Any] = [[ToolCall(name="delete_all", args={})], [ToolCall(name="search", args={"query": "x"})], "ok"]
    model = ScriptedModel(script)
    agent = Agent(name="a", model=model, tools=[search, delete_all], prepare_tools=only_search)
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final"
    assert [_offered(r) for r in model.requests] == [["search"]] * 3
    refused = _results(model.requests[1])
    assert refused[0].is_error and refused[0].content == (
        "tool 'delete_all' was not offered in this request; the tools offered: search"
    )
    assert ran == ["search"]


def test_prepare_tools_runs_each_pass_async_and_sees_deps_and_state() -> None:
    seen: list[int] = []

    async def by_role(ctx: RunContext[dict[str, Any]], tools: tuple[ToolSpec, ...]) -> Sequence[ToolSpec]:
        await asyncio.sleep(0)
        seen.append(ctx.run_state.iteration)
        admin = ctx.deps["admin"] and ctx.state.get("unlocked", False)
        return [t for t in tools if admin or t.name != "delete_all"]

    @tool
    def unlock(ctx: RunContext) -> str:
        """Unlock admin tools."""
        ctx.state["unlocked"] = True
        return "unlocked"

    model = ScriptedModel([[ToolCall(name="unlock", args={})], [ToolCall(name="delete_all", args={})], "ok"])
    agent = Agent(name="a", model=model, tools=[search, delete_all, unlock], prepare_tools=by_role)
    result = Runner(agent).run_sync("go", deps={"admin": True})
    assert result.outcome == "final"
    assert [_offered(r) for r in model.requests] == [
        ["search", "unlock"],
        ["search", "delete_all", "unlock"],
        ["search", "delete_all", "unlock"],
    ]
    assert ran == ["delete_all"] and seen == [0, 1, 2]


def test_an_edited_spec_reaches_the_model_and_the_tool_still_validates() -> None:
    def described(ctx: RunContext, tools: tuple[ToolSpec, ...]) -> list[ToolSpec]:
        return [t.model_copy(update={"description": "Search (today: news only)."}) for t in tools]

    model = ScriptedModel([[ToolCall(name="search", args={"query": 3})], "ok"])
    Runner(Agent(name="a", model=model, tools=[search], prepare_tools=described)).run_sync("go")
    assert model.requests[0].tools[0].description == "Search (today: news only)."
    assert _results(model.requests[1])[0].is_error and ran == []  # the tool's own schema still holds


def test_returning_the_given_tools_or_tools_themselves_is_fine() -> None:
    model = ScriptedModel(["ok", "ok"])
    Runner(Agent(name="a", model=model, tools=[search], prepare_tools=lambda ctx, tools: tools)).run_sync("go")
    Runner(Agent(name="a", model=model, tools=[search], prepare_tools=lambda ctx, tools: [search])).run_sync("go")
    assert [_offered(r) for r in model.requests] == [["search"], ["search"]]


@pytest.mark.parametrize(
    ("prepare", "said"),
    [
        (lambda ctx, tools: 1 / 0, "agent 'a': prepare_tools raised ZeroDivisionError: division by zero"),
        (
            lambda ctx, tools: [ToolSpec(name="other", description="x", input_schema={})],
            "agent 'a': prepare_tools offered 'other', which is not one of the agent's tools (search)",
        ),
        (lambda ctx, tools: None, "agent 'a': prepare_tools returned NoneType; return a list"),
        (lambda ctx, tools: ["search"], "agent 'a': prepare_tools returned 'search' among the tools"),
    ],
)
def test_a_bad_prepare_tools_fails_the_run_with_one_line(prepare: Any, said: str) -> None:
    model = ScriptedModel(["never"])
    result = Runner(Agent(name="a", model=model, tools=[search], prepare_tools=prepare)).run_sync("go")
    assert result.outcome == "failed" and result.error is not None
    assert result.error.kind == "prepare_tools" and said in result.error.message and "\n" not in result.error.message
    assert model.requests == []


def test_prepare_tools_must_be_a_function() -> None:
    with pytest.raises(ConfigurationError, match="prepare_tools must be a function"):
        Agent(name="a", model=ScriptedModel(["x"]), prepare_tools=3)  # type: ignore[arg-type]


def test_an_agent_without_prepare_tools_builds_its_request_without_awaiting() -> None:
    """Nothing per pass for agents that do not use it: preprocess stays a plain call."""
    runner = Runner(Agent(name="a", model=ScriptedModel(["x"]), tools=[search]))
    run = runner.attach(runner.new_run("go"))
    assert preprocess(run.state, run.ctx) is None
    assert run.state.request is not None and _offered(run.state.request) == ["search"]
    with_prepare = Runner(Agent(name="a", model=ScriptedModel(["x"]), tools=[search], prepare_tools=only_search))
    run = with_prepare.attach(with_prepare.new_run("go"))
    waits = preprocess(run.state, run.ctx)
    assert waits is not None
    asyncio.run(waits)  # type: ignore[arg-type]
