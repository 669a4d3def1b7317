"""Budgets exact across a workflow's children (issue 37, item 1): counted inside the models
and tools (loopwright.testing's counting helpers), never from the run's own counters."""

from __future__ import annotations

import asyncio
import os
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from loopwright import (
    Agent,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    agent_tool,
    tool,
)
from loopwright.data.events import Usage
from loopwright.runtime.observers import instrument, uninstrument
from loopwright.testing import CountingModel, CountingTools, TreeSpec, workflow_trees
from loopwright.workflows import LoopAgent, SequentialAgent
from loopwright.workflows.base import Workflow


def wants(passes: int, tool_name: str = "work") -> Any:
    """A model that asks for one tool call in each of its first ``passes - 1`` passes, then answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= passes - 1:
            return ModelResponse(parts=(TextPart(text=f"done after {made + 1}"),), stop_reason="end_turn")
        return ModelResponse(parts=(ToolCall(name=tool_name, args={"n": made}),), stop_reason="tool_use")

    return ScriptedModel(reply)


def _work() -> Any:
    @tool
    def work(n: int) -> str:
        """Does a piece of work."""
        return f"ok {n}"

    return work


def test_a_sequence_over_three_five_pass_agents_makes_at_most_its_max_iterations_calls() -> None:
    """The report: 7 model calls (5 + 2) against max_iterations=6, result.iterations 6, and the
    run ended failed (error.kind "workflow") instead of limit."""
    models = [CountingModel(wants(5)) for _ in range(3)]
    tools = CountingTools()
    steps = [
        Agent(name=n, model=m, tools=[tools.wrap(_work())])
        for n, m in zip(("alpha", "beta", "gamma"), models, strict=True)
    ]
    seq = SequentialAgent("seq", steps, limits=Limits(max_iterations=6, salvage=False))
    result = Runner(seq).run_sync("go")
    calls = sum(m.calls for m in models)
    assert calls <= 6, f"{calls} model calls against max_iterations=6"
    assert result.outcome == "limit", (result.outcome, result.error)
    assert result.limit == "max_iterations"
    assert result.error is None or result.error.kind != "workflow"
    assert result.iterations == calls


def test_a_one_step_sequence_under_one_pass_makes_one_model_call() -> None:
    model = CountingModel(wants(2))
    seq = SequentialAgent("seq", [Agent(name="a", model=model, tools=[_work()])], limits=Limits(max_iterations=1))
    result = Runner(seq).run_sync("go")
    assert model.passes <= 1, f"{model.passes} model passes against max_iterations=1"
    assert result.outcome in ("limit", "salvaged"), (result.outcome, result.error)
    assert result.limit == "max_iterations"
    assert result.iterations == model.passes


def test_a_loop_stops_at_the_roots_passes_and_says_limit() -> None:
    model = CountingModel(wants(3))
    loop = LoopAgent(
        "loop", [Agent(name="a", model=model, tools=[_work()])], max_iterations=5,
        limits=Limits(max_iterations=7, salvage=False),
    )  # fmt: skip
    result = Runner(loop).run_sync("go")
    assert model.calls <= 7
    assert result.outcome == "limit", (result.outcome, result.error)
    assert result.limit == "max_iterations"
    assert result.iterations == model.calls


def test_no_tool_runs_past_the_roots_max_tool_calls() -> None:
    tools = CountingTools()
    steps = [Agent(name=n, model=CountingModel(wants(4)), tools=[tools.wrap(_work())]) for n in ("a", "b")]
    seq = SequentialAgent("seq", steps, limits=Limits(max_tool_calls=4, salvage=False))
    result = Runner(seq).run_sync("go")
    assert tools.runs <= 4, f"{tools.runs} tool runs against max_tool_calls=4"
    assert result.outcome in ("limit", "final"), (result.outcome, result.error)
    assert result.tool_calls == tools.runs


# ------------------------------------------------------------------ the property (issue 37, item 2)


def _root_model(calls: int) -> CountingModel:
    """The root agent's model: asks its agent tool (``tree``) ``calls`` times, then answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= calls:
            return ModelResponse(parts=(TextPart(text="root done"),), stop_reason="end_turn")
        return ModelResponse(parts=(ToolCall(name="tree", args={"task": f"go {made}"}),), stop_reason="tool_use")

    return CountingModel(ScriptedModel(reply))


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LOOPWRIGHT_BUDGET_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    tree=workflow_trees(),
    passes=st.integers(1, 8),
    tool_calls=st.one_of(st.none(), st.integers(1, 6)),
    salvage=st.booleans(),
    as_tool=st.integers(0, 2),
)
def test_budgets_hold_over_generated_trees(
    tree: TreeSpec, passes: int, tool_calls: int | None, salvage: bool, as_tool: int
) -> None:
    """Trees of the four workflow kinds, under a root with random limits (a sequence over the
    tree, or an agent calling it through ``agent_tool`` ``as_tool`` times): the model passes and
    tool runs, counted inside the models and tools, stay within the root's budgets; no salvage
    call past one a run; ``result.iterations`` is what was made;
    a spent budget never ends the root ``failed``."""
    models: list[CountingModel] = []
    tools = CountingTools()
    inner = tree.build(models, tools)
    limits = Limits(max_iterations=passes, max_tool_calls=tool_calls, salvage=salvage)
    root: Agent
    if as_tool:
        top = _root_model(as_tool)
        models.append(top)
        root = Agent(name="root", model=top, tools=[agent_tool(inner, name="tree")], limits=limits)
    else:
        root = SequentialAgent("root", [inner], limits=limits)
    items: list[JsonValue] = [f"item {i}" for i in range(max((s.items for s in tree.walk()), default=0))]
    runs = _Runs()  # (a map runs its one agent, one model, once an item: salvage is one a *run*)
    instrument(runs)
    try:
        result = asyncio.run(Runner(root).run("go", state={"items": items}))
    finally:
        uninstrument(runs)
    made, calls = sum(m.passes for m in models), sum(m.calls for m in models)
    assert made <= passes, f"{made} model passes (counted in the models) against max_iterations={passes}"
    assert calls - made <= runs.ended, "at most one salvage call a run"
    assert result.iterations == made, (result.iterations, made)
    if tool_calls is not None:
        assert tools.runs <= tool_calls, f"{tools.runs} tool runs against max_tool_calls={tool_calls}"
    if result.outcome == "failed":
        assert result.error is not None
        assert "has spent its" not in result.error.message, result.error.message


# ------------------------------------------------------------------ tokens, cost and transfers too

IN, OUT = 7, 5
"""The tokens every priced leaf reply reports."""


def _priced(tree: TreeSpec, cost: Decimal) -> TreeSpec:
    """``tree`` with every leaf reply priced: ``IN``/``OUT`` tokens and ``cost`` dollars a call
    (a model that reports its own cost; the counting models add them up inside)."""
    for spec in tree.walk():
        spec.script = [
            r.model_copy(update={"usage": Usage(input_tokens=IN, output_tokens=OUT, requests=1, cost_usd=cost)})
            for r in spec.script
        ]
    return tree


def _door_model(door: str, calls: int) -> CountingModel:
    """The root agent's model: hands the tree a task ``calls`` times (``agent_tool``), or once
    by a transfer, then answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        made = sum(1 for m in request.messages if m.role == "assistant")
        if request.tool_choice == "none" or made >= (calls if door == "tool" else 1):
            return ModelResponse(parts=(TextPart(text="root done"),), stop_reason="end_turn")
        if door == "transfer":
            args: dict[str, JsonValue] = {"agent_name": "tree", "task": "go"}
            return ModelResponse(parts=(ToolCall(name="transfer_to_agent", args=args),), stop_reason="tool_use")
        return ModelResponse(parts=(ToolCall(name="tree", args={"task": f"go {made}"}),), stop_reason="tool_use")

    return CountingModel(ScriptedModel(reply))


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LOOPWRIGHT_BUDGET_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    tree=workflow_trees(),
    door=st.sampled_from(["step", "tool", "transfer"]),
    calls=st.integers(1, 2),
    passes=st.integers(1, 8),
    tool_calls=st.one_of(st.none(), st.integers(1, 6)),
    tokens=st.one_of(st.none(), st.integers(1, 120)),
    cap_cents=st.one_of(st.none(), st.integers(1, 40)),
    price_cents=st.sampled_from([1, 2, 5]),
    salvage=st.booleans(),
)
def test_every_budget_holds_over_generated_trees_through_every_door(
    tree: TreeSpec,
    door: str,
    calls: int,
    passes: int,
    tool_calls: int | None,
    tokens: int | None,
    cap_cents: int | None,
    price_cents: int,
    salvage: bool,
) -> None:
    """Trees of the four workflow kinds over priced leaves, reached from the root as a step,
    through ``agent_tool``, or by a transfer, under random limits on passes, tool calls, tokens
    and cost; counted inside the models and tools (never from the run's counters):

    - model passes at most ``max_iterations``, tool runs at most ``max_tool_calls``, at most one
      salvage call a run;
    - tokens: checked before each call, so at most the cap plus the calls in flight past it
      (one a leaf at most);
    - cost: every call reserves its estimate, all calls costing the same: at most the cap (the
      first call, whose cost nothing tells, is made alone: at most one call's cost when the cap
      is smaller than a call) — plus, for the salvage calls, one a run;
    - a spent budget never ends the root ``failed``."""
    price = Decimal(price_cents) / 100
    models: list[CountingModel] = []
    counting = CountingTools()
    inner = _priced(tree, price).build(models, counting)
    cap = None if cap_cents is None else Decimal(cap_cents) / 100
    limits = Limits(
        max_iterations=passes, max_tool_calls=tool_calls, max_total_tokens=tokens,
        max_cost_usd=None if cap is None else float(cap), salvage=salvage,
    )  # fmt: skip
    root: Agent
    if door == "step":
        root = SequentialAgent("root", [inner], limits=limits)
    else:
        top = _door_model(door, calls)
        models.append(top)
        if door == "tool":
            root = Agent(name="root", model=top, tools=[agent_tool(inner, name="tree")], limits=limits)
        else:
            root = Agent(name="root", model=top, sub_agents=[_named(inner, "tree")], limits=limits)
    items: list[JsonValue] = [f"item {i}" for i in range(max((s.items for s in tree.walk()), default=0))]
    runs = _Runs()
    instrument(runs)
    try:
        result = asyncio.run(Runner(root).run("go", state={"items": items}))
    finally:
        uninstrument(runs)
    made, all_calls = sum(m.passes for m in models), sum(m.calls for m in models)
    leaves = sum(1 for s in tree.walk() if s.kind == "leaf")
    assert made <= passes, f"{made} model passes (counted in the models) against max_iterations={passes}"
    assert all_calls - made <= runs.ended, "at most one salvage call a run (a map runs one agent many times)"
    if tool_calls is not None:
        assert counting.runs <= tool_calls, f"{counting.runs} tool runs against max_tool_calls={tool_calls}"
    spent_tokens = sum(m.total_tokens for m in models)
    if tokens is not None:
        past = (IN + OUT) * (leaves * max(1, max((s.items for s in tree.walk()), default=0)) + len(models))
        assert spent_tokens <= tokens + past, f"{spent_tokens} tokens against max_total_tokens={tokens}"
    if cap is not None:
        spent = sum((m.cost_usd or Decimal(0) for m in models), Decimal(0))
        salvages = sum(m.salvages for m in models)
        assert spent <= max(cap, price) + salvages * price, f"${spent} against max_cost_usd={cap} at ${price} a call"
    if result.outcome == "failed":
        assert result.error is not None
        assert "has spent its" not in result.error.message, result.error.message


class _Runs:
    """An instrument counting the runs that end (children's too)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_finish(self, result: object) -> None:
        self.ended += 1


def _named(agent: Agent, name: str) -> Agent:
    """``agent`` as the transfer target ``name``: a workflow in a one-step sequence of that name
    (a workflow is a value: not renamed), a leaf renamed."""
    if isinstance(agent, Workflow):
        return SequentialAgent(name, [agent])
    return agent.replace(name=name)


def test_a_transfer_to_a_workflow_charges_the_run_that_transferred() -> None:
    """Before, a workflow made the active agent by a transfer ran as a run of its own: under a
    root's max_iterations=2 and max_cost_usd=0.02 its leaf made 4 passes and spent $0.04."""
    note = ModelResponse(parts=(ToolCall(name="note", args={"text": "x"}),), stop_reason="tool_use")
    leaf = TreeSpec("n1", script=[note, note, note, ModelResponse(parts=(TextPart(text="fin"),))], max_iterations=4)
    models: list[CountingModel] = []
    inner = _priced(TreeSpec("n0", "sequential", [leaf]), Decimal("0.01")).build(models, CountingTools())
    top = _door_model("transfer", 1)
    root = Agent(name="root", model=top, sub_agents=[_named(inner, "tree")], limits=Limits(max_iterations=3))
    result = Runner(root).run_sync("go")
    assert sum(m.passes for m in [*models, top]) <= 3, [m.passes for m in [*models, top]]
    assert result.outcome != "failed", result.error


def test_a_branch_refused_while_a_sibling_held_the_last_pass_ends_the_parallel_limit() -> None:
    """Found by the generated-tree property: three branches want 3 + 1 + 1 passes under the
    parallel's max_iterations=4. The nested sequential's leaf is refused while the first branch
    holds the last pass; when the sequential stops, that pass is back in hand (the tree's count is 3),
    so judged at that moment its stop looked like a failure of its own and the root ended
    ``failed``. Judged once every branch has ended, the tree's budget is spent: ``limit``."""
    from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
    from loopwright.workflows import ParallelAgent, SequentialAgent

    @tool
    def note(text: str) -> str:
        """Note it."""
        return "noted"

    first = Agent(
        name="n1",
        model=ScriptedModel([
            [ToolCall(id="a", name="note", args={"text": "x"})],
            [ToolCall(id="b", name="note", args={"text": "y"})],
            "answer 2",
        ]),
        tools=[note],
        limits=Limits(max_iterations=3),
    )  # fmt: skip
    second = Agent(name="n2", model=ScriptedModel(["final 0"]), limits=Limits(max_iterations=1))
    nested = SequentialAgent(
        "n3", [Agent(name="n4", model=ScriptedModel(["final 0"]), limits=Limits(max_iterations=1))]
    )
    root = ParallelAgent("n0", [first, second, nested], on_error="fail", limits=Limits(max_iterations=4))
    result = asyncio.run(Runner(root).run("go"))
    assert result.outcome == "limit", (result.outcome, result.error)
    assert result.iterations == 4


# ------------------------------------------------------------------ a transfer's workflow out of room: limit


def _transfer_root(
    leaf_passes: int, limits: Limits, price: Decimal | None = None, root_price: Decimal | None = None
) -> tuple[Agent, list[CountingModel]]:
    """A root LLM agent that transfers to a sequence ``tree`` over one leaf wanting
    ``leaf_passes`` passes (each leaf call priced ``price`` dollars when given, each root call
    ``root_price``, default ``price``)."""
    usage = None if price is None else Usage(input_tokens=IN, output_tokens=OUT, requests=1, cost_usd=price)
    root_usage = usage if root_price is None else Usage(input_tokens=IN, output_tokens=OUT, cost_usd=root_price)

    def leaf_reply(request: ModelRequest) -> ModelResponse:
        made = sum(1 for m in request.messages if m.role == "assistant" and m.agent == "worker")
        if request.tool_choice == "none" or made >= leaf_passes - 1:
            reply = ModelResponse(parts=(TextPart(text=f"done after {made + 1}"),), stop_reason="end_turn")
        else:
            reply = ModelResponse(parts=(ToolCall(name="note", args={"n": made}),), stop_reason="tool_use")
        return reply if usage is None else reply.model_copy(update={"usage": usage})

    leaf = CountingModel(ScriptedModel(leaf_reply))

    @tool
    def note(n: int) -> str:
        """Notes a piece of work."""
        return f"noted {n}"

    worker = Agent(name="worker", model=leaf, tools=[note], limits=Limits(max_iterations=leaf_passes))
    top = _door_model("transfer", 1)
    if usage is not None:
        door = top.inner

        async def priced(request: ModelRequest) -> ModelResponse:
            reply: ModelResponse = await door.complete(request)
            return reply.model_copy(update={"usage": root_usage})

        top = CountingModel(ScriptedModel(priced))
    root = Agent(name="root", model=top, sub_agents=[SequentialAgent("tree", [worker])], limits=limits)
    return root, [top, leaf]


def test_a_workflow_a_transfer_reaches_with_no_passes_left_ends_the_root_limit() -> None:
    """Before, the root ended ``final`` with "workflow 'tree' did not start: ... has spent its
    max_iterations" as its answer; a lone run out of passes ends ``limit``, naming the budget."""
    root, models = _transfer_root(3, Limits(max_iterations=2, salvage=False))
    result = Runner(root).run_sync("go")
    assert sum(m.passes for m in models) <= 2, [m.passes for m in models]
    assert models[1].calls == 0, "no model call past the root's max_iterations"
    assert result.outcome == "limit", (result.outcome, result.output)
    assert result.limit == "max_iterations", result.limit


def test_a_workflow_a_transfer_reaches_that_spends_the_passes_mid_way_ends_the_root_limit() -> None:
    """The workflow starts, its child spends the root's last pass: the root ends ``limit``
    (before: ``final``, its answer "workflow 'tree' did not finish (limit)...")."""
    root, models = _transfer_root(5, Limits(max_iterations=4, salvage=False))
    result = Runner(root).run_sync("go")
    assert sum(m.passes for m in models) <= 4, [m.passes for m in models]
    assert models[1].passes >= 1, "the workflow started"
    assert result.outcome == "limit", (result.outcome, result.output)
    assert result.limit == "max_iterations", result.limit


def test_a_workflow_a_transfer_reaches_with_no_room_for_a_call_ends_the_root_limit_naming_max_cost_usd() -> None:
    """The root has spent $0.01 of max_cost_usd=0.015; the workflow's leaf, at $0.01 a call, has
    no room for its call: the root ends ``limit`` naming ``max_cost_usd`` (before: ``final``,
    its answer "workflow 'tree' did not finish (limit)...") and the leaf makes no call."""
    root, models = _transfer_root(3, Limits(max_cost_usd=0.015, salvage=False), price=Decimal("0.01"))
    result = Runner(root).run_sync("go")
    spent = sum((m.cost_usd or Decimal(0) for m in models), Decimal(0))
    assert spent <= Decimal("0.015"), spent
    assert models[1].calls == 0, "no model call past the root's max_cost_usd"
    assert result.outcome == "limit", (result.outcome, result.output)
    assert result.limit == "max_cost_usd", result.limit


def test_a_workflow_a_transfer_reaches_stopped_mid_way_by_the_cost_room_ends_the_root_limit() -> None:
    """The root ($0.001 a call, max_cost_usd=0.01) transfers; the leaf ($0.004 a call) makes two
    calls, and the root has no room for a third: the root ends ``limit`` naming ``max_cost_usd``
    (before: ``final``, its answer "workflow 'tree' did not finish (limit)...")."""
    root, models = _transfer_root(
        5, Limits(max_cost_usd=0.01, salvage=False), price=Decimal("0.004"), root_price=Decimal("0.001")
    )
    result = Runner(root).run_sync("go")
    spent = sum((m.cost_usd or Decimal(0) for m in models), Decimal(0))
    assert spent <= Decimal("0.01"), spent
    assert models[1].calls >= 1, "the workflow started"
    assert result.outcome == "limit", (result.outcome, result.output, spent, [m.calls for m in models])
    assert result.limit == "max_cost_usd", result.limit
