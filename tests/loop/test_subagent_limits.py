"""A sub-agent's own limits bound its turn, the root's bound the run, and agents are frozen values."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelError,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
)
from loopwright.data.events import LimitReached, ModelRequested, ToolCalled, Transferred
from loopwright.testing import assert_run_invariants
from tests.helpers import add


def go(target: str, task: str = "over to you") -> list[ToolCall]:
    return [ToolCall(name="transfer_to_agent", args={"agent_name": target, "task": task})]


def adding(n: int) -> list[ToolCall]:
    return [ToolCall(id=f"add{n}", name="add", args={"a": n, "b": 1})]


def _tree(sub_script: Any, root_script: list[Any], sub_limits: Limits, **root_limits: Any) -> Agent:
    sub = Agent(name="sub", model=ScriptedModel(sub_script), tools=[add], description="adds", limits=sub_limits)
    return Agent(
        name="root",
        model=ScriptedModel(root_script),
        sub_agents=[sub],
        limits=Limits(retry_backoff_s=0, **root_limits),
    )


def _after_transfer(trace: list[str]) -> list[str]:
    return trace[trace.index("transfer") :]


def keeps_adding(request: ModelRequest) -> ModelResponse:
    """A model that always wants another tool call, and answers only when told to stop (salvage)."""
    if request.tool_choice == "none":
        return ModelResponse(parts=(TextPart(text="sub answer"),), stop_reason="end_turn")
    n = len(request.messages)
    return ModelResponse(parts=(ToolCall(id=f"c{n}", name="add", args={"a": n, "b": 1}),), stop_reason="tool_use")


def test_a_sub_agent_with_one_iteration_gets_one_pass_then_salvage() -> None:
    root = _tree(keeps_adding, [go("sub")], Limits(max_iterations=1, retry_backoff_s=0), max_iterations=10)  # type: ignore[arg-type]
    result = Runner(root).run_sync("please add")
    sub_passes = _after_transfer(result.trace).count("reason")
    assert sub_passes == 1, f"the sub-agent made {sub_passes} passes with max_iterations=1: {result.trace}"
    assert result.outcome == "salvaged" and result.limit == "max_iterations"
    assert result.answered_by == "sub"
    assert _after_transfer(result.trace)[-2:] == ["salvage", "done"]
    assert result.output == "sub answer"
    assert [e.name for e in result.events if isinstance(e, ToolCalled)] == ["transfer_to_agent", "add"]
    assert_run_invariants(result, root)


def test_the_salvage_prompt_and_limit_event_name_the_sub_agents_own_cap() -> None:
    sub_script = [adding(0), "best effort"]
    root = _tree(sub_script, [go("sub")], Limits(max_iterations=1, retry_backoff_s=0), max_iterations=10)
    result = Runner(root).run_sync("please add")
    assert result.outcome == "salvaged" and result.output == "best effort"
    prompt = result.messages[-2].text
    (reached,) = [e for e in result.events if isinstance(e, LimitReached)]
    assert "run out of steps (max_iterations=1)" in prompt, prompt
    assert (reached.limit, reached.value) == ("max_iterations", 1.0), reached


def test_the_root_is_not_bound_by_a_sub_agents_limits() -> None:
    """The sub-agent's own cap of 1 applies to its turn only: the root, before it, goes round freely."""
    root_script = [adding(1), adding(2), adding(3), go("sub")]
    root = _tree(["sub done"], root_script, Limits(max_iterations=1, retry_backoff_s=0), max_iterations=10)
    result = Runner(root).run_sync("go")
    assert result.outcome == "final" and result.output == "sub done" and result.answered_by == "sub"
    assert result.iterations == 5


@pytest.mark.parametrize(("own", "root", "calls"), [(0, 3, 1), (3, 0, 4), (1, 2, 2)])
def test_a_sub_agents_own_max_model_retries_applies_to_its_calls(own: int, root: int, calls: int) -> None:
    failing = ModelError("overloaded", status=529, retryable=True)
    sub_script = [failing] * 6
    tree = _tree(
        sub_script,
        [go("sub")],
        Limits(max_model_retries=own, retry_backoff_s=0),
        max_model_retries=root,
    )
    result = Runner(tree).run_sync("go")
    assert result.outcome == "failed"
    sub_calls = [e for e in result.events if isinstance(e, ModelRequested) and e.agent == "sub"]
    assert len(sub_calls) == calls, f"{len(sub_calls)} calls by the sub-agent with its max_model_retries={own}"
    assert result.error is not None and "overloaded" in result.error.message


def test_the_root_keeps_its_own_max_model_retries() -> None:
    failing = ModelError("overloaded", status=529, retryable=True)
    tree = _tree([], [failing, failing, "root ok"], Limits(max_model_retries=0, retry_backoff_s=0), max_model_retries=2)
    result = Runner(tree).run_sync("go")
    assert result.outcome == "final" and result.output == "root ok"


def test_the_roots_max_transfers_bounds_the_run() -> None:
    model = ScriptedModel([go("a"), go("b"), go("a"), go("b"), go("a"), "summary"])
    own = Limits(max_transfers=10, max_ping_pong=10, retry_backoff_s=0)
    a = Agent(name="a", model=model, description="a", limits=own)
    b = Agent(name="b", model=model, description="b", limits=own)
    root = Agent(
        name="root", model=model, sub_agents=[a, b], limits=Limits(max_transfers=2, max_ping_pong=10, retry_backoff_s=0)
    )
    result = Runner(root).run_sync("go")
    hops = [(e.from_agent, e.to_agent) for e in result.events if isinstance(e, Transferred)]
    assert hops == [("root", "a"), ("a", "b")]
    assert result.outcome == "salvaged" and result.limit == "max_transfers"
    assert result.run_state.charges["max_transfers"] == 2


# ------------------------------------------------------------------ agents are values


@pytest.mark.parametrize("attribute", ["name", "model", "limits", "tools", "sub_agents", "machine", "brand_new"])
def test_an_agent_is_frozen(attribute: str) -> None:
    agent = Agent(name="frozen", model=ScriptedModel(["hi"]), tools=[add])
    with pytest.raises(AttributeError, match="replace"):
        setattr(agent, attribute, None)
    with pytest.raises(AttributeError):
        delattr(agent, attribute)
    assert agent.name == "frozen" and list(agent.tools) == ["add"]


def test_replace_gives_a_variant_and_leaves_the_original() -> None:
    agent = Agent(name="base", model=ScriptedModel(["hi"]), tools=[add], limits=Limits(max_iterations=3))
    variant = agent.replace(limits=Limits(max_iterations=7), description="bigger")
    assert variant is not agent
    assert (variant.limits.max_iterations, variant.description) == (7, "bigger")
    assert (agent.limits.max_iterations, agent.description) == (3, "")
    assert variant.name == "base" and list(variant.tools) == ["add"] and variant.model is agent.model
    with pytest.raises(ConfigurationError, match="unknown options"):
        agent.replace(colour="blue")
