"""Runs nested in tools stay within the root's budgets: every model call of every nested run is
checked against the budgets of every run above it before it is made."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, TextPart, ToolCall, tool
from loopwright.data.events import ToolResult, Usage
from loopwright.testing import assert_run_invariants


@dataclass
class Tree:
    """One model for every run of a tree: a run at depth ``d`` asks ``fan[d]`` calls of ``spawn``
    (each starts the agent again, one deeper) in each of its first ``passes[d]`` passes, then
    answers; a salvage request (``tool_choice="none"``) is answered and counted apart."""

    fan: list[int]
    passes: list[int]
    tokens: int = 0
    calls: int = 0
    salvages: int = 0
    depths: list[int] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0)  # runs started at once interleave
        usage = Usage(input_tokens=self.tokens, requests=1)
        if request.tool_choice == "none":
            self.salvages += 1
            return ModelResponse(parts=(TextPart(text="salvaged"),), stop_reason="end_turn", usage=usage)
        self.calls += 1
        first = request.messages[0].parts[0]
        depth = int(re.findall(r"\d+", first.text)[0])
        self.depths.append(depth)
        made = sum(1 for m in request.messages if m.role == "assistant")
        fan = self.fan[depth] if depth < len(self.fan) else 0
        wanted = self.passes[depth] if depth < len(self.passes) else 0
        if made >= wanted or fan == 0:
            return ModelResponse(parts=(TextPart(text=f"answer at {depth}"),), stop_reason="end_turn", usage=usage)
        calls = tuple(ToolCall(name="spawn", args={"depth": depth + 1}) for _ in range(fan))
        return ModelResponse(parts=calls, stop_reason="tool_use", usage=usage)


def _agent(model: Tree, limits: Limits) -> Agent:
    holder: dict[str, Runner] = {}

    @tool
    async def spawn(depth: int) -> str:
        """Starts the agent again, one level deeper."""
        result = await holder["runner"].run(f"depth {depth}")
        return result.output or result.outcome

    agent = Agent(name="tree", model=model, instruction="T.", tools=[spawn], limits=limits)
    holder["runner"] = Runner(agent)
    return agent


def test_an_agent_whose_tool_runs_itself_stays_within_max_iterations() -> None:
    """The report: ten calls a reply, each running the agent again, default limits: 5,222
    model calls against max_iterations=10 before."""
    model = Tree(fan=[10] * 5, passes=[10**6] * 5)
    agent = _agent(model, Limits(retry_backoff_s=0))
    result = Runner(agent).run_sync("depth 0")
    assert model.calls <= 10, f"{model.calls} model passes in the tree against max_iterations=10"
    assert result.iterations <= 10
    assert model.calls + model.salvages <= 2 * 10
    assert_run_invariants(result, agent)


def test_a_childs_first_model_call_is_checked() -> None:
    """Two children started at once with one pass left: one runs, the other is refused before
    its first model call (both were let in before, each seeing the parent's one pass of room)."""
    model = Tree(fan=[2, 0], passes=[1, 0])
    agent = _agent(model, Limits(max_iterations=2, retry_backoff_s=0))
    result = Runner(agent).run_sync("depth 0")
    assert model.depths.count(1) == 1, model.depths
    answers = [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert [a.is_error for a in answers] == [False, True]
    assert "max_iterations=2" in answers[1].content
    assert result.iterations == 2


def test_a_child_stops_when_its_siblings_spend_the_roots_passes() -> None:
    """Children that run concurrently share the root's room: none may spend the passes another
    has already used (before, each child had the room the root had when it started)."""
    model = Tree(fan=[3, 1, 0], passes=[1, 10**6, 0])
    agent = _agent(model, Limits(max_iterations=6, retry_backoff_s=0, max_depth=1))
    result = Runner(agent).run_sync("depth 0")
    assert model.calls <= 6, f"{model.calls} passes with max_iterations=6"
    assert result.iterations <= 6


def test_tokens_spent_by_a_sibling_stop_the_next_model_call() -> None:
    """A nested run's model call is refused once the runs above it have spent max_total_tokens,
    whoever spent them (the run then salvages, naming the token budget)."""
    model = Tree(fan=[2, 1, 0], passes=[1, 10**6, 0], tokens=10)
    agent = _agent(model, Limits(max_total_tokens=45, retry_backoff_s=0, max_depth=1, max_iterations=50))
    result = Runner(agent).run_sync("depth 0")
    # each pass is made only while every run above has used less than 45: two children running
    # at once may each make one call from 40, so the passes use at most 40 + 2 * 10 tokens
    # (salvage calls are not passes: one per run, three runs)
    assert model.calls * 10 <= 40 + 2 * 10, model.calls
    assert model.salvages <= 3
    assert result.limit == "max_total_tokens"


def test_tool_calls_of_siblings_share_the_roots_max_tool_calls() -> None:
    model = Tree(fan=[3, 1, 0], passes=[1, 10**6, 0])
    agent = _agent(model, Limits(max_tool_calls=5, retry_backoff_s=0, max_depth=1, max_iterations=50))
    result = Runner(agent).run_sync("depth 0")
    assert result.run_state.tool_calls_made <= 5, result.run_state.tool_calls_made


shapes = st.tuples(
    st.lists(st.integers(0, 4), min_size=1, max_size=4),
    st.lists(st.integers(0, 4), min_size=1, max_size=4),
    st.integers(1, 8),
    st.integers(0, 3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes)
def test_model_calls_across_the_tree_stay_within_the_roots_budget(shape: Any) -> None:
    """For any nesting shape: the model passes of all runs together are at most the root's
    ``max_iterations``; besides them each run makes at most one salvage call, and the tree
    holds at most ``max_iterations`` runs (each starts by taking one of the root's passes), so
    model calls <= 2 * max_iterations (with no model retries)."""
    fan, passes, max_iterations, max_depth = shape
    model = Tree(fan=fan, passes=passes)
    limits = Limits(max_iterations=max_iterations, max_depth=max_depth, retry_backoff_s=0)
    result = Runner(_agent(model, limits)).run_sync("depth 0")
    assert model.calls <= max_iterations
    assert result.iterations <= max_iterations
    assert model.salvages <= max_iterations
    assert model.calls + model.salvages <= 2 * max_iterations
