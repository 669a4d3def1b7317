"""Hypothesis strategies that generate workflow trees over scripted agents, and the invariants
every run of one keeps.

>>> from hypothesis import given
>>> from loopwright.testing.workflow_strategies import workflow_trees, run_and_check
>>> @given(workflow_trees())
... def test_trees_end_within_their_bounds(tree):
...     run_and_check(tree)

A tree is a :class:`TreeSpec` (plain data: shown by hypothesis when an example fails);
:meth:`TreeSpec.build` makes the agents afresh (their scripted models replay their scripts from
the start). :func:`run_and_check` runs the root and checks every run of the tree, root and
children: it ended; every leaf keeps :func:`~loopwright.testing.invariants.assert_run_invariants`
(its passes within its own ``max_iterations``, every tool call answered exactly once, its trace
a path of its machine); every workflow's trace is a path of its machine ending in a terminal;
every loop ran at most ``max_iterations`` rounds; and the root's passes, which count every
child's, are within the root's ``max_iterations``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pydantic import JsonValue

from ..data.events import ModelRequest, ModelResponse, TextPart, ToolCall
from ..data.limits import Limits
from ..data.result import RunResult
from ..features import machine_for
from ..loop.runner import Runner
from ..models.scripted import ScriptedModel
from ..runtime.agent import Agent
from ..runtime.observers import instrument, uninstrument
from ..runtime.tools import tool
from ..workflows import EXIT_LOOP, LoopAgent, MapAgent, ParallelAgent, SequentialAgent, exit_loop
from ..workflows.base import Workflow
from .counting import CountingModel, CountingTools
from .invariants import InvariantViolation, assert_run_invariants

KINDS = ("sequential", "parallel", "loop", "map")


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


@dataclass
class TreeSpec:
    """One node of a generated tree: a scripted ``leaf`` (its replies, cycled, and its own
    ``max_iterations``) or a workflow of ``kind`` over ``children``."""

    name: str
    kind: str = "leaf"
    children: list[TreeSpec] = field(default_factory=list)
    script: list[Any] = field(default_factory=list)
    max_iterations: int = 3
    """A leaf's own limit; a loop's rounds."""
    on_error: str = "fail"
    items: int = 0
    """A map's items (the root's state holds them under ``items``)."""
    limit: int | None = None
    """The workflow's own ``Limits.max_iterations`` (None: the tree's bound)."""

    def build(self, models: list[CountingModel] | None = None, tools: CountingTools | None = None) -> Agent:
        """The agents of this tree, made afresh; with ``models`` (a list each leaf's counting
        model is added to) and ``tools``, counted inside the models and tools."""
        if self.kind == "leaf":
            model: Any = ScriptedModel(_cycled(self.script))
            if models is not None:
                model = CountingModel(model)
                models.append(model)
            return Agent(
                name=self.name,
                model=model,
                tools=[note, exit_loop] if tools is None else [tools.wrap(note), tools.wrap(exit_loop)],
                limits=Limits(max_iterations=self.max_iterations),
            )
        limits = Limits(max_iterations=self.limit) if self.limit is not None else None
        kids = [c.build(models, tools) for c in self.children]
        if self.kind == "sequential":
            return SequentialAgent(self.name, kids, limits=limits)
        if self.kind == "parallel":
            return ParallelAgent(self.name, kids, on_error=self.on_error, limits=limits)  # type: ignore[arg-type]
        if self.kind == "loop":
            return LoopAgent(self.name, kids, max_iterations=self.max_iterations, limits=limits)
        return MapAgent(self.name, kids[0], over="items", concurrency=2, max_items=4, limits=limits)

    def walk(self) -> list[TreeSpec]:
        return [self, *(n for c in self.children for n in c.walk())]


def _cycled(script: Sequence[Any]) -> Any:
    """A scripted reply function that goes round ``script`` (a loop runs a leaf many times)."""
    replies = list(script) or [ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn")]
    count = [0]

    def reply(request: ModelRequest) -> Any:
        item = replies[count[0] % len(replies)]
        count[0] += 1
        return item

    return reply


@st.composite
def _reply(draw: st.DrawFn, n: int) -> Any:
    kind = draw(st.sampled_from(["text", "note", "note", "exit", "parallel"]))
    if kind == "text":
        return ModelResponse(parts=(TextPart(text=f"answer {n}"),), stop_reason="end_turn")
    if kind == "exit":
        return ModelResponse(parts=(ToolCall(name=EXIT_LOOP, args={}),), stop_reason="tool_use")
    calls = 2 if kind == "parallel" else 1
    parts = tuple(ToolCall(name="note", args={"text": f"n{n}.{i}"}) for i in range(calls))
    return ModelResponse(parts=parts, stop_reason="tool_use")


@st.composite
def workflow_trees(draw: st.DrawFn, max_depth: int = 2, max_children: int = 3) -> TreeSpec:
    """A tree of workflows (sequential, parallel, loop, map) over scripted leaves, at most
    ``max_depth`` workflows deep, each with at most ``max_children`` children; names unique."""
    names = iter(f"n{i}" for i in range(10_000))

    def node(depth: int) -> TreeSpec:
        if depth >= max_depth or (depth > 0 and draw(st.booleans())):
            script = [draw(_reply(i)) for i in range(draw(st.integers(0, 4)))]
            script.append(ModelResponse(parts=(TextPart(text=f"final {len(script)}"),), stop_reason="end_turn"))
            room = max(1, len(script) + draw(st.sampled_from([-1, 0, 0, 0, 1])))
            return TreeSpec(next(names), script=script, max_iterations=room)
        kind = draw(st.sampled_from(KINDS))
        name = next(names)
        count = 1 if kind == "map" else draw(st.integers(1, max_children))
        kids = [node(depth + 1) for _ in range(count)]
        spec = TreeSpec(name, kind, kids)
        spec.max_iterations = draw(st.integers(1, 3))
        spec.on_error = draw(st.sampled_from(["fail", "continue"]))
        spec.items = draw(st.integers(0, 3))
        if draw(st.integers(0, 4)) == 0:
            spec.limit = draw(st.integers(1, 6))
        return spec

    return node(0)


class _Collect:
    """An instrument that keeps every run's result (children's too)."""

    def __init__(self) -> None:
        self.results: list[RunResult] = []

    def on_finish(self, result: RunResult) -> None:
        self.results.append(result)


def run_and_check(tree: TreeSpec, *, run_id: str = "root") -> RunResult:
    """Run ``tree`` (built afresh) and check every run of it (see the module docstring)."""
    models: list[CountingModel] = []
    tools = CountingTools()
    root = tree.build(models, tools)
    agents = {a.name: a for a in _agents(root)}
    specs = {s.name: s for s in tree.walk()}
    collect = _Collect()
    instrument(collect)
    try:
        items: list[JsonValue] = [
            f"item {i}" for i in range(max((s.items for s in tree.walk() if s.kind == "map"), default=0))
        ]
        result = asyncio.run(Runner(root).run("go", run_id=run_id, state={"items": items}))
    finally:
        uninstrument(collect)
    mine = [r for r in collect.results if r.run_id == run_id or r.run_id.startswith(run_id + ".")]
    if not any(r.run_id == run_id for r in mine):
        raise InvariantViolation(f"the root run {run_id!r} did not finish")
    for r in mine:
        agent = agents[r.agent]
        if r.outcome not in ("final", "salvaged", "limit", "failed", "cancelled"):
            raise InvariantViolation(f"run {r.run_id} of {r.agent!r} did not end: outcome {r.outcome!r}")
        if isinstance(agent, Workflow):
            _check_workflow(r, agent, specs[agent.name])
        else:
            assert_run_invariants(r, agent)
    _check_counts(result, root, models, tools)
    return result


def _check_counts(result: RunResult, root: Agent, models: list[CountingModel], tools: CountingTools) -> None:
    """The budgets, counted inside the models and tools (never from the run's own counters)."""
    passes, calls = sum(m.passes for m in models), sum(m.calls for m in models)
    cap = root.limits.max_iterations
    if passes > cap:
        raise InvariantViolation(f"the tree made {passes} model passes (counted in the models), past the root's "
                                 f"max_iterations={cap}")  # fmt: skip
    if passes >= cap and calls > passes and not root.limits.salvage:
        raise InvariantViolation(f"the tree made {calls - passes} salvage calls once the root (salvage=False) had "
                                 f"spent its max_iterations={cap}")  # fmt: skip
    if result.outcome != "suspended" and result.iterations != passes:
        raise InvariantViolation(f"result.iterations={result.iterations}, but the models were called for "
                                 f"{passes} passes")  # fmt: skip
    if result.outcome != "suspended" and tools.runs > result.tool_calls:  # (a call answered unrun still counts)
        raise InvariantViolation(f"result.tool_calls={result.tool_calls}, but the tools ran {tools.runs} times")
    most = root.limits.max_tool_calls
    if most is not None and tools.runs > most:
        raise InvariantViolation(f"the tools ran {tools.runs} times, past the root's max_tool_calls={most}")
    if (
        passes >= cap
        and result.outcome == "failed"
        and result.error is not None
        and "max_iterations" in (result.error.message)
    ):
        raise InvariantViolation(f"the tree spent max_iterations={cap} and the root ended failed, not limit: "
                                 f"{result.error.message}")  # fmt: skip


def _check_workflow(r: RunResult, wf: Workflow, spec: TreeSpec) -> None:
    machine = machine_for(wf)
    for a, b in zip(r.trace, r.trace[1:], strict=False):
        if not any(row.dest == b for row in machine.rows_from(a)):
            raise InvariantViolation(f"workflow {wf.name!r} took {a} -> {b}, which its machine does not have")
    if r.trace[-1] not in machine.terminals:
        raise InvariantViolation(f"workflow {wf.name!r} stopped in {r.trace[-1]!r}, not a terminal")
    if isinstance(wf, LoopAgent):
        first = wf.children[0].agent.name
        rounds = r.trace.count(first)
        if rounds > wf.max_iterations:
            raise InvariantViolation(f"loop {wf.name!r} ran {rounds} rounds, past max_iterations={wf.max_iterations}")
    if r.iterations > wf.limits.max_iterations:
        raise InvariantViolation(
            f"workflow {wf.name!r}: {r.iterations} passes under it, past its max_iterations={wf.limits.max_iterations}"
        )


def _agents(agent: Agent) -> list[Agent]:
    kids = list(agent.walk_children()) if isinstance(agent, Workflow) else []
    return [agent, *(a for k in kids for a in _agents(k))]


__all__ = ["TreeSpec", "run_and_check", "workflow_trees"]
