"""Human-in-the-loop waits: confirmations, credentials and long-running results suspend the
run; resume applies decisions exactly once; state survives JSON and a new process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import ResumeError, Runner, RunState, ToolCall, ToolResult, approve, deny
from loopwright.data.events import Resumed, Suspended, ToolAnswered
from loopwright.features import BUILT_IN_MACHINES, machine_for
from loopwright.testing import assert_run_invariants
from tests import ROOT
from tests.waiting_app import RAN, SCRIPT, make_agent


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def answers(result: Any) -> list[Any]:
    return [(e.call_id, e.content) for e in result.events if isinstance(e, ToolAnswered)]


def test_confirmation_suspends_then_approved_call_runs_exactly_once() -> None:
    agent = make_agent(SCRIPT, max_repeated_calls=None)
    assert machine_for(agent) is BUILT_IN_MACHINES["waiting"]
    runner = Runner(agent)
    first = runner.run_sync("pay the invoice")
    assert first.outcome == "suspended" and first.trace[-2:] == ["decide", "suspended"]
    assert [(p.call_id, p.kind, p.tool) for p in first.pending] == [("c-pay", "confirmation", "pay")]
    assert RAN == [("note", "hi")]  # the other call of the step ran; its answer is held
    assert first.messages[-1].role == "assistant"
    (event,) = [e for e in first.events if isinstance(e, Suspended)]
    assert event.pending[0].args == {"amount": 500}

    second = runner.resume_sync(first, {"c-pay": approve()})
    assert second.outcome == "final" and second.output == "all done"
    assert RAN == [("note", "hi"), ("pay", 500)]
    turn = second.messages[2]
    assert [(p.call_id, p.content) for p in turn.parts if isinstance(p, ToolResult)] == [
        ("c-pay", "paid 500"),
        ("c-note", "noted"),
    ]
    resumed_at = second.trace.index("suspended")
    assert second.trace[resumed_at : resumed_at + 3] == ["suspended", "decide", "preprocess"]
    kinds = [e.type for e in second.events]  # every leg's: from run_started on
    assert kinds[0] == "run_started" and [e.seq for e in second.events] == list(range(1, len(kinds) + 1))
    assert kinds[kinds.index("resumed") :][:3] == ["resumed", "tool_answered", "state_entered"]
    assert any(isinstance(e, Resumed) and e.decided == ("c-pay",) for e in second.events)
    with pytest.raises(ResumeError, match="is not waiting: it is in state 'done'"):
        runner.resume_sync(second, {"c-pay": approve()})
    assert RAN.count(("pay", 500)) == 1


def test_denied_call_never_runs() -> None:
    runner = Runner(make_agent(SCRIPT))
    result = runner.resume_sync(runner.run_sync("go"), {"c-pay": deny("too much")})
    assert ("pay", 500) not in RAN
    assert ("c-pay", "denied by the user: too much") in answers(result)
    assert result.outcome == "final"


def test_confirmation_rule_sees_the_arguments() -> None:
    result = Runner(make_agent([[ToolCall(name="pay", args={"amount": 50})], "ok"])).run_sync("go")
    assert result.outcome == "final" and RAN == [("pay", 50)]


def test_credential_request_then_the_tool_runs_with_it() -> None:
    runner = Runner(make_agent([[ToolCall(id="c1", name="read_repo", args={"repo": "acme/x"})], "read it"]))
    first = runner.run_sync("go")
    (request,) = first.pending
    assert (request.kind, request.credential_key, request.detail) == (
        "credential",
        "github_token",
        "a GitHub token to read acme/x",
    )
    with pytest.raises(ResumeError, match=r"waits for a credential: pass the value itself, or deny"):
        runner.resume_sync(first, {"c1": approve()})
    second = runner.resume_sync(first, {"c1": "ghp_secret_token_value"})
    assert ("c1", "read acme/x with a token of 22 characters") in answers(second)
    assert b"ghp_secret" not in second.run_state.to_json()  # credentials are never saved


def test_long_running_result_is_used_as_given() -> None:
    runner = Runner(make_agent([[ToolCall(id="r1", name="render", args={"video": "v.mp4"})], "rendered"]))
    first = runner.run_sync("go")
    assert [(p.kind, p.detail) for p in first.pending] == [("result", "render of v.mp4 queued")]
    second = runner.resume_sync(first, {"r1": {"url": "https://cdn/v.mp4", "seconds": 3600}})
    assert ("r1", {"url": "https://cdn/v.mp4", "seconds": 3600}) in answers(second)
    assert RAN == [("render", "v.mp4")]  # started once; the result came from outside


def test_bad_resumes_change_nothing() -> None:
    runner = Runner(make_agent(SCRIPT))
    first = runner.run_sync("go")
    before = first.run_state.to_json()
    with pytest.raises(
        ResumeError, match=r"no pending request has call id 'nope'; pending: c-pay \(pay, confirmation\)"
    ):
        runner.resume_sync(first, {"nope": approve()})
    with pytest.raises(ResumeError, match=r"waits for a confirmation: pass approve\(\) or deny\('reason'\)"):
        runner.resume_sync(first, {"c-pay": "yes please"})
    assert first.run_state.to_json() == before
    with pytest.raises(ResumeError, match="no run with id 'run-1' is paused on this runner"):
        runner.resume_sync("run-1")  # a str is a paused run's id
    with pytest.raises(ResumeError, match="resume\\(\\) takes a RunResult, a RunState or a paused run's id"):
        runner.resume_sync(3)  # type: ignore[arg-type]


def test_partial_decisions_keep_the_rest_waiting() -> None:
    calls = [ToolCall(id="a", name="pay", args={"amount": 200}), ToolCall(id="b", name="pay", args={"amount": 300})]
    runner = Runner(make_agent([calls, "ok"]))
    first = runner.run_sync("go")
    second = runner.resume_sync(first, {"a": approve()})
    assert second.outcome == "suspended" and [p.call_id for p in second.pending] == ["b"]
    third = runner.resume_sync(second, {"b": deny("no")})
    assert RAN == [("pay", 200)] and third.outcome == "final"
    assert [p.call_id for p in third.messages[2].parts if isinstance(p, ToolResult)] == ["a", "b"]


def test_past_the_wait_deadline_pending_calls_are_denied() -> None:
    runner = Runner(make_agent(SCRIPT, wait_timeout_s=0.01))
    first = runner.run_sync("go")
    time.sleep(0.05)
    second = runner.resume_sync(first, {"c-pay": approve()})
    assert ("pay", 500) not in RAN
    assert ("c-pay", "denied by the user: timed out: no decision within wait_timeout_s=0.01") in answers(second)
    assert any(isinstance(e, Resumed) and e.timed_out for e in second.events)


@pytest.mark.slow
def test_the_run_clock_stops_while_waiting() -> None:
    runner = Runner(make_agent(SCRIPT, timeout_s=0.5))
    first = runner.run_sync("go")
    time.sleep(0.6)  # longer than timeout_s, but the run was waiting
    assert runner.resume_sync(first, {"c-pay": approve()}).outcome == "final"


def test_cancel_a_suspended_run_answers_its_calls() -> None:
    runner = Runner(make_agent(SCRIPT))
    result = runner.resume_sync(runner.run_sync("go"), cancel=True)
    assert result.outcome == "cancelled" and result.trace[-2:] == ["suspended", "cancelled"]
    assert ("c-pay", "tool 'pay' did not finish: the run ended in 'cancelled'") in answers(result)
    assert ("pay", 500) not in RAN


def test_suspension_budget_answers_instead_of_waiting() -> None:
    result = Runner(make_agent(SCRIPT, max_suspensions=0)).run_sync("go")
    assert result.outcome == "final"
    assert ("c-pay", "tool 'pay' needs confirmation but the run has already waited max_suspensions=0 times") in answers(
        result
    )


def test_undeclared_credential_request_on_a_loop_that_cannot_wait() -> None:
    from loopwright import Agent, CredentialRequired, ScriptedModel, tool

    @tool
    def sneaky() -> str:
        """Asks for a credential without declaring it."""
        raise CredentialRequired("key")

    agent = Agent(name="a", model=ScriptedModel([[ToolCall(id="s", name="sneaky")], "ok"]), tools=[sneaky])
    result = Runner(agent).run_sync("go")
    ((_, message),) = answers(result)
    assert message.startswith("tool 'sneaky' needs credential but this agent's loop has no waiting state")


def test_a_suspended_run_resumes_in_a_new_process(tmp_path: Path) -> None:
    first = Runner(make_agent(SCRIPT)).run_sync("go")
    saved = tmp_path / "run.json"
    saved.write_bytes(first.run_state.to_json())
    code = (
        "import json, sys\n"
        "from loopwright import Runner, RunState, approve\n"
        "from tests.waiting_app import RAN, SCRIPT, make_agent\n"
        "state = RunState.from_json(open(sys.argv[1], 'rb').read())\n"
        "result = Runner(make_agent(SCRIPT[1:])).resume_sync(state, {'c-pay': approve()})\n"
        "print(json.dumps({'outcome': result.outcome, 'output': result.output, 'ran': RAN}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(saved)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"outcome": "final", "output": "all done", "ran": [["pay", 500]]}


decisions = st.sampled_from(["approve", "deny", "skip"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.lists(st.tuples(st.sampled_from(["pay", "note"]), st.integers(0, 400)), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    plan=st.lists(st.tuples(st.lists(decisions, min_size=3, max_size=3), st.booleans()), min_size=1, max_size=8),
)
def test_any_interleaving_of_suspend_dump_load_resume(steps: list[Any], plan: list[Any]) -> None:
    """Every call answered exactly once; approved calls run once; denied ones never."""
    RAN.clear()
    script: list[Any] = []
    for n, step in enumerate(steps):
        script.append(
            [
                ToolCall(id=f"s{n}c{i}", name=t, args={"amount": v} if t == "pay" else {"text": str(v)})
                for i, (t, v) in enumerate(step)
            ]
        )
    script.append("finished")
    agent = make_agent(script, max_iterations=len(script) + 1, max_repeated_calls=None)  # repeats are the point
    runner = Runner(agent)
    result = runner.run_sync("go")
    events = list(result.events)
    approved: set[str] = set()
    denied: set[str] = set()
    for choices, reload in plan:
        if result.outcome != "suspended":
            break
        state = RunState.from_json(result.run_state.to_json()) if reload else result.run_state
        chosen: dict[str, Any] = {}
        for request, choice in zip(result.pending, choices, strict=False):
            if choice == "approve":
                chosen[request.call_id] = approve()
                approved.add(request.call_id)
            elif choice == "deny":
                chosen[request.call_id] = deny("no")
                denied.add(request.call_id)
        result = asyncio.run(runner.resume(state, chosen))
        events += [e for e in result.events if e.seq > events[-1].seq]  # (a resumed copy's start at the resume)
    while result.outcome == "suspended":  # finish: deny whatever is still waiting
        rest = {r.call_id: deny("end") for r in result.pending}
        denied |= set(rest)
        result = runner.resume_sync(result, rest)
        events += [e for e in result.events if e.seq > events[-1].seq]
    merged = result.model_copy(update={"events": [e.model_copy(update={"seq": i + 1}) for i, e in enumerate(events)]})
    assert_run_invariants(merged, agent)
    calls = [c for step in script[:-1] for c in step]
    expected = [c.args["amount"] for c in calls if c.name == "pay" and (c.args["amount"] <= 100 or c.id in approved)]
    assert sorted(v for name, v in RAN if name == "pay") == sorted(expected)  # approved once, denied never
    assert not approved & denied


def test_a_suspended_result_keeps_its_own_trace_and_history_a_finished_one_shares_them() -> None:
    """Resuming continues the run state: the suspended result must not change under its
    reader; a finished run's never changes again, so its result shares them (no copy)."""
    runner = Runner(make_agent(SCRIPT, max_repeated_calls=None))
    first = runner.run_sync("pay the invoice")
    trace, history = list(first.trace), list(first.messages)
    assert first.trace is not first.run_state.trace and first.messages is not first.run_state.messages
    second = runner.resume_sync(first, {"c-pay": approve()})
    assert (first.trace, first.messages) == (trace, history)  # unchanged by the resume
    assert second.outcome == "final"
    assert second.trace is second.run_state.trace and second.messages is second.run_state.messages
