"""Multi-agent transfer: the agent tree, the transfer tool, the bounded transfer edge,
ping-pong, history policies, and conversations that continue with the agent that answered."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, ConfigurationError, Limits, ModelRequest, Runner, ScriptedModel, TextPart, ToolCall
from loopwright.data.events import ToolAnswered, Transferred
from loopwright.demo import HELPDESK_INPUT, helpdesk_agent
from loopwright.features import BUILT_IN_MACHINES, machine_for
from loopwright.features.multi_agent import transfer_spec
from loopwright.runtime.agent import AgentTree
from loopwright.table.machine import CORE
from loopwright.testing import agent_state_machine, assert_run_invariants, limits, model_behaviours, scripted
from tests.helpers import add


def go(target: str, task: str = "over to you") -> list[ToolCall]:
    return [ToolCall(name="transfer_to_agent", args={"agent_name": target, "task": task})]


def tree(**limits_: object) -> Agent:
    """root with sub-agents a and b; every agent answers from its own script set per test."""
    limits = Limits(retry_backoff_s=0, **limits_)  # type: ignore[arg-type]
    a = Agent(name="a", model=ScriptedModel([]), description="agent a", tools=[add], limits=limits)
    b = Agent(name="b", model=ScriptedModel([]), description="agent b", limits=limits)
    return Agent(name="root", model=ScriptedModel([]), sub_agents=[a, b], limits=limits)


def with_model(root: Agent, name: str, model: object) -> Agent:
    """``root``'s tree with agent ``name`` answering from ``model`` (agents are values)."""

    def rebuild(a: Agent) -> Agent:
        subs = [rebuild(s) for s in a.sub_agents]
        return a.replace(sub_agents=subs, **({"model": model} if a.name == name else {}))

    return rebuild(root)


def test_tree_rules() -> None:
    model = ScriptedModel([])
    a = Agent(name="a", model=model)
    p = Agent(name="p", model=model, sub_agents=[a])
    q = Agent(name="q", model=model, sub_agents=[a])  # a value: the same agent may sit in two trees
    assert AgentTree(p).parent("a") is p and AgentTree(q).parent("a") is q and AgentTree(q).parent("q") is None
    with pytest.raises(AttributeError, match=r"an Agent is a value and does not change: make a variant with "):
        a.model = ScriptedModel([])  # type: ignore[misc]
    assert a.replace(description="d").description == "d" and a.description == ""
    with pytest.raises(ConfigurationError, match=r"unique in a tree; these appear more than once: \['x'\]"):
        Agent(
            name="x", model=model, sub_agents=[Agent(name="y", model=model, sub_agents=[Agent(name="x", model=model)])]
        )


def test_transfer_tool_lists_only_reachable_agents() -> None:
    model = ScriptedModel([])
    billing = Agent(name="billing", model=model, description="money")
    support = Agent(name="support", model=model, disallow_transfer_to_peers=True)
    sales = Agent(name="sales", model=model, disallow_transfer_to_parent=True)
    root = Agent(name="root", model=model, sub_agents=[billing, support, sales])

    tree_ = AgentTree(root)

    def targets(agent: Agent) -> list[str]:
        spec = transfer_spec(tree_.targets(agent.name))
        assert spec.name == "transfer_to_agent"
        return list(spec.input_schema["properties"]["agent_name"]["enum"])

    assert targets(root) == ["billing", "support", "sales"]
    assert targets(billing) == ["root", "support", "sales"]
    assert targets(support) == ["root"]
    assert targets(sales) == ["billing", "support"]
    assert "- billing: money" in transfer_spec(tree_.targets("root")).description
    assert AgentTree(Agent(name="alone", model=model)).targets("alone") == ()
    assert machine_for(root) is BUILT_IN_MACHINES["multi_agent"] and machine_for(Agent(name="s", model=model)) is CORE


def test_helpdesk_example_returns_to_parent_and_transfers_to_a_peer() -> None:
    result = Runner(helpdesk_agent()).run_sync(HELPDESK_INPUT)
    hops = [(e.from_agent, e.to_agent) for e in result.events if isinstance(e, Transferred)]
    assert hops == [("dispatcher", "billing"), ("billing", "sales"), ("sales", "dispatcher")]
    assert result.outcome == "final" and result.answered_by == "dispatcher"
    assert result.output == (
        "All sorted: refunded duplicate charge ch_2 (49.00 USD); 5 extra pro seats cost 245.00 USD a month."
    )
    assert {e.agent for e in result.events} == {"dispatcher", "billing", "sales"}
    assert_run_invariants(result, helpdesk_agent())


def test_unknown_or_forbidden_target_is_an_error_result() -> None:
    root = tree()
    root_model = ScriptedModel([go("nobody"), go("root"), "stayed"])
    agent = root.replace(model=root_model)
    result = Runner(agent).run_sync("hi")
    answers = [e.content for e in result.events if isinstance(e, ToolAnswered)]
    assert answers == [
        "cannot transfer to 'nobody' (unknown agent); root may transfer to: a, b",
        "cannot transfer to 'root' (an agent it may not transfer to); root may transfer to: a, b",
    ]
    assert result.outcome == "final" and result.answered_by == "root" and "transfer" not in result.trace


def test_only_one_transfer_per_turn() -> None:
    calls = [*go("a"), *go("b")]
    agent = scripted(tree(), [calls, "from a"])
    result = Runner(agent).run_sync("hi")
    answers = [e.content for e in result.events if isinstance(e, ToolAnswered)]
    assert answers == ["transferring to a", "only one transfer per turn: already transferring to 'a'"]
    assert result.answered_by == "a"


def test_transfer_budget_goes_to_salvage_naming_it() -> None:
    agent = scripted(tree(max_transfers=2), [go("a"), go("b"), go("a"), "best effort"])
    result = Runner(agent).run_sync("hi")
    assert result.outcome == "salvaged" and result.limit == "max_transfers"
    assert len([e for e in result.events if isinstance(e, Transferred)]) == 2
    assert "run out of transfers between agents (max_transfers=2)" in result.messages[-2].text


def test_ping_pong_beyond_the_limit_is_refused() -> None:
    agent = scripted(tree(max_ping_pong=2, max_transfers=10), [go("a"), go("root"), go("a"), "summary"])
    result = Runner(agent).run_sync("hi")
    assert [(e.from_agent, e.to_agent) for e in result.events if isinstance(e, Transferred)] == [
        ("root", "a"),
        ("a", "root"),
    ]
    assert result.outcome == "salvaged" and result.limit == "max_ping_pong"


def test_shared_history_marks_other_agents_turns() -> None:
    seen: list[ModelRequest] = []

    def b_model(request: ModelRequest) -> object:
        seen.append(request)
        from loopwright import ModelResponse

        return ModelResponse(parts=(TextPart(text="b here"),))

    root = with_model(tree(), "b", ScriptedModel(b_model))  # type: ignore[arg-type]
    root = root.replace(
        model=ScriptedModel([[ToolCall(name="transfer_to_agent", args={"agent_name": "b", "task": "say hi"})]])
    )
    result = Runner(root).run_sync("hello")
    assert result.output == "b here"
    (request,) = seen
    assert [m.role for m in request.messages] == ["user", "user", "user", "user"]
    assert request.messages[0].text == "hello"
    assert request.messages[1].text == '[root] called transfer_to_agent({"agent_name": "b", "task": "say hi"})'
    assert request.messages[2].text == '[root] transfer_to_agent returned: "transferring to b"'
    assert request.messages[3].text == "[root handed this conversation to you] say hi"


def test_isolated_history_starts_from_the_task() -> None:
    seen: list[ModelRequest] = []

    def b_model(request: ModelRequest) -> object:
        seen.append(request)
        from loopwright import ModelResponse

        return ModelResponse(parts=(TextPart(text="done"),))

    a = Agent(name="a", model=ScriptedModel([]))
    b = Agent(name="b", model=ScriptedModel(b_model), history="isolated")  # type: ignore[arg-type]
    root = Agent(name="root", model=ScriptedModel([go("b", "just this")]), sub_agents=[a, b])
    Runner(root).run_sync("a long story")
    assert [m.text for m in seen[0].messages] == ["[root handed this conversation to you] just this"]


def test_next_message_goes_to_the_agent_that_answered_last() -> None:
    root = with_model(tree(), "a", ScriptedModel(["a answers", "a answers again"]))
    root = root.replace(model=ScriptedModel([go("a"), "root again"]))
    runner = Runner(root)
    first = runner.run_sync("hi")
    assert first.answered_by == "a"
    second = runner.run_sync("and now?", after=first)
    assert second.answered_by == "a" and second.output == "a answers again"
    assert second.messages[: len(first.messages)] == first.messages
    third = runner.run_sync("root, please", after=second, agent="root")
    assert third.output == "root again"
    with pytest.raises(
        ConfigurationError, match="no agent named 'zed' in this runner's tree; the agents are: root, a, b"
    ):
        runner.run_sync("?", agent="zed")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_arbitrary_transfers_stay_within_budget_and_end(data: st.DataObject) -> None:
    budget = data.draw(limits())
    budget = budget.model_copy(update={"max_transfers": data.draw(st.integers(0, 4))})
    root = tree().replace(limits=budget)
    script = data.draw(model_behaviours(root, transfer=0.5, max_replies=8))
    agent = scripted(root, script)
    result = Runner(agent).run_sync("go")
    assert_run_invariants(result, agent, script=script)
    transfers = [e for e in result.events if isinstance(e, Transferred)]
    assert len(transfers) <= budget.max_transfers
    assert result.trace[-1] in ("done", "failed")
    for hop in transfers:  # every transfer went somewhere the agent could reach
        assert hop.to_agent in [t.name for t in agent.walk() if t.name != hop.from_agent]


@pytest.mark.parametrize("stage", ["preprocess", "reason", "postprocess", "act", "decide", "transfer", "salvage"])
def test_every_working_stage_of_the_multi_agent_loop_can_be_cancelled(stage: str) -> None:
    import asyncio

    async def scenario() -> None:
        script = [go("a"), [ToolCall(name="add", args={"a": 1, "b": 2})], "salvaged"]
        runner = Runner(scripted(tree(max_iterations=2), script))
        handle = runner.start("go")
        while handle.stage != stage:
            await handle.step()
        runner.cancel(handle.run_id)
        row = await handle.step()
        assert row is not None and (row.source, row.dest) == (stage, "cancelled")
        assert handle.result.outcome == "cancelled"

    asyncio.run(scenario())


def test_multi_agent_failure_retry_and_deadline_edges() -> None:
    import asyncio

    from loopwright import ModelError

    retried = Runner(scripted(tree(), [ModelError("busy", status=529), "ok"])).run_sync("go")
    assert retried.trace[2:4] == ["reason", "reason"] and retried.outcome == "final"
    failed = Runner(scripted(tree(max_model_retries=0), [ModelError("busy", status=529)])).run_sync("go")
    assert failed.outcome == "failed"
    missing_key = tree().replace(instruction="Hi {name}")
    assert Runner(scripted(missing_key, ["x"])).run_sync("go").trace[-2:] == ["preprocess", "failed"]

    async def hang(request: ModelRequest) -> object:
        await asyncio.sleep(5)

    slow = tree(timeout_s=0.05).replace(model=ScriptedModel(hang))  # type: ignore[arg-type]
    timed_out = Runner(slow).run_sync("go")
    assert timed_out.limit == "timeout_s" and timed_out.trace[-3:] == ["decide", "salvage", "done"]


TestSteppedTreeRuns = agent_state_machine(tree(max_iterations=4)).TestCase
TestSteppedTreeRuns.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
