"""``approve(args=...)`` on a call an ``agent_tool`` child waits on reaches the child: the
calling run shows the child's call (its tool path and arguments), an edit runs that call once
with the edited arguments, and an edit the child's tool schema rejects is refused before
anything runs (issue 37). Before, the edit was checked against ``task`` and never reached the
child."""

from __future__ import annotations

import pytest

from loopwright import Agent, Limits, ResumeError, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.loop.subrun import agent_tool
from tests.loop.refunds import RAN, clear_ran, refund  # noqa: F401 (clear_ran: autouse)


def _billing() -> Agent:
    script = ScriptedModel([[ToolCall(id="r1", name="refund", args={"amount": 5})], "Refund done."])
    return Agent(name="billing", model=script, tools=[refund], limits=Limits(retry_backoff_s=0))


def _desk(helper: Agent, calls: str = "billing") -> Agent:
    hands = [ToolCall(id="d1", name=calls, args={"task": "refund 5"})]
    model = ScriptedModel([hands, "All settled."])
    return Agent(name="desk", model=model, tools=[agent_tool(helper)], limits=Limits(retry_backoff_s=0))


def test_the_request_shows_the_childs_call_and_an_edit_runs_it_once_as_edited() -> None:
    runner = Runner(_desk(_billing()))
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    (asked,) = first.pending
    assert (asked.call_id, asked.tool, asked.args) == ("d1/r1", "billing.refund", {"amount": 5})
    assert asked.kind == "confirmation" and "agent 'billing'" in asked.detail
    done = runner.resume_sync(first, {"d1/r1": approve(args={"amount": 7}, note="capped at 7")})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [7]  # the edited arguments, once
    (edit,) = [e for e in done.events if e.type == "tool_approved"]  # the calling run's log says what ran
    assert (edit.call_id, edit.name, edit.args, edit.asked, edit.note) == (
        "d1/r1",
        "billing.refund",
        {"amount": 7},
        {"amount": 5},
        "capped at 7",
    )
    answered = [p for m in done.run_state.messages for p in m.parts if getattr(p, "call_id", None) == "d1"]
    assert [a.content for a in answered] == ["Refund done."]


def test_an_edit_the_childs_schema_rejects_is_refused_before_anything_runs() -> None:
    runner = Runner(_desk(_billing()))
    first = runner.run_sync("help")
    with pytest.raises(ResumeError, match=r"d1/r1 \(billing\.refund\).*amount") as caught:
        runner.resume_sync(first, {"d1/r1": approve(args={"amount": "lots"})})
    assert "still waits" in str(caught.value)
    assert RAN == []
    done = runner.resume_sync(first, {"d1/r1": approve()})  # nothing changed: it still waits, as shown
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [5]


def test_an_edit_reaches_a_child_two_levels_down() -> None:
    """desk -> front (an agent_tool) -> billing (an agent_tool) -> refund: the edit goes down both."""
    front_model = ScriptedModel([[ToolCall(id="f1", name="billing", args={"task": "refund 5"})], "Billing says done."])
    front = Agent(name="front", model=front_model, tools=[agent_tool(_billing())], limits=Limits(retry_backoff_s=0))
    runner = Runner(_desk(front, calls="front"))
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    (asked,) = first.pending
    assert (asked.tool, asked.args) == ("front.billing.refund", {"amount": 5})
    with pytest.raises(ResumeError, match="amount"):
        runner.resume_sync(first, {"d1/f1/r1": approve(args={"amount": "x"})})
    done = runner.resume_sync(first, {"d1/f1/r1": approve(args={"amount": 3})})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [3]
    assert done.output == "All settled."


def test_a_credential_the_child_asks_for_reaches_it_and_is_not_saved() -> None:
    """A credential is handed down as before (from the calling run's credentials, never saved)."""
    from loopwright import CredentialRequired, ToolContext

    seen: list[str] = []

    @tool(credentials=True)
    def read_repo(ctx: ToolContext, repo: str) -> str:
        """Read a repository (needs a token)."""
        token = ctx.credentials.get("gh")
        if token is None:
            raise CredentialRequired("gh", "a GitHub token")
        seen.append(f"{repo}:{token}")
        return "3 files"

    script = ScriptedModel([[ToolCall(id="g1", name="read_repo", args={"repo": "x/y"})], "It has 3 files."])
    reader = Agent(name="reader", model=script, tools=[read_repo], limits=Limits(retry_backoff_s=0))
    runner = Runner(_desk(reader, calls="reader"))
    first = runner.run_sync("help")
    (asked,) = first.pending
    assert (asked.tool, asked.kind, asked.credential_key) == ("reader.read_repo", "credential", "gh")
    assert b"s3cret" not in first.run_state.to_json()
    done = runner.resume_sync(first, {"d1/g1": "s3cret"})
    assert done.outcome == "final", (done.outcome, done.error)
    assert seen == ["x/y:s3cret"]
    assert b"s3cret" not in done.run_state.to_json()


def test_what_runs_is_what_the_saved_request_shows() -> None:
    """The decision takes the shown arguments down with it: a saved state whose request shows
    other arguments than the child asked runs what it shows (the person approved that)."""
    from loopwright import RunState

    runner = Runner(_desk(_billing()))
    first = runner.run_sync("help")
    shown = RunState.from_json(first.run_state.to_json())
    held = shown.features["waiting"]
    held.pending = [p.model_copy(update={"args": {"amount": 9}}) for p in held.pending]
    assert [p.args for p in RunState.from_json(shown.to_json()).features["waiting"].pending] == [{"amount": 9}]
    done = runner.resume_sync(shown, {"d1/r1": approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [9]


def test_a_plain_tools_request_cannot_pose_as_a_nested_one() -> None:
    """Only a tool that runs an agent may show its nested run's call: a saved state whose plain
    call shows ``refund.more`` with other arguments is refused before anything runs."""
    from loopwright import RunState

    script = ScriptedModel([[ToolCall(id="p1", name="refund", args={"amount": 5})], "ok"])
    runner = Runner(Agent(name="a", model=script, tools=[refund], limits=Limits(retry_backoff_s=0)))
    first = runner.run_sync("go")
    saved = first.run_state.to_json().replace(b'"tool":"refund","args":{"amount":5}', b'"tool":"refund.x","args":{}')
    assert saved != first.run_state.to_json()
    with pytest.raises(ResumeError, match=r"shows tool 'refund\.x' but the reply calls 'refund'"):
        runner.resume_sync(RunState.from_json(saved), {"p1": approve()})
    assert RAN == []


def test_an_edit_reaches_a_workflows_step_and_is_checked_against_its_tool() -> None:
    """agent_tool(a workflow): the request shows the step's call; the edit is checked against
    the step's tool before anything runs, and runs once."""
    from loopwright.workflows import SequentialAgent

    flow = SequentialAgent("flow", steps=[_billing()])
    runner = Runner(_desk(flow, calls="flow"))
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    (asked,) = first.pending
    assert (asked.tool, asked.args) == ("flow.refund", {"amount": 5})
    with pytest.raises(ResumeError, match="invalid arguments for tool 'refund'"):
        runner.resume_sync(first, {"d1/r1": approve(args={"amount": "x"})})
    done = runner.resume_sync(first, {"d1/r1": approve(args={"amount": 2})})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [2]
