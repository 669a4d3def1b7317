"""Parallel branches share their parent's cost budget (issue 42, S4): under ``max_cost_usd=0.50``
two branches charged $1.20 and eight $1.30 before. Now every call is checked against the room
left above it before it is sent, so the tree spends at most its cap (counted inside the models),
and the run ends ``limit`` naming ``max_cost_usd``, not ``failed``."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.data.events import Usage
from loopwright.runtime import nesting
from loopwright.testing import CountingModel
from loopwright.workflows import MapAgent, ParallelAgent

CALL = Decimal("0.15")


@tool
async def look(n: int) -> str:
    """Looks something up."""
    return f"found {n}"


def branch(name: str) -> tuple[Agent, CountingModel]:
    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=10, requests=1, cost_usd=CALL)
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= 5:
            return ModelResponse(parts=(TextPart(text=f"{name} done"),), stop_reason="end_turn", usage=usage)
        return ModelResponse(parts=(ToolCall(name="look", args={"n": made}),), stop_reason="tool_use", usage=usage)

    model = CountingModel(ScriptedModel(reply))
    return Agent(name=name, model=model, tools=[look]), model


@pytest.mark.parametrize("branches", [2, 8])
def test_parallel_branches_spend_at_most_the_parents_cap(branches: int) -> None:
    made = [branch(f"b{i}") for i in range(branches)]
    tree = ParallelAgent("fan", branches=[a for a, _ in made], limits=Limits(max_cost_usd=0.5))
    result = Runner(tree).run_sync("go")
    spent = sum((m.cost_usd or Decimal(0) for _, m in made), Decimal(0))
    assert spent <= Decimal("0.5"), f"{branches} branches spent ${spent} against max_cost_usd=0.50"
    assert result.outcome in ("limit", "salvaged"), (result.outcome, result.error)
    assert result.limit == "max_cost_usd"


def priced(name: str, cost: Decimal, wants: int) -> tuple[Agent, CountingModel]:
    """A branch whose every call costs ``cost`` (reported by the model: no price table entry) and
    that wants ``wants`` tool calls before it answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=10, requests=1, cost_usd=cost)
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= wants:
            return ModelResponse(parts=(TextPart(text=f"{name} done"),), stop_reason="end_turn", usage=usage)
        return ModelResponse(parts=(ToolCall(name="look", args={"n": made}),), stop_reason="tool_use", usage=usage)

    model = CountingModel(ScriptedModel(reply))
    return Agent(name=name, model=model, tools=[look]), model


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    costs=st.lists(st.integers(1, 40), min_size=1, max_size=6),
    same=st.booleans(),
    wants=st.integers(0, 6),
    cap_cents=st.integers(5, 120),
)
def test_parallel_branches_never_spend_past_the_cap(costs: list[int], same: bool, wants: int, cap_cents: int) -> None:
    """The bound (docs/guide/workflows.md, "Cost under parallel children"): each call's estimate
    is reserved on the capped runs above before it is sent, so the tree spends at most its cap
    plus what calls cost over their estimates. A branch's call is estimated at its last call's
    cost, its first at the dearest call seen under the cap (the first of all, whose cost nothing
    tells, is made alone, with all the room reserved). So with one price for every call the
    tree spends at most its cap (or, a call dearer than the whole cap, that one call and nothing
    after it); with branches of different prices, at most one call per branch (its first)
    costs more than its estimate."""
    if same:
        costs = [costs[0]] * len(costs)
    cap = Decimal(cap_cents) / 100
    made = [priced(f"b{i}", Decimal(c) / 100, wants) for i, c in enumerate(costs)]
    tree = ParallelAgent("fan", branches=[a for a, _ in made], limits=Limits(max_cost_usd=float(cap)))
    result = Runner(tree).run_sync("go")
    spent = sum((m.cost_usd or Decimal(0) for _, m in made), Decimal(0))
    prices = [Decimal(c) / 100 for c in costs]
    if same and prices[0] <= cap:
        assert spent <= cap, f"branches of {costs[0]} cents a call under a {cap_cents}-cent cap spent ${spent}"
    elif same:  # a first call dearer than the whole cap: made alone, nothing after it
        assert spent == prices[0], (costs, cap, spent)
    else:
        assert spent < cap + sum(prices), (costs, cap, spent)
    assert not nesting._ROOMS, "a reservation was left behind"
    assert result.outcome != "failed", result.error
    if any(m.calls == 0 for _, m in made):  # a branch refused: the tree ends on its budget
        assert result.outcome == "limit" and result.limit == "max_cost_usd", (result.outcome, result.limit)


def test_a_branch_without_a_price_ends_the_tree_limit_not_final_with_an_unknown_cost() -> None:
    """S4's last case: a branch whose model has no price (its replies report tokens, no cost)
    spends the cap — its cost is unknown — and the tree ends ``limit`` naming ``max_cost_usd``:
    its calls past the first are not made, nor any other branch's beside it."""

    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=10, requests=1)
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= 3:
            return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn", usage=usage)
        return ModelResponse(parts=(ToolCall(name="look", args={"n": made}),), stop_reason="tool_use", usage=usage)

    unpriced = CountingModel(ScriptedModel(reply))
    other, other_model = priced("b", Decimal("0.1"), 3)
    tree = ParallelAgent("fan", branches=[Agent(name="np", model=unpriced, tools=[look]), other],
                         limits=Limits(max_cost_usd=0.5))  # fmt: skip
    result = Runner(tree).run_sync("go")
    assert unpriced.calls + other_model.calls == 1, (unpriced.calls, other_model.calls)
    assert result.outcome == "limit" and result.limit == "max_cost_usd", (result.outcome, result.limit, result.error)


def test_a_call_that_fails_releases_its_reservation() -> None:
    """A child whose model call raises ends ``failed``; what that call reserved goes back (else
    the next item would find $0.10 less room and stop a call short), and nothing is left behind."""

    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=10, requests=1, cost_usd=Decimal("0.1"))
        task = str(request.messages[0].text)
        made = sum(1 for m in request.messages if m.role == "assistant")
        if "fail" in task and made >= 1:
            raise RuntimeError("the provider broke")
        if request.tool_choice == "none" or made >= 3:
            return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn", usage=usage)
        return ModelResponse(parts=(ToolCall(name="look", args={"n": made}),), stop_reason="tool_use", usage=usage)

    model = CountingModel(ScriptedModel(reply))
    worker = Agent(name="worker", model=model, tools=[look], limits=Limits(max_model_retries=0))
    each = MapAgent("each", worker, over="items", concurrency=1, on_error="continue", limits=Limits(max_cost_usd=0.5))
    result = Runner(each).run_sync("go", state={"items": ["fail", "ok"]})
    assert model.calls == 6, model.calls  # 1 (+1 that raised) for "fail", then all 4 of "ok"
    assert model.cost_usd == Decimal("0.5")
    assert not nesting._ROOMS
    assert result.outcome == "final", (result.outcome, result.error)
