"""Hardening: tools see the run read-only (session state stays writable); a run started inside
a tool is a child of the run that called it: it charges the parent's budgets, inherits its
deadline and obeys ``Limits.max_depth``; ``agent_tool`` wraps an agent as such a tool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    agent_tool,
    tool,
)
from loopwright.data.events import Usage
from loopwright.testing import assert_run_invariants


class Counting:
    """A model that always asks for ``call`` (or answers, once ``answer_after`` calls were made)."""

    def __init__(self, call: str | None, answer_after: int = 10**9, tokens: int = 0, args: Any = None) -> None:
        self.call, self.answer_after, self.calls, self.tokens = call, answer_after, 0, tokens
        self.args = args or {"x": 1}

    async def complete(self, request: Any) -> ModelResponse:
        self.calls += 1
        usage = Usage(input_tokens=self.tokens, requests=1)
        if self.call is None or self.calls > self.answer_after:
            return ModelResponse(parts=(TextPart(text=f"answer {self.calls}"),), stop_reason="end_turn", usage=usage)
        return ModelResponse(parts=(ToolCall(name=self.call, args=self.args),), stop_reason="tool_use", usage=usage)


def test_a_tool_cannot_rewind_the_run() -> None:
    @tool
    def rewind(x: int, ctx: Any) -> str:
        """Rewinds."""
        ctx.run_state.iteration = 0
        return "rewound"

    model = Counting("rewind")
    agent = Agent(name="r", model=model, instruction="T.", tools=[rewind], limits=Limits(max_iterations=3))
    result = Runner(agent).run_sync("go")
    assert model.calls <= 4  # three passes and the salvage call
    answers = [p for m in result.messages for p in m.parts if getattr(p, "is_error", False)]
    assert answers and "read-only" in answers[0].content
    assert_run_invariants(result, agent)


def test_a_tool_cannot_clear_the_history_but_may_write_session_state() -> None:
    @tool
    def forget(x: int, ctx: Any) -> str:
        """Forgets."""
        ctx.state["seen"] = len(ctx.run_state.messages)
        ctx.run_state.messages.clear()
        return "forgot"

    agent = Agent(name="f", model=Counting("forget", answer_after=1), instruction="T.", tools=[forget])
    result = Runner(agent).run_sync("go")
    assert result.state["seen"] == 2
    assert result.messages[2].parts[0].is_error
    assert_run_invariants(result, agent)


def _recursive(depth_limit: int | None = None) -> tuple[Agent, Counting]:
    model = Counting("recurse")
    holder: dict[str, Runner] = {}

    @tool
    async def recurse(x: int) -> str:
        """Starts the same agent again."""
        result = await holder["runner"].run("again")
        return result.output or result.outcome

    limits = (
        Limits(max_iterations=3, retry_backoff_s=0)
        if depth_limit is None
        else Limits(max_iterations=3, retry_backoff_s=0, max_depth=depth_limit)
    )
    agent = Agent(name="rec", model=model, instruction="T.", tools=[recurse], limits=limits)
    holder["runner"] = Runner(agent)
    return agent, model


def test_runs_nested_in_tools_obey_max_depth_and_charge_the_parent() -> None:
    agent, model = _recursive()
    started = time.perf_counter()
    result = Runner(agent).run_sync("go")
    assert time.perf_counter() - started < 10
    # every run charges its model calls to its parent: the whole tree stays within the root's budget
    # each run's passes are charged to its parent: three passes in the whole tree, and one
    # salvage call for each of the (at most three) runs
    assert model.calls <= 3 + 3
    assert result.iterations <= 3


def test_max_depth_zero_refuses_nested_runs() -> None:
    agent, _ = _recursive(depth_limit=0)
    result = Runner(agent).run_sync("go")
    answer = result.messages[2].parts[0]
    assert answer.is_error and "max_depth=0" in answer.content


def test_a_child_charges_tokens_and_tool_calls_to_its_parent() -> None:
    child = Agent(name="child", model=Counting(None, tokens=7), instruction="C.")
    ask = agent_tool(child)
    parent_model = Counting("child", answer_after=1, tokens=1, args={"task": "t"})
    parent = Agent(name="parent", model=parent_model, instruction="P.", tools=[ask])
    result = Runner(parent).run_sync("go")
    assert result.outcome == "final"
    assert result.usage.input_tokens == 1 + 7 + 1  # the parent's two calls and the child's one
    assert result.iterations == 3  # the child's pass is charged to the parent


@pytest.mark.slow
def test_a_child_inherits_the_parents_deadline() -> None:
    class Slow:
        async def complete(self, request: Any) -> ModelResponse:
            await asyncio.sleep(5)
            raise AssertionError("not reached")

    child = Agent(name="child", model=Slow(), instruction="C.")
    parent = Agent(
        name="parent",
        model=ScriptedModel([[ToolCall(name="child", args={"task": "think"})], "done"]),
        instruction="P.",
        tools=[agent_tool(child)],
        limits=Limits(timeout_s=0.5, salvage=False),
    )
    started = time.perf_counter()
    result = Runner(parent).run_sync("go")
    assert time.perf_counter() - started < 2
    assert result.outcome == "limit" and result.limit == "timeout_s"


def test_agent_tool_answers_with_the_agents_output_and_reports_failures() -> None:
    child = Agent(name="researcher", model=ScriptedModel(["Lisbon: 24 C"]), instruction="Research.",
                  description="Finds facts.")  # fmt: skip
    tool_ = agent_tool(child)
    assert tool_.name == "researcher" and "Finds facts." in tool_.description
    assert tool_.spec.input_schema["required"] == ["task"]
    parent = Agent(
        name="parent",
        model=ScriptedModel([[ToolCall(name="researcher", args={"task": "weather in Lisbon"})], "It is 24 C."]),
        instruction="P.",
        tools=[tool_],
    )
    result = Runner(parent).run_sync("go")
    assert result.messages[2].parts[0].content == "Lisbon: 24 C"
    failing = agent_tool(Agent(name="broken", model=ScriptedModel([]), instruction="B."))
    parent = parent.replace(tools=[failing], model=ScriptedModel([[ToolCall(name="broken", args={"task": "x"})], "ok"]))
    answer = Runner(parent).run_sync("go").messages[2].parts[0]
    assert answer.is_error and "'broken'" in answer.content and "failed" in answer.content


def test_agent_tool_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(ConfigurationError, match="agent_tool takes an Agent"):
        agent_tool("researcher")  # type: ignore[arg-type]
