"""A cost budget is checked before each call against that call's estimated cost, so a run stops
at its cap; salvage's call is paid from the budget too (issue 37)."""

from __future__ import annotations

from decimal import Decimal

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.data.events import Usage
from loopwright.testing import CountingModel


def two_dollar_calls() -> CountingModel:
    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=10, requests=1, cost_usd=Decimal(2))
        if request.tool_choice == "none":
            return ModelResponse(parts=(TextPart(text="best so far"),), stop_reason="end_turn", usage=usage)
        made = sum(1 for m in request.messages if m.role == "assistant")
        return ModelResponse(parts=(ToolCall(name="work", args={"n": made}),), stop_reason="tool_use", usage=usage)

    return CountingModel(ScriptedModel(reply))


@tool
def work(n: int) -> str:
    """Does a piece of work."""
    return f"ok {n}"


def test_two_dollar_calls_under_a_five_dollar_cap_spend_at_most_five() -> None:
    """The report: $8 spent (a third call past the cap, then salvage's on top), outcome salvaged."""
    model = two_dollar_calls()
    agent = Agent(name="a", model=model, tools=[work], limits=Limits(max_cost_usd=5))
    result = Runner(agent).run_sync("go")
    assert model.cost_usd is not None and model.cost_usd <= 5, f"spent ${model.cost_usd} against max_cost_usd=5"
    assert result.limit == "max_cost_usd"
    assert result.outcome in ("limit", "salvaged")
    assert result.usage.cost_usd == model.cost_usd


def test_without_salvage_the_run_ends_limit_at_its_cap() -> None:
    model = two_dollar_calls()
    agent = Agent(name="a", model=model, tools=[work], limits=Limits(max_cost_usd=5, salvage=False))
    result = Runner(agent).run_sync("go")
    assert model.cost_usd is not None and model.cost_usd <= 5
    assert model.calls == 2
    assert result.outcome == "limit" and result.limit == "max_cost_usd"


def test_a_cap_with_room_for_salvage_pays_it_from_the_budget() -> None:
    model = two_dollar_calls()
    agent = Agent(name="a", model=model, tools=[work], limits=Limits(max_cost_usd=6))
    result = Runner(agent).run_sync("go")
    assert model.cost_usd is not None and model.cost_usd <= 6
    assert result.limit == "max_cost_usd"
