"""Nested runs charge the runs above them cheaply and exactly: nothing built when nothing was spent,
no copy of a child's limits the room does not lower, and the tree's passes, tool calls and tokens
within the root's budgets while siblings charge at once (async tools, and sync tools in threads)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.data.events import Usage
from loopwright.models.prices import register_price, unregister_price
from loopwright.runtime import nesting
from loopwright.testing import assert_run_invariants


def _scripted(name: str, k: int, tokens: int = 0) -> ScriptedModel:
    """K rounds of one call of ``noop``, then an answer; ``tokens`` input tokens a reply (0: no usage)."""
    usage = Usage(input_tokens=tokens, requests=1) if tokens else None
    extra: dict[str, Any] = {"usage": usage} if usage is not None else {}
    calls = [
        ModelResponse(parts=(ToolCall(name="noop", args={"n": i}),), stop_reason="tool_use", **extra) for i in range(k)
    ]
    final = ModelResponse(parts=(TextPart(text=f"{name} done"),), stop_reason="end_turn", **extra)

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "user") - 1
        return calls[done] if done < k else final

    return ScriptedModel(reply)


@tool
async def noop(n: int) -> str:
    """Does nothing."""
    return "ok"


def _parent_of(child: Agent, limits: Limits) -> tuple[Agent, dict[str, Any]]:
    """A parent whose one tool call runs ``child`` (what the child's run looked like is kept)."""
    seen: dict[str, Any] = {}
    runner = Runner(child)

    @tool
    async def delegate(n: int) -> str:
        """Runs the child."""
        result = await runner.run("go")
        seen["result"] = result
        return str(result.output)

    script = [
        ModelResponse(parts=(ToolCall(name="delegate", args={"n": 1}),), stop_reason="tool_use"),
        ModelResponse(parts=(TextPart(text="parent done"),), stop_reason="end_turn"),
    ]
    return Agent(name="parent", model=ScriptedModel(script), tools=[delegate], limits=limits), seen


def test_a_child_within_the_room_keeps_its_own_limits() -> None:
    """The runs above have more room than the child's own limits: its limits are its agent's
    (before, every child's limits were copied at its start, lowering nothing)."""
    child = Agent(name="child", model=_scripted("child", 2), tools=[noop], limits=Limits(max_iterations=3))
    parent, seen = _parent_of(child, Limits(max_iterations=20))
    result = Runner(parent).run_sync("go")
    assert result.outcome == "final", result.error
    assert seen["result"].outcome == "final"
    assert seen["result"].run_state.limits is child.limits
    assert result.iterations == 2 + 3  # the parent's two passes and the child's three


def test_a_child_the_room_lowers_gets_the_room_as_its_limits() -> None:
    """The runs above have less room than the child's own limits: the child starts with the room."""
    child = Agent(
        name="child", model=_scripted("child", 9), tools=[noop], limits=Limits(max_iterations=10, max_tool_calls=50)
    )
    parent, seen = _parent_of(child, Limits(max_iterations=5, max_tool_calls=3))
    result = Runner(parent).run_sync("go")
    child_run = seen["result"].run_state
    assert child_run.limits.max_tool_calls == 2  # the parent's three less its own call that runs the child
    assert child_run.limits.max_iterations <= 4
    assert result.run_state.tool_calls_made <= 3
    assert result.iterations <= 5


def test_replies_that_report_no_usage_send_no_token_deltas_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply without usage is a new zero Usage each time: nothing is subtracted or added for it
    (before, every model call of a nested run built two Usage objects to add nothing)."""
    made: list[int] = []
    real = nesting._minus

    def counted(a: Usage, b: Usage) -> Usage:
        made.append(1)
        return real(a, b)

    monkeypatch.setattr(nesting, "_minus", counted)
    child = Agent(name="child", model=_scripted("child", 4), tools=[noop], limits=Limits(max_iterations=5))
    parent, _ = _parent_of(child, Limits(max_iterations=20))
    result = Runner(parent).run_sync("go")
    assert result.outcome == "final"
    assert made == []
    assert result.run_state.tool_calls_made == 1 + 4  # the child's calls still reach the parent


def test_a_childs_tokens_and_calls_reach_every_run_above_exactly() -> None:
    """Two levels of nesting, tokens in every reply: the root's usage and tool calls are the
    sum of the tree's, each counted once."""
    leaf = Agent(name="leaf", model=_scripted("leaf", 2, tokens=7), tools=[noop], limits=Limits(max_iterations=3))
    middle_runner = Runner(leaf)

    @tool
    async def leafward(n: int) -> str:
        """Runs the leaf."""
        return str((await middle_runner.run("go")).output)

    middle_script = [
        ModelResponse(
            parts=(ToolCall(name="leafward", args={"n": 1}),), stop_reason="tool_use", usage=Usage(input_tokens=5)
        ),
        ModelResponse(parts=(TextPart(text="middle done"),), stop_reason="end_turn", usage=Usage(input_tokens=5)),
    ]
    middle = Agent(name="middle", model=ScriptedModel(middle_script), tools=[leafward], limits=Limits(max_iterations=5))
    root, seen = _parent_of(middle, Limits(max_iterations=20))
    result = Runner(root).run_sync("go")
    assert result.outcome == "final", result.error
    assert seen["result"].usage.input_tokens == 2 * 5 + 3 * 7  # the middle run's own and its leaf's
    assert result.usage.input_tokens == 2 * 5 + 3 * 7  # the root's replies report none
    assert result.run_state.tool_calls_made == 1 + 1 + 2
    assert result.iterations == 2 + 2 + 3


def test_a_workflow_in_a_workflow_counts_each_token_and_call_once() -> None:
    """A sequential workflow whose first step is another: the outer run's usage and tool calls
    are the sum of its three agents' (before, the inner workflow's children were counted twice)."""
    from loopwright.workflows import SequentialAgent

    def agent(name: str, tokens: int) -> Agent:
        return Agent(name=name, model=_scripted(name, 2, tokens=tokens), tools=[noop], limits=Limits(max_iterations=3))

    inner = SequentialAgent("inner", steps=[agent("a", 1), agent("b", 10)])
    outer = SequentialAgent("outer", steps=[inner, agent("c", 100)])
    result = Runner(outer).run_sync("go")
    assert result.outcome == "final", result.error
    assert result.output == "c done"
    assert result.usage.input_tokens == 3 * (1 + 10 + 100)
    assert result.run_state.tool_calls_made == 3 * 2
    assert result.iterations <= outer.limits.max_iterations


def test_a_nested_run_that_suspends_charges_what_it_spent_and_leaves_its_link() -> None:
    """A workflow's child waits for a confirmation: the workflow suspends with it. What the child
    spent reaches the workflow, the pass it held for its next call is given back, and its link
    is dropped (before, the link stayed for good, keeping the runs alive, and neither the
    child's last reply's tokens nor its held pass ever came back)."""
    from loopwright.workflows import SequentialAgent

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refunds an order (a person approves it first)."""
        return f"refunded {order}"

    script = [
        ModelResponse(
            parts=(ToolCall(name="refund", args={"order": "A1"}),), stop_reason="tool_use", usage=Usage(input_tokens=9)
        ),
        ModelResponse(parts=(TextPart(text="refund sent"),), stop_reason="end_turn", usage=Usage(input_tokens=9)),
    ]
    pay = Agent(name="pay", model=ScriptedModel(script), tools=[refund], limits=Limits(max_iterations=3))
    links_before = set(nesting._UPS)
    first = Runner(SequentialAgent("support", steps=[pay])).run_sync("refund A1")
    assert first.outcome == "suspended" and [p.tool for p in first.pending] == ["refund"]
    assert set(nesting._UPS) == links_before
    assert first.usage.input_tokens == 9
    assert first.iterations == 1


# ------------------------------------------------------------------ the tree's totals, siblings at once


@dataclass
class Tree:
    """One model for every run of a tree: a run at depth ``d`` asks ``fan[d]`` calls of ``spawn``
    in each of its first ``passes[d]`` passes (each call starts the agent one deeper), then
    answers; every reply reports ``tokens`` output tokens (of the model ``name``). Counts what it
    is asked, from any thread."""

    fan: list[int]
    passes: list[int]
    tokens: int
    name: str | None = None
    """The model each reply names (a registered price: its cost is priced; else unknown)."""
    calls: int = 0
    salvages: int = 0
    runs: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0)  # runs started at once interleave
        usage = Usage(output_tokens=self.tokens, requests=1)  # (priced: the request's own estimate is 0)
        if request.tool_choice == "none":
            with self.lock:
                self.salvages += 1
            return ModelResponse(
                parts=(TextPart(text="salvaged"),), stop_reason="end_turn", usage=usage, model=self.name
            )
        with self.lock:
            self.calls += 1
        first = request.messages[0].parts[0]
        depth = int(getattr(first, "text", "depth 0").split()[-1])
        made = sum(1 for m in request.messages if m.role == "assistant")
        fan = self.fan[depth] if depth < len(self.fan) else 0
        wanted = self.passes[depth] if depth < len(self.passes) else 0
        if made >= wanted or fan == 0:
            answer = (TextPart(text=f"answer at {depth}"),)
            return ModelResponse(parts=answer, stop_reason="end_turn", usage=usage, model=self.name)
        calls = tuple(ToolCall(name="spawn", args={"depth": depth + 1}) for _ in range(fan))
        return ModelResponse(parts=calls, stop_reason="tool_use", usage=usage, model=self.name)


def _tree_agent(model: Tree, limits: Limits, in_threads: bool) -> Agent:
    holder: dict[str, Runner] = {}

    if in_threads:

        @tool
        def spawn(depth: int) -> str:
            """Starts the agent again, one level deeper (in this tool's own thread and event loop)."""
            with model.lock:
                model.runs += 1
            result = holder["runner"].run_sync(f"depth {depth}")
            return str(result.output or result.outcome)

    else:

        @tool
        async def spawn(depth: int) -> str:
            """Starts the agent again, one level deeper."""
            with model.lock:
                model.runs += 1
            result = await holder["runner"].run(f"depth {depth}")
            return str(result.output or result.outcome)

    agent = Agent(name="tree", model=model, instruction="T.", tools=[spawn], limits=limits)
    # the nested runs have no cost budget of their own: only the root's bounds them
    holder["runner"] = Runner(agent.replace(limits=limits.model_copy(update={"max_cost_usd": None})))
    return agent


shapes = st.fixed_dictionaries(
    {
        "fan": st.lists(st.integers(0, 3), min_size=1, max_size=3),
        "passes": st.lists(st.integers(0, 3), min_size=1, max_size=3),
        "max_iterations": st.integers(1, 10),
        "max_depth": st.integers(0, 2),
        "max_tool_calls": st.none() | st.integers(1, 8),
        "max_total_tokens": st.none() | st.integers(1, 120),
        "tokens": st.integers(0, 15),
        "in_threads": st.booleans(),
        "max_cost_usd": st.none() | st.integers(1, 120).map(lambda n: n / 1000),
        "priced": st.booleans(),
    }
)

PRICED = "nesting-tree-priced"
"""The tree's model when ``priced``: $1 a thousand output tokens (a reply of ``tokens`` costs
``tokens`` thousandths of a dollar; input is free, so no request is refused on its estimate)."""


_LONG = {
    "fan": [1, 1, 0],
    "passes": [1, 8, 0],
    "max_iterations": 30,
    "max_depth": 2,
    "max_tool_calls": None,
    "max_total_tokens": None,
    "tokens": 3,
    "max_cost_usd": 0.01,
}
_DEEP = {
    "fan": [1, 2, 1],
    "passes": [2, 1, 1],
    "max_iterations": 20,
    "max_depth": 2,
    "max_tool_calls": None,
    "max_cost_usd": None,
    "priced": True,
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes)
@example({**_DEEP, "max_total_tokens": None, "tokens": 3, "in_threads": False})  # (each spend once at the root:
@example({**_DEEP, "max_total_tokens": None, "tokens": 3, "in_threads": True})  # two levels down, counted twice before)
@example({**_DEEP, "max_total_tokens": 40, "tokens": 3, "in_threads": False})
@example({**_LONG, "in_threads": False, "priced": True})  # (a child making many passes under a root's cost
@example({**_LONG, "in_threads": True, "priced": True})  # budget: before, only its own cap, none, stopped it;
@example({**_LONG, "in_threads": False, "priced": False})  # an unknown cost spends the root's budget)
@example({**_DEEP, "max_total_tokens": None, "tokens": 3, "in_threads": False, "max_cost_usd": 0.01})
def test_the_trees_passes_tool_calls_and_tokens_stay_within_the_roots_budgets(shape: dict[str, Any]) -> None:
    """For any tree shape, siblings running at once (as tasks, or each in a thread of its own):
    model passes of all runs together <= the root's ``max_iterations``; tool calls run <= its
    ``max_tool_calls`` (each is charged to every run above before it runs); tokens of the passes
    < its ``max_total_tokens`` plus one reply per run, and their cost < its ``max_cost_usd``
    plus one reply per run (a pass is made only while every run above has spent less; a run's
    last reply is charged before its next call, and a run has one in flight at most); the
    root's cost is every reply's once, or unknown (None) when the model has no price."""
    register_price(PRICED, input=0, output=1000)
    try:
        _check_tree(shape)
    finally:
        unregister_price(PRICED)


def _check_tree(shape: dict[str, Any]) -> None:
    name = PRICED if shape["priced"] else "nesting-tree-unpriced"
    model = Tree(fan=shape["fan"], passes=shape["passes"], tokens=shape["tokens"], name=name)
    limits = Limits(
        max_iterations=shape["max_iterations"],
        max_depth=shape["max_depth"],
        max_tool_calls=shape["max_tool_calls"],
        max_total_tokens=shape["max_total_tokens"],
        max_cost_usd=shape["max_cost_usd"],
        max_repeated_calls=None,  # (its gate answers a repeated call unrun, though counted: every call here runs)
        retry_backoff_s=0,
    )
    agent = _tree_agent(model, limits, shape["in_threads"])
    links_before = set(nesting._UPS)  # (a paused nested run of another test keeps its link: see Run._pause_here)
    result = Runner(agent).run_sync("depth 0")
    assert model.calls <= shape["max_iterations"]
    assert result.iterations <= shape["max_iterations"]
    assert result.run_state.tool_calls_made == model.runs - 1  # every call run in the tree (each starts a run), once
    if shape["max_tool_calls"] is not None:
        assert result.run_state.tool_calls_made <= shape["max_tool_calls"]
    if shape["max_total_tokens"] is not None:
        assert model.calls * model.tokens <= shape["max_total_tokens"] - 1 + model.runs * model.tokens
    assert result.usage.total_tokens == (model.calls + model.salvages) * model.tokens  # every reply, once
    reply_cost = Decimal(model.tokens) / 1000
    if not shape["priced"]:
        assert result.cost_usd is None  # (never a guess)
        if shape["max_cost_usd"] is not None and model.tokens:  # an unknown cost spends the budget
            assert model.calls <= 1 + model.runs
    elif model.calls + model.salvages:
        assert result.cost_usd == (model.calls + model.salvages) * reply_cost
        if shape["max_cost_usd"] is not None:
            assert model.calls * reply_cost < Decimal(str(shape["max_cost_usd"])) + model.runs * reply_cost or (
                model.tokens == 0
            )
    assert set(nesting._UPS) <= links_before  # every child that started has ended and left its link
    if shape["max_total_tokens"] is None and shape["max_cost_usd"] is None:  # (its budget rules are a lone run's:
        assert_run_invariants(result, agent)  # one reply past the cap, not one a run)
