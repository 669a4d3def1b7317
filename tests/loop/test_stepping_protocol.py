"""A runner of another kind, written with the public stepping protocol alone (Runner.adopt,
attach, register, handler; Run.choose, take, checkpointer), drives runs to the very result
Runner.run gives: tool rounds, a suspension resumed from JSON, and a store's checkpoints."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, Run, Runner, RunResult, RunState, ScriptedModel, ToolCall, approve, tool
from loopwright.data.errors import ResumeError
from loopwright.stores import SQLiteStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


async def drive(runner: Runner, run: Run) -> RunResult:
    """The protocol's loop, as a custom runner writes it (no deadline, fairness or cancel); a
    resumed run starts in its waiting state, whose handler settles the decisions."""
    runner.register(run)
    first = True
    while not run.done and (first or not run.waiting):
        first = False
        waits = runner.handler(run.stage)(run.state, run.ctx)
        if waits is not None:
            await waits
        row = run.choose()
        run.take(row)
        flush = run.checkpointer(row) if run.checkpointer is not None else None
        if flush is not None:
            await flush
    return run.result


def _script(n: int) -> list[Any]:
    return [[ToolCall(name="add", args={"a": i, "b": 1})] for i in range(n)] + [f"{n} sums"]


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(rounds=st.integers(0, 6), budget=st.integers(1, 8))
def test_a_custom_runner_ends_as_runner_run_does(rounds: int, budget: int) -> None:
    def agent() -> Agent:
        return Agent(
            name="calc", model=ScriptedModel(_script(rounds)), tools=[add], limits=Limits(max_iterations=budget)
        )

    expected = Runner(agent()).run_sync("go", run_id="r")
    runner = Runner(agent())
    result = asyncio.run(drive(runner, runner.attach(runner.new_run("go", run_id="r"))))
    assert (result.outcome, result.output, result.trace, result.limit) == (
        expected.outcome,
        expected.output,
        expected.trace,
        expected.limit,
    )
    assert [e.type for e in result.events] == [e.type for e in expected.events]
    assert not runner.is_running("r")  # it left the runner when it ended


def test_a_suspension_resumed_from_json_through_the_protocol() -> None:
    """adopt() gives a loaded state the agent's budgets whatever the JSON says; the features'
    resume hooks take the decisions; the run ends as a plain resume would."""
    script: list[Any] = [[ToolCall(name="refund", args={"order": "A1"})], "done"]
    agent = Agent(name="support", model=ScriptedModel(script), tools=[refund])
    first = Runner(agent).run_sync("refund A1")
    assert first.outcome == "suspended"
    rs = RunState.from_json(first.run_state.to_json())
    rs.limits = Limits(max_iterations=999)  # whatever the state came with

    runner = Runner(agent)
    runner.adopt(rs)
    assert rs.limits == agent.limits
    run = runner.attach(rs)
    for hook in run.machine.hooks("resume"):
        hook(rs=rs, ctx=run.ctx, decisions={first.pending[0].call_id: approve()})
    rs.outcome = None
    result = asyncio.run(drive(runner, run))
    assert result.outcome == "final" and result.output == "done"
    answers = [p for m in result.messages for p in m.parts if p.type == "tool_result"]
    assert [a.content for a in answers] == ["refunded A1"]


def test_register_refuses_a_run_id_already_running() -> None:
    runner = Runner(Agent(name="a", model=ScriptedModel(["hi"])))
    one = runner.attach(runner.new_run("go", run_id="same"))
    runner.register(one)
    with pytest.raises(ResumeError, match="already running"):
        runner.register(one)
    assert runner.is_running("same")


def test_the_checkpointer_writes_what_runner_run_writes(tmp_path: Path) -> None:
    """With a store, a run driven through the protocol is saved as Runner.run saves it."""

    def agent() -> Agent:
        return Agent(name="calc", model=ScriptedModel(_script(2)), tools=[add])

    async def both() -> tuple[Any, Any]:
        plain = SQLiteStore(tmp_path / "plain.db")
        custom = SQLiteStore(tmp_path / "custom.db")
        await Runner(agent(), store=plain).run("go", run_id="r")
        runner = Runner(agent(), store=custom)
        await drive(runner, runner.attach(runner.new_run("go", run_id="r")))
        return await plain.load("r"), await custom.load("r")

    plain, custom = asyncio.run(both())
    assert plain is not None and custom is not None
    assert (custom.stage, custom.trace) == (plain.stage, plain.trace)
    assert _without_ids(custom.messages) == _without_ids(plain.messages)


def _without_ids(messages: Any) -> str:
    """The saved history with its generated call ids taken out (each run makes its own)."""
    text = json.dumps(messages, sort_keys=True, default=str)
    return re.sub(r"call_[0-9a-f]+", "call_?", text)
