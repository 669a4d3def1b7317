"""A saved run state is untrusted input: edited counters, limits, pending requests and replies
are refused by resume with a ResumeError naming the field, before any call runs, and leave no
run registered; signed states refuse any change."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from loopwright import ResumeError, Runner, RunState, ToolCall, approve
from tests.store_app import EXECUTED, make_agent

SCRIPT = [
    [
        ToolCall(id="c-pay", name="pay", args={"amount": 500}),
        ToolCall(id="c-note", name="work", args={"label": "note"}),
    ],
    "done",
]


def suspended(**limits: Any) -> tuple[Runner, dict[str, Any]]:
    runner = Runner(make_agent(SCRIPT, **limits))
    first = runner.run_sync("pay")
    assert first.outcome == "suspended"
    EXECUTED.clear()
    return runner, json.loads(first.run_state.to_json())


def set_reply_amount(d: dict[str, Any], amount: int) -> None:
    """The attacker changes the call that runs, in the reply and in the history alike."""
    d["response"]["parts"][0]["args"]["amount"] = amount
    d["messages"][-1]["parts"][0]["args"]["amount"] = amount


FAULTS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "negative iteration": (lambda d: d.update(iteration=-50), "iteration is -50; a counter cannot be negative"),
    "negative tool calls": (lambda d: d.update(tool_calls_made=-1), "tool_calls_made is -1"),
    "negative charge": (lambda d: d["charges"].update(max_suspensions=-50), r"charges\['max_suspensions'\] is -50"),
    "unknown budget": (lambda d: d["charges"].update(max_bogus=1), "budget 'max_bogus', which this agent's machine"),
    "negative usage": (lambda d: d["usage"].update(input_tokens=-5), r"usage.input_tokens.*-5"),  # refused at load
    "approved call is not what was shown": (
        lambda d: set_reply_amount(d, 5000),
        r"pending call 'c-pay' \(pay\) shows arguments \{'amount': 500\} but the reply's call has \{'amount': 5000\}",
    ),
    "reply changed but not the history": (
        lambda d: d["response"]["parts"][0]["args"].update(amount=5000),
        "the last turn of its history is not the reply whose calls wait",
    ),
    "pending id not in the reply": (
        lambda d: d["features"]["waiting"]["pending"][0].update(call_id="zzz"),
        "pending call 'zzz' is not one of the reply's calls",
    ),
    "pending tool renamed": (
        lambda d: d["features"]["waiting"]["pending"][0].update(tool="work"),
        "pending call 'c-pay' shows tool 'work' but the reply calls 'pay'",
    ),
    "reply dropped": (lambda d: d.update(response=None), r"holds no model reply \(response is null\)"),
    "held step cut short": (
        lambda d: d["features"]["waiting"].update(step=[None]),
        "the held step has 1 answers for 2 calls",
    ),
    "trace cut": (lambda d: d.update(trace=d["trace"][:-1]), "its trace does not end in its state 'suspended'"),
    "unknown agent": (lambda d: d.update(active_agent="mallory"), "active agent 'mallory' is not in"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_edited_saved_state_is_refused_before_anything_runs(fault: str) -> None:
    runner, saved = suspended()
    edit, message = FAULTS[fault]
    edit(saved)
    with pytest.raises(ResumeError, match=message):  # at load (the shape) or at resume (the meaning)
        rs = RunState.from_json(json.dumps(saved))
        runner.resume_sync(rs, {"c-pay": approve()})
    assert EXECUTED == [] and runner.active_runs == []


def test_limits_written_into_the_json_are_ignored() -> None:
    """The budgets are the agent's: a saved state that claims max_iterations=999 still gets 1."""
    runner, saved = suspended(max_iterations=1)
    saved["limits"] = {"max_iterations": 999, "max_suspensions": 999}
    rs = RunState.from_json(json.dumps(saved))
    assert rs.limits.max_iterations != 999
    result = runner.resume_sync(rs, {"c-pay": approve()})
    assert result.iterations <= 1 and rs.limits.max_iterations == 1


def test_an_untouched_state_resumes() -> None:
    runner, saved = suspended()
    result = runner.resume_sync(RunState.from_json(json.dumps(saved)), {"c-pay": approve()})
    assert result.outcome == "final" and [label for label, _ in EXECUTED] == ["pay 500"]


def test_signed_states_refuse_any_change() -> None:
    runner = Runner(make_agent(SCRIPT))
    first = runner.run_sync("pay")
    key = b"server secret"
    signed = first.run_state.to_json(key=key)
    assert json.loads(signed)["hmac_sha256"]
    assert RunState.from_json(signed, key=key).to_json() == first.run_state.to_json()
    tampered = signed.replace(b'"amount":500', b'"amount":5000')
    assert tampered != signed
    with pytest.raises(ResumeError, match="signature does not match"):
        RunState.from_json(tampered, key=key)
    with pytest.raises(ResumeError, match="signature does not match"):
        RunState.from_json(signed, key=b"another key")
    with pytest.raises(ResumeError, match="this run state is not signed"):
        RunState.from_json(first.run_state.to_json(), key=key)
    done = runner.resume_sync(RunState.from_json(signed, key=key), {"c-pay": approve()})
    assert done.outcome == "final"
