"""The root's budgets bound the whole tree of nested runs: cost charges up like tokens, a paused
nested run drops its link, and a resumed child charges the runs above again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.data.events import ErrorOccurred, Usage
from loopwright.models.prices import register_price, unregister_price
from loopwright.runtime import nesting

PRICED = "nesting-bounds-priced"
"""A model name with a registered price: $1 a thousand input tokens ($0.01 for a reply of 10)."""


@pytest.fixture(autouse=True)
def _price() -> Iterator[None]:
    register_price(PRICED, input=1000, output=0)
    yield
    unregister_price(PRICED)


@tool
async def noop(n: int) -> str:
    """Does nothing."""
    return "ok"


def _looping(model: str = PRICED, tokens: int = 10, k: int = 9) -> ScriptedModel:
    """K rounds of one ``noop`` call, then an answer; every reply ``tokens`` input tokens of ``model``."""

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(input_tokens=tokens, requests=1)
        if request.tool_choice == "none" or done >= k:
            return ModelResponse(parts=(TextPart(text="child done"),), stop_reason="end_turn", usage=usage, model=model)
        return ModelResponse(
            parts=(ToolCall(name="noop", args={"n": done}),), stop_reason="tool_use", usage=usage, model=model
        )

    return ScriptedModel(reply)


def _parent(child: Agent, limits: Limits, fan: int = 1) -> tuple[Agent, list[Any]]:
    """A parent whose first reply asks ``fan`` calls of ``delegate`` at once, each running ``child``."""
    seen: list[Any] = []
    runner = Runner(child)

    @tool
    async def delegate(n: int) -> str:
        """Runs the child."""
        result = await runner.run("go")
        seen.append(result)
        return str(result.output or result.outcome)

    script = [
        ModelResponse(
            parts=tuple(ToolCall(name="delegate", args={"n": i}) for i in range(fan)),
            stop_reason="tool_use",
        ),
        ModelResponse(parts=(TextPart(text="parent done"),), stop_reason="end_turn"),
    ]
    return Agent(name="parent", model=ScriptedModel(script), tools=[delegate], limits=limits), seen


# ------------------------------------------------------------------ cost


def test_children_at_once_stop_when_the_parent_has_spent_its_max_cost_usd() -> None:
    """Three children at once, $0.01 a reply, under a parent's ``max_cost_usd=0.035``: each
    child's model calls stop once the parent has spent it (refused, naming ``max_cost_usd``), so
    the tree spends the budget plus at most one reply a child (before, each child checked only
    its own cap, 0.035 at its start, and the three spent $0.12 together)."""
    child = Agent(name="child", model=_looping(), tools=[noop], limits=Limits(max_iterations=20))
    parent, seen = _parent(child, Limits(max_iterations=40, max_cost_usd=0.035), fan=3)
    result = Runner(parent).run_sync("go")
    assert len(seen) == 3
    assert {r.limit for r in seen} == {"max_cost_usd"}
    assert result.cost_usd is not None
    assert result.cost_usd <= Decimal("0.035") + 3 * Decimal("0.01")
    assert result.cost_usd == sum((r.cost_usd or Decimal(0) for r in seen), Decimal(0))  # each spend reached it once
    refused = [e.error.message for r in seen for e in r.events if isinstance(e, ErrorOccurred)]
    assert len(refused) == 3 and all("of its max_cost_usd=0.035" in m for m in refused)


def test_a_child_cannot_start_when_the_parent_has_spent_its_max_cost_usd() -> None:
    """The first child spends the parent's budget; a second started after it is refused at once."""
    child = Agent(name="child", model=_looping(k=2), tools=[noop], limits=Limits(max_iterations=20))
    runner = Runner(child)
    outcomes: list[str] = []

    @tool
    async def delegate(n: int) -> str:
        """Runs the child."""
        try:
            result = await runner.run("go")
        except Exception as exc:
            outcomes.append(str(exc))
            raise
        outcomes.append(str(result.outcome))
        return str(result.output)

    script = [
        ModelResponse(parts=(ToolCall(name="delegate", args={"n": 1}),), stop_reason="tool_use"),
        ModelResponse(parts=(ToolCall(name="delegate", args={"n": 2}),), stop_reason="tool_use"),
        ModelResponse(parts=(TextPart(text="parent done"),), stop_reason="end_turn"),
    ]
    parent = Agent(
        name="parent", model=ScriptedModel(script), tools=[delegate], limits=Limits(max_cost_usd=0.02, salvage=False)
    )
    result = Runner(parent).run_sync("go")
    assert outcomes[0] == "limit"  # three replies would cost $0.03: it stops at the cap, after two
    assert len(outcomes) == 1 or "max_cost_usd" in outcomes[1]
    assert result.limit == "max_cost_usd"
    assert result.cost_usd is not None and result.cost_usd <= Decimal("0.02")


def test_a_child_starts_with_the_cost_room_left_as_its_max_cost_usd() -> None:
    child = Agent(name="child", model=_looping(k=0), tools=[noop], limits=Limits(max_cost_usd=5))
    parent, seen = _parent(child, Limits(max_cost_usd=0.5))
    assert Runner(parent).run_sync("go").outcome == "final"
    assert seen[0].run_state.limits.max_cost_usd == pytest.approx(0.5)


def test_an_unknown_price_stays_unknown_up_the_tree_and_spends_the_budget() -> None:
    """A child whose model has no price: the parent's cost is None (never a guess), and with a
    ``max_cost_usd`` above, the child's next call is not made."""
    child = Agent(name="child", model=_looping(model="nesting-bounds-unpriced"), tools=[noop])
    parent, seen = _parent(child, Limits(max_cost_usd=100, max_iterations=40))
    result = Runner(parent).run_sync("go")
    assert result.cost_usd is None
    assert seen[0].limit == "max_cost_usd"
    assert seen[0].iterations == 1
    free, seen_free = _parent(child, Limits(max_iterations=40))  # no cost budget: it runs to its end
    result = Runner(free).run_sync("go")
    assert result.cost_usd is None and seen_free[0].outcome == "final"


# ------------------------------------------------------------------ pause


def test_a_nested_run_that_is_paused_charges_what_it_spent_and_leaves_its_link() -> None:
    """``Runner.pause`` stops a child between two stages: its link is dropped, its tokens reach
    the parent and the pass it held for its next call is given back (before, the link stayed)."""
    holder: dict[str, Runner] = {}

    def reply(request: ModelRequest) -> ModelResponse:
        if any(m.role == "assistant" for m in request.messages):  # its second pass: paused after it
            holder["runner"].pause("kid")
        return ModelResponse(
            parts=(ToolCall(name="noop", args={"n": 1}),), stop_reason="tool_use", usage=Usage(input_tokens=4)
        )

    child = Agent(name="child", model=ScriptedModel(reply), tools=[noop], limits=Limits(max_iterations=5))
    holder["runner"] = Runner(child)
    paused: list[Any] = []

    @tool
    async def delegate(n: int) -> str:
        """Runs the child."""
        result = await holder["runner"].run("go", run_id="kid")
        paused.append(result)
        return str(result.outcome)

    script = [
        ModelResponse(parts=(ToolCall(name="delegate", args={"n": 1}),), stop_reason="tool_use"),
        ModelResponse(parts=(TextPart(text="parent done"),), stop_reason="end_turn"),
    ]
    parent = Agent(name="parent", model=ScriptedModel(script), tools=[delegate], limits=Limits(max_iterations=9))
    links_before = set(nesting._UPS)
    result = Runner(parent).run_sync("go")
    assert paused[0].outcome == "paused"
    assert set(nesting._UPS) == links_before
    assert paused[0].iterations == 2
    assert result.usage.input_tokens == 4  # the child's first reply (its second is counted where it goes on)
    assert result.iterations == 2 + 2  # the parent's two passes and the child's two (the one it held given back)
    holder["runner"]._paused.clear()


# ------------------------------------------------------------------ resume


def _confirming_workflow(limits: Limits | None, after: int = 3, replies: list[int] | None = None) -> Any:
    """A workflow of one child that asks a confirmation first, then makes ``after`` more passes
    of 10 priced input tokens each ($0.01 a reply); ``replies`` gets a 1 for each reply."""
    from loopwright.workflows import SequentialAgent

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refunds an order (a person approves it first)."""
        return f"refunded {order}"

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(input_tokens=10, requests=1)
        if replies is not None:
            replies.append(1)
        if done == 0:
            call = ToolCall(name="refund", args={"order": "A1"})
        elif done <= after and request.tool_choice != "none":
            call = ToolCall(name="noop", args={"n": done})
        else:
            answer = (TextPart(text="refund sent"),)
            return ModelResponse(parts=answer, stop_reason="end_turn", usage=usage, model=PRICED)
        return ModelResponse(parts=(call,), stop_reason="tool_use", usage=usage, model=PRICED)

    limits_ = Limits(max_iterations=10, salvage=False)
    pay = Agent(name="pay", model=ScriptedModel(reply), tools=[refund, noop], limits=limits_)
    return SequentialAgent("support", steps=[pay], limits=limits)


def test_a_resumed_child_charges_the_workflow_again() -> None:
    """A workflow suspended by its child's confirmation and resumed: what the child spends after
    the resume reaches the workflow (before, the resumed child ran on its own: 10 tokens of 50)."""
    workflow = _confirming_workflow(None)
    runner = Runner(workflow)
    first = runner.run_sync("refund A1")
    assert first.outcome == "suspended"
    links_before = set(nesting._UPS)
    from loopwright import approve

    done = runner.resume_sync(first, {first.pending[0].call_id: approve()})
    assert done.outcome == "final", done.error
    assert done.usage.input_tokens == 10 * 5
    assert done.cost_usd == Decimal("0.05")
    assert done.run_state.tool_calls_made == 1 + 3
    assert set(nesting._UPS) == links_before


@pytest.mark.parametrize("budget", ["max_total_tokens", "max_cost_usd", "max_iterations", "max_tool_calls"])
def test_a_resumed_child_is_bounded_by_the_room_left_above(budget: str) -> None:
    """The resumed child has the workflow's room left, not a fresh budget: it stops there,
    naming the workflow's budget (before, it ran its three more passes whatever the workflow had left)."""
    caps: dict[str, Any] = {
        "max_total_tokens": 25,
        "max_cost_usd": 0.025,
        "max_iterations": 3,
        "max_tool_calls": 2,
    }
    replies: list[int] = []
    workflow = _confirming_workflow(Limits(**{budget: caps[budget]}, salvage=False), after=6, replies=replies)
    runner = Runner(workflow)
    first = runner.run_sync("refund A1")
    assert first.outcome == "suspended"
    from loopwright import approve

    done = runner.resume_sync(first, {first.pending[0].call_id: approve()})
    rs = done.run_state
    if budget == "max_total_tokens":
        assert done.usage.input_tokens <= 25 + 10
    elif budget == "max_cost_usd":
        assert done.cost_usd is not None and done.cost_usd <= Decimal("0.035")
    elif budget == "max_iterations":
        assert done.iterations <= 3
    else:
        assert rs.tool_calls_made <= 2
    assert len(replies) <= 3  # the child's replies (before: all eight, whatever the workflow had left)
    assert done.usage.input_tokens == 10 * len(replies)  # each reached the workflow


def test_a_child_resumed_after_a_crash_charges_the_workflow(tmp_path: Any) -> None:
    """With a store: the workflow's worker dies while its child runs; resumed, the child goes on
    from its checkpoint as the workflow's child again, and the workflow's usage holds every
    reply of it once (before, its replies after the crash did not reach the workflow)."""
    from loopwright.stores import SQLiteStore
    from loopwright.workflows import SequentialAgent

    crash = {"at": 3}

    class Crash(BaseException):
        pass

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done == crash["at"]:
            crash["at"] = -1
            raise Crash()
        usage = Usage(input_tokens=10, requests=1)
        if done >= 5:
            return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn", usage=usage, model=PRICED)
        return ModelResponse(
            parts=(ToolCall(name="noop", args={"n": done}),), stop_reason="tool_use", usage=usage, model=PRICED
        )

    pay = Agent(name="pay", model=ScriptedModel(reply), tools=[noop], limits=Limits(max_iterations=10))
    workflow = SequentialAgent("support", steps=[pay])

    async def go() -> Any:
        runner = Runner(workflow, store=SQLiteStore(str(tmp_path / "runs.db")))
        with pytest.raises(Crash):  # (each attempt in a task of its own, as a process of its own)
            await asyncio.create_task(runner.run("go", run_id="w1"))
        await runner.store.close()
        again = Runner(workflow, store=SQLiteStore(str(tmp_path / "runs.db")))
        try:
            return await asyncio.create_task(again.resume("w1"))
        finally:
            await again.store.close()

    done = asyncio.run(go())
    assert done.outcome == "final", done.error
    assert done.usage.input_tokens == 10 * 6  # the child's six replies (the crashed call made none), each once
    assert done.cost_usd == Decimal("0.06")
    assert done.run_state.tool_calls_made == 5


def test_a_child_that_waited_then_crashed_after_its_resume_charges_the_rest_once(tmp_path: Any) -> None:
    """With a store: the child waits for a confirmation (the workflow suspends with what it spent),
    is resumed, and its worker dies a pass later; resumed again, the workflow's usage holds every
    reply once: what the child spent before it waited (the workflow's checkpoint holds it) and
    the rest from the child's own checkpoint (without the record, the rest was lost)."""
    from loopwright import approve
    from loopwright.stores import SQLiteStore
    from loopwright.workflows import SequentialAgent

    crash = {"at": 3}

    class Crash(BaseException):
        pass

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refunds an order (a person approves it first)."""
        return f"refunded {order}"

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done == crash["at"]:
            crash["at"] = -1
            raise Crash()
        usage = Usage(input_tokens=10, requests=1)
        if done == 0:
            call = ToolCall(name="refund", args={"order": "A1"})
        elif done < 5:
            call = ToolCall(name="noop", args={"n": done})
        else:
            return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn", usage=usage, model=PRICED)
        return ModelResponse(parts=(call,), stop_reason="tool_use", usage=usage, model=PRICED)

    pay = Agent(name="pay", model=ScriptedModel(reply), tools=[refund, noop], limits=Limits(max_iterations=10))
    workflow = SequentialAgent("support", steps=[pay])
    path = str(tmp_path / "runs.db")

    async def attempt(go: Any) -> Any:
        runner = Runner(workflow, store=SQLiteStore(path))
        try:
            return await asyncio.create_task(go(runner))
        finally:
            await runner.store.close()

    async def scenario() -> Any:
        first = await attempt(lambda r: r.run("go", run_id="w2"))
        assert first.outcome == "suspended" and first.usage.input_tokens == 10
        decisions = {first.pending[0].call_id: approve()}
        with pytest.raises(Crash):
            await attempt(lambda r: r.resume("w2", decisions))
        return await attempt(lambda r: r.resume("w2"))

    done = asyncio.run(scenario())
    assert done.outcome == "final", done.error
    assert done.usage.input_tokens == 10 * 6  # six replies (the crashed call made none), each once
    assert done.cost_usd == Decimal("0.06")
    assert done.run_state.tool_calls_made == 1 + 4
