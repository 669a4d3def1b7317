"""An ``agent_tool`` child that waits for a person suspends the runs above it, and the top run's
resume hands the decision down: the child goes on where it stopped, the approved call runs
exactly once, and the whole tree ends (issue 37). Before, the child's wait ended the call with
a ToolError ("needs a person's decision, which a nested run cannot wait for")."""

from __future__ import annotations

from pathlib import Path

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, approve, deny
from loopwright.loop.subrun import agent_tool
from loopwright.stores import SQLiteStore
from loopwright.testing import CountingModel, CountingTools
from loopwright.workflows import SequentialAgent
from tests.loop.refunds import RAN, clear_ran, refund  # noqa: F401 (clear_ran: autouse)


def _tree(restarted: bool = False) -> tuple[Agent, CountingModel, CountingModel]:
    """A desk agent that asks the billing agent (as a tool) to refund 5; billing's refund waits.
    ``restarted``: the scripts go on from the wait (a new process's models)."""
    asks = [] if restarted else [[ToolCall(id="r1", name="refund", args={"amount": 5})]]
    billing_model = CountingModel(ScriptedModel([*asks, "Refund done."]))
    billing = Agent(name="billing", model=billing_model, tools=[refund], limits=Limits(retry_backoff_s=0))
    hands = [] if restarted else [[ToolCall(id="d1", name="billing", args={"task": "refund 5"})]]
    desk_model = CountingModel(ScriptedModel([*hands, "All settled."]))
    desk = Agent(name="desk", model=desk_model, tools=[agent_tool(billing)], limits=Limits(retry_backoff_s=0))
    return desk, desk_model, billing_model


def test_the_childs_wait_suspends_the_top_run_and_its_resume_runs_the_call_once() -> None:
    desk, desk_model, billing_model = _tree()
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error, first.output)
    (asked,) = first.pending
    assert asked.tool == "billing.refund" and asked.args == {"amount": 5} and asked.kind == "confirmation"
    assert "agent 'billing'" in asked.detail and '{"task": "refund 5"}' in asked.detail
    assert RAN == []
    done = runner.resume_sync(first, {asked.call_id: approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert done.output == "All settled."
    assert RAN == [5]  # exactly once
    assert (desk_model.calls, billing_model.calls) == (2, 2)  # counted inside the models: no call again
    answered = [p for m in done.run_state.messages for p in m.parts if getattr(p, "call_id", None) == "d1"]
    assert [a.content for a in answered] == ["Refund done."]


def test_a_denial_is_handed_down_the_refund_never_runs_and_the_child_reads_it() -> None:
    """A denial goes down to the child, as a workflow's does: its call is answered "denied by the
    user", and its model goes on with that (so one denial of a child waiting on several calls
    does not answer them all)."""
    desk, _, billing_model = _tree()
    runner = Runner(desk)
    first = runner.run_sync("help")
    done = runner.resume_sync(first, {first.pending[0].call_id: deny("not today")})
    assert done.outcome == "final" and done.output == "All settled."
    assert RAN == []
    assert billing_model.calls == 2
    told = [
        p for m in billing_model.inner.requests[-1].messages for p in m.parts if getattr(p, "call_id", None) == "r1"
    ]
    assert [(p.content, p.is_error) for p in told if hasattr(p, "content")] == [("denied by the user: not today", True)]


def test_with_a_store_a_new_runner_resumes_the_tree(tmp_path: Path) -> None:
    """The child's place is kept in the top run's saved state: another runner on the same store
    (another process, after a restart) resumes it, and the refund runs once."""
    path = tmp_path / "runs.db"
    desk, _, _ = _tree()
    first = Runner(desk, store=SQLiteStore(path)).run_sync("help", run_id="t1")
    assert first.outcome == "suspended"
    call_id = first.pending[0].call_id
    desk2, desk2_model, billing2 = _tree(restarted=True)
    done = Runner(desk2, store=SQLiteStore(path)).resume_sync("t1", {call_id: approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [5]
    assert (desk2_model.calls, billing2.calls) == (1, 1)  # each went on from its wait: its last reply only


def test_a_workflow_step_whose_agent_tool_waits_suspends_the_workflow() -> None:
    desk, _, _ = _tree()
    flow = SequentialAgent("flow", steps=[desk])
    runner = Runner(flow)
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    done = runner.resume_sync(first, {first.pending[0].call_id: approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [5]


def test_a_child_waiting_on_two_calls_asks_for_both_at_once_and_one_resume_runs_each_once() -> None:
    """One suspension shows every request of the child (each with its tool path and arguments,
    its id under the calling run's call), and one resume with a decision for each resumes the
    child once: each approved call runs once. Before, the calling run showed the first only and,
    resumed, suspended again for the next."""
    asks = [ToolCall(id="r1", name="refund", args={"amount": 5}), ToolCall(id="r2", name="refund", args={"amount": 6})]
    billing_model = CountingModel(ScriptedModel([asks, "Both done."]))
    billing = Agent(name="billing", model=billing_model, tools=[refund], limits=Limits(retry_backoff_s=0))
    hands = [ToolCall(id="d1", name="billing", args={"task": "refund 5 and 6"})]
    counted = CountingTools()
    desk = Agent(name="desk", model=ScriptedModel([hands, "All settled."]), tools=[counted.wrap(agent_tool(billing))])
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    assert [(p.call_id, p.tool, p.args, p.kind) for p in first.pending] == [
        ("d1/r1", "billing.refund", {"amount": 5}, "confirmation"),
        ("d1/r2", "billing.refund", {"amount": 6}, "confirmation"),
    ]
    assert all("agent 'billing'" in p.detail for p in first.pending)
    done = runner.resume_sync(first, {"d1/r1": approve(), "d1/r2": approve(args={"amount": 4})})
    assert done.outcome == "final", (done.outcome, done.error)
    assert sorted(RAN) == [4, 5]  # each once, the edit as edited
    assert billing_model.calls == 2  # the child resumed once: one more pass
    assert counted.runs == 2  # the agent_tool: once to wait, once to go on
    assert [e.type for e in done.events].count("suspended") == 1
