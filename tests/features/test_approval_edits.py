"""``approve(args=..., note=...)``: an approved call runs with the person's edited arguments
(checked against the tool's schema; a bad edit is refused and nothing is lost), the edit is in
the decision and a ``tool_approved`` event, and the model reads what ran and the note; across a
durable suspension too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, ResumeError, Runner, RunState, ScriptedModel, ToolCall, approve, tool
from loopwright.data.decisions import Approve
from loopwright.data.events import ToolApproved, ToolResult
from loopwright.durable.codec import decode_decisions, encode_decisions
from loopwright.stores import SQLiteStore

paid: list[tuple[str, int]] = []


@tool(requires_confirmation=True)
def pay(to: str, amount: int) -> str:
    """Pay someone (needs approval)."""
    paid.append((to, amount))
    return f"paid {amount} to {to}"


def _runner(model: ScriptedModel, **more: Any) -> Runner:
    return Runner(Agent(name="a", model=model, tools=[pay]), **more)


def _script() -> ScriptedModel:
    return ScriptedModel([[ToolCall(name="pay", args={"to": "bob", "amount": 500}, id="c1")], "done"])


def _last_result(model: ScriptedModel) -> ToolResult:
    parts = model.requests[-1].messages[-1].parts
    found = [p for p in parts if isinstance(p, ToolResult)]
    assert len(found) == 1
    return found[0]


def setup_function() -> None:
    paid.clear()


def test_an_approval_with_edited_arguments_runs_them_and_tells_the_model() -> None:
    model = _script()
    runner = _runner(model)
    first = runner.run_sync("pay bob")
    assert first.outcome == "suspended"
    done = runner.resume_sync(first, {"c1": approve(args={"to": "bob", "amount": 50}, note="50 is the limit")})
    assert done.outcome == "final"
    assert paid == [("bob", 50)]
    seen = _last_result(model)
    assert not seen.is_error
    assert isinstance(seen.content, str)
    assert 'pay({"amount": 50, "to": "bob"})' in seen.content and '"amount": 500' in seen.content
    assert "Note from the user: 50 is the limit" in seen.content and "paid 50 to bob" in seen.content
    approved = [e for e in done.events if isinstance(e, ToolApproved)]
    assert [(e.call_id, e.args, e.asked, e.note) for e in approved] == [
        ("c1", {"to": "bob", "amount": 50}, {"to": "bob", "amount": 500}, "50 is the limit")
    ]


def test_a_note_alone_reaches_the_model_and_the_call_runs_as_asked() -> None:
    model = _script()
    runner = _runner(model)
    first = runner.run_sync("pay bob")
    runner.resume_sync(first, {"c1": approve(note="fine this once")})
    assert paid == [("bob", 500)]
    content = _last_result(model).content
    assert isinstance(content, str) and content.startswith("Note from the user: fine this once")
    assert "edited" not in content


def test_a_plain_approval_is_unchanged() -> None:
    model = _script()
    runner = _runner(model)
    done = runner.resume_sync(runner.run_sync("pay bob"), {"c1": approve()})
    assert paid == [("bob", 500)] and _last_result(model).content == "paid 500 to bob"
    assert not [e for e in done.events if isinstance(e, ToolApproved)]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ({"to": "bob", "amount": "lots"}, "amount: Input should be a valid integer"),
        ({"to": "bob"}, "amount: Field required"),
        ({"to": "bob", "amount": 5, "memo": "x"}, "memo: Extra inputs are not permitted"),
    ],
)
def test_an_edit_that_does_not_fit_the_schema_is_refused_and_nothing_is_lost(args: dict[str, Any], said: str) -> None:
    runner = _runner(_script())
    first = runner.run_sync("pay bob")
    saved = first.run_state.to_json()
    with pytest.raises(ResumeError, match=r"approve\(args=\.\.\.\)") as caught:
        runner.resume_sync(first, {"c1": approve(args=args)})
    message = str(caught.value)
    assert said in message and "still waits" in message and "\n" not in message
    assert paid == []
    assert first.run_state.to_json() == saved  # nothing changed
    done = runner.resume_sync(first, {"c1": approve(args={"to": "bob", "amount": 5})})
    assert done.outcome == "final" and paid == [("bob", 5)]


def test_the_decision_keeps_the_edit_through_its_stored_form() -> None:
    decisions = {"c1": approve(args={"to": "ann", "amount": 1}, note="n"), "c2": approve()}
    back = decode_decisions(encode_decisions(decisions), set())
    assert back == decisions
    assert isinstance(back["c1"], Approve) and back["c1"].args == {"to": "ann", "amount": 1}
    assert encode_decisions({"c2": approve()}) == b'{"c2": {"type": "approve"}}'  # a plain approval's form as before


def test_an_edited_approval_across_a_durable_suspension(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = _runner(_script(), store=SQLiteStore(path)).run_sync("pay bob")
    assert first.outcome == "suspended"
    model = ScriptedModel(["done"])
    later = _runner(model, store=SQLiteStore(path))
    with pytest.raises(ResumeError, match="still waits"):
        later.resume_sync(first.run_id, {"c1": approve(args={"to": 3})})
    done = later.resume_sync(first.run_id, {"c1": approve(args={"to": "bob", "amount": 7}, note="capped")})
    assert done.outcome == "final", done.error
    assert paid == [("bob", 7)]
    content = _last_result(model).content
    assert isinstance(content, str) and "paid 7 to bob" in content and "capped" in content
    assert any(isinstance(e, ToolApproved) and e.args["amount"] == 7 for e in done.events)


def test_an_edited_approval_from_json_in_another_runner() -> None:
    first = _runner(_script()).run_sync("pay bob")
    model = ScriptedModel(["done"])
    state = RunState.from_json(first.run_state.to_json())
    done = _runner(model).resume_sync(state, {"c1": approve(args={"to": "eve", "amount": 2})})
    assert done.outcome == "final" and paid == [("eve", 2)]
