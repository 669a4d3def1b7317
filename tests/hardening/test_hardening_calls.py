"""Hardening: every call of a reply runs at most once and is answered once, whatever its id;
``max_tool_calls`` bounds the calls executed; the kit checks both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.data.events import Message, ModelResponse, TextPart, ToolResult
from loopwright.testing import InvariantViolation, assert_run_invariants


def _pay_agent(paid: list[int], *, confirm: bool, **limits: Any) -> Agent:
    @tool(requires_confirmation=confirm)
    def pay(amount: int) -> str:
        """Pays an amount."""
        paid.append(amount)
        return f"paid {amount}"

    script = [[ToolCall(id="dup", name="pay", args={"amount": 7}), ToolCall(id="dup", name="pay", args={"amount": 5})]]
    return Agent(
        name="payer",
        model=ScriptedModel([*script, "done"]),
        instruction="Pay.",
        tools=[pay],
        limits=Limits(retry_backoff_s=0, **limits),
    )


def test_duplicate_ids_in_one_reply_each_run_once() -> None:
    paid: list[int] = []
    agent = _pay_agent(paid, confirm=False)
    result = Runner(agent).run_sync("pay")
    assert sorted(paid) == [5, 7]
    calls = result.messages[1].parts
    answers = result.messages[2].parts
    assert calls[0].id == "dup" and len({c.id for c in calls}) == 2  # the first keeps its id
    assert [a.call_id for a in answers] == [c.id for c in calls]
    assert [a.content for a in answers] == ["paid 7", "paid 5"]
    assert_run_invariants(result, agent)


def test_duplicate_ids_approved_each_run_once() -> None:
    paid: list[int] = []
    agent = _pay_agent(paid, confirm=True)
    runner = Runner(agent)
    waiting = runner.run_sync("pay")
    assert waiting.outcome == "suspended" and len(waiting.pending) == 2
    assert len({p.call_id for p in waiting.pending}) == 2
    result = runner.resume_sync(waiting, {p.call_id: approve() for p in waiting.pending})
    assert result.outcome == "final"
    assert sorted(paid) == [5, 7]


def test_max_tool_calls_bounds_executions() -> None:
    ran: list[int] = []

    @tool
    def work(n: int) -> int:
        """Works."""
        ran.append(n)
        return n

    wide = [ToolCall(name="work", args={"n": i}) for i in range(500)]
    agent = Agent(
        name="w",
        model=ScriptedModel([wide, [ToolCall(name="work", args={"n": -1})], "done"]),
        instruction="Work.",
        tools=[work],
        limits=Limits(max_tool_calls=3, retry_backoff_s=0),
    )
    result = Runner(agent).run_sync("go")
    assert sorted(ran) == [0, 1, 2]  # sync tools run in threads, concurrently
    assert result.tool_calls == 3
    answers = result.messages[2].parts
    assert len(answers) == 500
    assert all(a.is_error and "not run: tool-call budget spent (max_tool_calls=3)" in a.content for a in answers[3:])
    assert result.outcome in ("salvaged", "limit") and result.limit == "max_tool_calls"
    assert_run_invariants(result, agent)


def test_a_sub_agents_own_tool_call_budget_bounds_its_executions() -> None:
    ran: list[int] = []

    @tool
    def work(n: int) -> int:
        """Works."""
        ran.append(n)
        return n

    wide = [ToolCall(name="work", args={"n": i}) for i in range(10)]
    helper = Agent(
        name="helper", model=ScriptedModel([]), instruction="Help.", tools=[work], limits=Limits(max_tool_calls=2)
    )
    root = Agent(
        name="root",
        model=ScriptedModel([]),
        instruction="Route.",
        sub_agents=[helper],
        limits=Limits(max_tool_calls=50, retry_backoff_s=0, salvage=False),
    )
    from loopwright.testing import scripted

    transfer = ToolCall(name="transfer_to_agent", args={"agent_name": "helper", "task": "work"})
    agent = scripted(root, [[transfer], wide, "done"])
    Runner(agent).run_sync("go")
    assert sorted(ran) == [0, 1]


def _result_with(messages: list[Message], tool_calls: int = 0) -> Any:
    agent = Agent(name="t", model=ScriptedModel(["ok"]), instruction="T.")
    result = Runner(agent).run_sync("hi")
    return result.model_copy(update={"messages": messages, "tool_calls": tool_calls}), agent


def test_the_kit_finds_an_answer_to_no_call() -> None:
    stray = Message(role="user", parts=(ToolResult(call_id="ghost", name="x", content="1"),))
    result, agent = _result_with([Message(role="user", parts=(TextPart(text="hi"),)), stray])
    with pytest.raises(InvariantViolation, match="answers \\['ghost'\\] but the turn before calls \\[\\]"):
        assert_run_invariants(result, agent)


def test_the_kit_counts_executions_against_max_tool_calls() -> None:
    agent = Agent(name="t", model=ScriptedModel(["ok"]), instruction="T.", limits=Limits(max_tool_calls=2))
    result = Runner(agent).run_sync("hi").model_copy(update={"tool_calls": 5})
    with pytest.raises(InvariantViolation, match="tool calls executed <= max_tool_calls"):
        assert_run_invariants(result, agent)


def test_duplicate_ids_from_a_model_function_are_made_unique() -> None:
    def reply(request: Any) -> ModelResponse:
        if len(request.messages) > 1:
            return ModelResponse(parts=(TextPart(text="done"),))
        same = ToolCall(id="x", name="echo", args={"v": 1})
        return ModelResponse(parts=(same, same, same), stop_reason="tool_use")

    seen: list[int] = []

    @tool
    def echo(v: int) -> int:
        """Echo."""
        seen.append(v)
        return v

    agent = Agent(name="e", model=ScriptedModel(reply), instruction="E.", tools=[echo])
    result = asyncio.run(Runner(agent).run("go"))
    assert seen == [1, 1, 1] and len({a.call_id for a in result.messages[2].parts}) == 3
    assert_run_invariants(result, agent)


def test_the_kit_holds_a_run_to_its_max_cost_usd_plus_one_step() -> None:
    """The kit checked tokens and tool calls against their budgets but not the cost in USD."""
    from decimal import Decimal

    from loopwright import Usage
    from loopwright.models import register_price
    from loopwright.models.prices import unregister_price

    register_price("kit-priced-model", input=0, output=1000)  # $0.001 an output token
    try:
        priced = ModelResponse(
            parts=(TextPart(text="ok"),), usage=Usage(requests=1, output_tokens=5), model="kit-priced-model"
        )
        agent = Agent(name="t", model=ScriptedModel([priced]), instruction="T.", limits=Limits(max_cost_usd=0.01))
        result = Runner(agent).run_sync("hi")
        assert result.cost_usd == Decimal("0.005")
        assert_run_invariants(result, agent)  # within budget
        overspent = result.model_copy(update={"cost_usd": Decimal("0.02")})  # $0.01 + one $0.005 step < $0.02
        with pytest.raises(InvariantViolation, match="cost within max_cost_usd plus at most one step"):
            assert_run_invariants(overspent, agent)
    finally:
        unregister_price("kit-priced-model")
