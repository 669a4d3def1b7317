"""A tool call is run only if its tool was offered in the request the model answered: a tool
taken out by ``before_model`` or a request processor, or not the agent's, is answered with an
error naming the tools that were offered, and never runs."""

from __future__ import annotations

from typing import Any

from loopwright import Agent, ModelRequest, Runner, ScriptedModel, ToolCall, tool
from loopwright.data.events import ToolResult
from loopwright.extend import Extension
from loopwright.testing import assert_run_invariants

ran: list[str] = []


@tool
def look(x: int) -> str:
    """Looks."""
    ran.append("look")
    return "looked"


@tool
def delete(x: int) -> str:
    """Deletes everything."""
    ran.append("delete")
    return "deleted"


def _answers(result: Any) -> list[ToolResult]:
    return [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]


def _without_delete(request: ModelRequest, ctx: Any) -> ModelRequest:
    return request.model_copy(update={"tools": tuple(t for t in request.tools if t.name != "delete")})


def test_a_tool_before_model_took_out_is_not_run() -> None:
    ran.clear()
    model = ScriptedModel([[ToolCall(name="delete", args={"x": 1}), ToolCall(name="look", args={"x": 1})], "done"])
    agent = Agent(name="a", model=model, instruction="T.", tools=[look, delete], before_model=_without_delete)
    result = Runner(agent).run_sync("go")
    assert ran == ["look"], f"a tool not offered in the request ran: {ran}"
    refused, looked = _answers(result)
    assert refused.is_error and not looked.is_error
    assert refused.content == "tool 'delete' was not offered in this request; the tools offered: look", refused.content
    assert result.outcome == "final"
    assert_run_invariants(result, agent)


def test_a_request_with_no_tools_refuses_every_call() -> None:
    ran.clear()

    def no_tools(request: ModelRequest, ctx: Any) -> ModelRequest:
        return request.model_copy(update={"tools": ()})

    model = ScriptedModel([[ToolCall(name="look", args={"x": 1})], "done"])
    agent = Agent(name="a", model=model, instruction="T.", tools=[look], before_model=no_tools)
    result = Runner(agent).run_sync("go")
    assert ran == []
    (refused,) = _answers(result)
    assert refused.is_error and refused.content.endswith("the tools offered: none"), refused.content


def test_a_tool_a_request_processor_took_out_is_not_run() -> None:
    ran.clear()

    def hide_delete(request: ModelRequest, rs: Any, ctx: Any) -> ModelRequest:
        return _without_delete(request, ctx)

    model = ScriptedModel([[ToolCall(name="delete", args={"x": 1})], "done"])
    hiding = Extension(name="hide_delete", request=hide_delete)
    agent = Agent(name="a", model=model, instruction="T.", tools=[look, delete], extensions=[hiding])
    result = Runner(agent).run_sync("go")
    assert ran == []
    (refused,) = _answers(result)
    assert refused.is_error and "'delete' was not offered" in refused.content


def test_a_tool_the_agent_does_not_have_is_answered_with_the_offered_tools() -> None:
    ran.clear()
    model = ScriptedModel([[ToolCall(name="rm", args={})], "done"])
    agent = Agent(name="a", model=model, instruction="T.", tools=[look])
    (refused,) = _answers(Runner(agent).run_sync("go"))
    assert refused.is_error and refused.content == "unknown tool 'rm'; available tools: look"


def test_offered_tools_run_as_before() -> None:
    ran.clear()
    model = ScriptedModel([[ToolCall(name="look", args={"x": 1}), ToolCall(name="delete", args={"x": 2})], "done"])
    agent = Agent(name="a", model=model, instruction="T.", tools=[look, delete])
    result = Runner(agent).run_sync("go")
    assert sorted(ran) == ["delete", "look"]
    assert [a.content for a in _answers(result)] == ["looked", "deleted"]
