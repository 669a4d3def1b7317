"""Workflow agents and MCP toolsets on DBOS, in one process on SQLite: a workflow agent runs and ends
as ``Runner.run`` does, its children checkpointed beside DBOS's tables, and an agent whose tools come
from an MCP server runs its calls through the server."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from typing import Any

import pytest

from tests import TESTS

if not os.environ.get("CI"):  # under CI the DBOS tests must run (.ci/run installs the extra)
    pytest.importorskip("dbos", reason="pip install -e '.[dbos]' to run the DBOS tests")


from loopwright import (
    Agent,
    ModelRequest,
    ModelResponse,
    Runner,
    RunResult,
    ScriptedModel,
    TextPart,
    ToolCall,
    approve,
    tool,
)
from loopwright.durable.checkpoint import rebuild
from loopwright.integrations import dbos as lw
from loopwright.stores import SQLiteStore
from loopwright.workflows import LoopAgent, MapAgent, ParallelAgent, SequentialAgent
from tests import store_app

pytestmark = pytest.mark.dbos


def _until(client: lw.Client, run_id: str, outcome: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.status(run_id)
        if status is not None and status.get("outcome") == outcome:
            return status
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} never became {outcome}; last status: {client.status(run_id)}")


def _desk(prefix: str) -> SequentialAgent:
    """A sequence whose middle step is a parallel of two branches; one waits for a confirmation."""

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refund an order (a person approves it first)."""
        return f"refunded {order}"

    notes = Agent(name="notes", model=ScriptedModel(["noted"]))
    pay = Agent(
        name="pay",
        tools=[refund],
        model=ScriptedModel([[ToolCall(id="r1", name="refund", args={"order": "A1"})], "paid"]),
    )
    return SequentialAgent(
        f"{prefix}desk",
        steps=[
            Agent(name="research", model=ScriptedModel(["researched"])),
            ParallelAgent("work", branches=[notes, pay]),
            Agent(name="summary", model=ScriptedModel(["all done"])),
        ],
    )


def test_a_workflow_agent_runs_on_dbos_and_ends_as_runner_run(client: lw.Client) -> None:
    """A sequence holding a parallel: it suspends for the child's confirmation, resumes into the
    child on the decision, and ends as in-process; each of the workflow's stages is one DBOS step
    and each child run is checkpointed (beside DBOS's tables) under ``run_id.key``."""
    run_id = uuid.uuid4().hex
    lw.register(_desk("d1"))

    async def go() -> RunResult:
        await lw.start("d1desk", "refund A1", run_id=run_id)
        status = await asyncio.to_thread(_until, client, run_id, "suspended")
        assert [(p["call_id"], p["tool"]) for p in status["pending"]] == [("r1", "refund")]
        client.decide(run_id, {"r1": approve()})
        return await lw.result(run_id)

    result = asyncio.run(go())
    runner = Runner(_desk("d1"))
    first = runner.run_sync("refund A1", run_id=run_id)
    reference = runner.resume_sync(first, {"r1": approve()})
    assert result.outcome == reference.outcome == "final"
    assert result.output == reference.output == "all done"
    assert result.trace == reference.trace == ["start", "research", "work", "suspended", "work", "summary", "done"]
    assert result.state == reference.state
    assert [s["stage"] for s in client.steps(run_id)] == result.trace[:-1]  # a step per stage
    store = SQLiteStore(client.db.removeprefix("sqlite:///"))
    try:
        for key in ("research", "work", "work.notes", "work.pay", "summary"):
            if key == "work":
                continue  # (the parallel is a child too; its branches are its children)
            saved = asyncio.run(store.load(f"{run_id}.{key}"))
            assert saved is not None and saved.outcome == "final", key
    finally:
        asyncio.run(store.close())


def test_loop_and_map_agents_run_on_dbos(client: lw.Client) -> None:
    """A loop of two rounds and a map over three items: the same results as in-process."""
    loop = LoopAgent(
        "dbos_loop",
        body=[Agent(name="writer", model=ScriptedModel(["draft 1", "draft 2"]))],
        max_iterations=2,
    )

    def upper(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=request.messages[0].text.upper()),))

    per_item = MapAgent("dbos_map", Agent(name="upper", model=ScriptedModel(upper)), over="items")
    lw.register(loop, per_item)
    ids = {name: uuid.uuid4().hex for name in ("dbos_loop", "dbos_map")}

    async def go() -> dict[str, RunResult]:
        await lw.start("dbos_loop", "write", run_id=ids["dbos_loop"])
        await lw.start("dbos_map", "each", run_id=ids["dbos_map"], state={"items": ["a", "b", "c"]})
        return {name: await lw.result(run_id) for name, run_id in ids.items()}

    got = asyncio.run(go())
    assert got["dbos_loop"].outcome == "final" and got["dbos_loop"].state["writer"] == "draft 2"
    assert got["dbos_loop"].trace == ["start", "writer", "writer", "done"]
    assert got["dbos_map"].outcome == "final" and got["dbos_map"].state["dbos_map"] == ["A", "B", "C"]


SERVER = str(TESTS / "mcp_servers" / "calc_server.py")


@pytest.mark.slow
def test_an_agent_with_an_mcp_toolset_runs_its_calls_on_dbos(client: lw.Client) -> None:
    """The DBOS workflow opens the agent's toolsets (as ``Runner.run`` does): the MCP server's
    tool answers the call, in an agent and in a workflow's child."""
    pytest.importorskip("mcp")
    from loopwright.integrations.mcp import McpToolset

    toolset = McpToolset.stdio(sys.executable, [SERVER])
    model = ScriptedModel([[ToolCall(id="a1", name="add", args={"a": 2, "b": 3})], "five"])
    agent = Agent(name="mcp_adder", model=model, tools=[toolset])
    child = Agent(
        name="child_adder",
        model=ScriptedModel([[ToolCall(id="a2", name="add", args={"a": 4, "b": 5})], "nine"]),
        tools=[McpToolset.stdio(sys.executable, [SERVER])],
    )
    lw.register(agent, SequentialAgent("mcp_flow", steps=[child]))
    run_ids = [uuid.uuid4().hex, uuid.uuid4().hex]

    async def go() -> list[RunResult]:
        try:
            await lw.start("mcp_adder", "add", run_id=run_ids[0])
            await lw.start("mcp_flow", "add", run_id=run_ids[1])
            return [await lw.result(run_ids[0]), await lw.result(run_ids[1])]
        finally:
            for name in ("mcp_adder", "mcp_flow"):
                await lw.runner_for(name).aclose()

    plain, flow = asyncio.run(go())
    assert plain.outcome == "final" and plain.output == "five", plain.error
    answers = [p for m in plain.messages for p in m.parts if p.type == "tool_result"]
    assert [(a.call_id, a.content, a.is_error) for a in answers] == [("a1", {"result": 5}, False)]
    assert flow.outcome == "final" and flow.output == "nine", flow.error


def test_a_workflow_agent_cancelled_on_dbos_ends_cancelled_its_child_s_call_answered(client: lw.Client) -> None:
    """``Client.cancel`` of a workflow agent whose child is in a minute-long call: the step is
    interrupted, the workflow ends ``cancelled`` well before the minute, the child's call answered."""
    from tests.store_app import by_turn, work

    calls = [ToolCall(id="c-stuck", name="work", args={"label": "stuck", "seconds": 60.0})]
    stuck = Agent(name="stuck_child", model=by_turn([calls, "done"]), tools=[work])
    lw.register(SequentialAgent("stuck_flow", steps=[stuck]))
    run_id = uuid.uuid4().hex
    store_app.EXECUTED.clear()

    async def go() -> RunResult:
        await lw.start("stuck_flow", "go", run_id=run_id)
        await asyncio.to_thread(_until_executed)
        assert await asyncio.to_thread(client.cancel, run_id) is True
        return await lw.result(run_id)

    started = time.monotonic()
    result = asyncio.run(go())
    assert time.monotonic() - started < 30  # not the call's 60 s
    assert result.outcome == "cancelled" and result.trace[-2:] == ["stuck_child", "cancelled"], result.trace
    store = SQLiteStore(client.db.removeprefix("sqlite:///"))
    try:
        child = asyncio.run(store.load(f"{run_id}.stuck_child"))
    finally:
        asyncio.run(store.close())
    assert child is not None and child.outcome == "cancelled"
    answers = [p for m in rebuild(child).messages for p in m.parts if p.type == "tool_result"]
    assert [(a.call_id, a.is_error) for a in answers] == [("c-stuck", True)]


def _until_executed(timeout_s: float = 30.0) -> None:
    """Until a tool of ``store_app`` has started."""
    deadline = time.monotonic() + timeout_s
    while not store_app.EXECUTED:
        assert time.monotonic() < deadline, "the child's call never started"
        time.sleep(0.02)
