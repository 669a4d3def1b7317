"""Hardening: results and recorded requests are snapshots: what was handed out does not change
when the run (or the conversation) goes on; run_sync does not render the result's repr."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.data.result import RunResult


def test_a_suspended_result_does_not_change_when_the_run_is_resumed() -> None:
    @tool(requires_confirmation=True)
    def pay(amount: int) -> str:
        """Pays."""
        return "paid"

    agent = Agent(
        name="p", model=ScriptedModel([[ToolCall(name="pay", args={"amount": 1})], "done"]), instruction="P.",
        tools=[pay],
    )  # fmt: skip
    runner = Runner(agent)
    waiting = runner.run_sync("pay")
    messages, trace = len(waiting.messages), len(waiting.trace)
    done = runner.resume_sync(waiting, {waiting.pending[0].call_id: approve()})
    assert done.outcome == "final"
    assert (len(waiting.messages), len(waiting.trace)) == (messages, trace)


def test_the_next_turn_does_not_change_an_earlier_results_state() -> None:
    @tool
    def remember(item: str, ctx: Any) -> str:
        """Remembers."""
        ctx.state.setdefault("items", []).append(item)
        return "ok"

    model = ScriptedModel(
        [[ToolCall(name="remember", args={"item": "a"})], "one", [ToolCall(name="remember", args={"item": "b"})], "two"]
    )
    runner = Runner(Agent(name="m", model=model, instruction="M.", tools=[remember]))
    first = runner.run_sync("first")
    second = runner.run_sync("second", after=first)
    assert second.state["items"] == ["a", "b"]
    assert first.state["items"] == ["a"]


def test_recorded_requests_show_what_was_sent() -> None:
    model = ScriptedModel([[ToolCall(name="noop", args={})], "done"])

    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    Runner(Agent(name="n", model=model, instruction="N.", tools=[noop])).run_sync("hi")
    assert [len(r.messages) for r in model.requests] == [1, 3]


def test_run_sync_does_not_render_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = 0
    original = RunResult.__repr__

    def counting(self: RunResult) -> str:
        nonlocal rendered
        rendered += 1
        return original(self)

    monkeypatch.setattr(RunResult, "__repr__", counting)
    runner = Runner(Agent(name="r", model=ScriptedModel(["hi"]), instruction="R."))
    runner.run_sync("hello")
    assert rendered == 0
