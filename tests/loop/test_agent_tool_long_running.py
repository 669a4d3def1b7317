"""An ``agent_tool`` child that waits on a long-running tool's result suspends the runs above
it; the top run's resume with the result hands it down, the child goes on where it stopped and
its answer is the call's result, each tool body run once (issue 37). Before, the child's wait
ended the call with a ToolError ("a nested run cannot wait for")."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright import Agent, Limits, Pending, Runner, ScriptedModel, ToolCall, tool
from loopwright.loop.subrun import agent_tool
from loopwright.stores import SQLiteStore
from loopwright.testing import CountingModel, CountingTools

STARTED: list[str] = []


@tool(long_running=True)
async def export(table: str) -> Pending:
    """Start exporting a table; the result comes later."""
    STARTED.append(table)
    return Pending(detail=f"exporting {table}")


@pytest.fixture(autouse=True)
def _clear() -> None:
    STARTED.clear()


def _worker(restarted: bool = False) -> tuple[Agent, CountingModel]:
    asks = [] if restarted else [[ToolCall(id="x1", name="export", args={"table": "orders"})]]
    model = CountingModel(ScriptedModel([*asks, "Exported: 42 rows."]))
    return Agent(name="worker", model=model, tools=[export], limits=Limits(retry_backoff_s=0)), model


def _boss(helper: Agent, restarted: bool = False, calls: str = "worker") -> tuple[Agent, CountingModel, CountingTools]:
    counted = CountingTools()
    hands = [] if restarted else [[ToolCall(id="b1", name=calls, args={"task": "export orders"})]]
    model = CountingModel(ScriptedModel([*hands, "The export is done."]))
    boss = Agent(name="boss", model=model, tools=[counted.wrap(agent_tool(helper))], limits=Limits(retry_backoff_s=0))
    return boss, model, counted


def test_the_childs_wait_suspends_the_top_run_and_the_result_resumes_it_once() -> None:
    worker, worker_model = _worker()
    boss, boss_model, counted = _boss(worker)
    runner = Runner(boss)
    first = runner.run_sync("export the orders")
    assert first.outcome == "suspended", (first.outcome, first.error, first.output)
    (asked,) = first.pending
    assert (asked.call_id, asked.tool, asked.args, asked.kind) == (
        "b1/x1",
        "worker.export",
        {"table": "orders"},
        "result",
    )
    assert "exporting orders" in asked.detail
    done = runner.resume_sync(first, {"b1/x1": {"rows": 42}})
    assert done.outcome == "final", (done.outcome, done.error)
    assert done.output == "The export is done."
    answered = [p for m in done.run_state.messages for p in m.parts if getattr(p, "call_id", None) == "b1"]
    assert [a.content for a in answered] == ["Exported: 42 rows."]  # the child's answer is the call's result
    assert STARTED == ["orders"]  # the long-running tool's body ran once
    assert counted.runs == 2  # the agent_tool: once to wait, once to go on with the result
    assert (boss_model.calls, worker_model.calls) == (2, 2)  # counted inside the models: no call again
    seen = [p for m in worker_model.inner.requests[-1].messages for p in m.parts if getattr(p, "call_id", None) == "x1"]
    assert [p.content for p in seen if hasattr(p, "content")] == [{"rows": 42}]  # the child read the result as given


def test_two_levels_down_the_result_reaches_the_innermost_child() -> None:
    worker, worker_model = _worker()
    mid_model = CountingModel(ScriptedModel([[ToolCall(id="m1", name="worker", args={"task": "export"})], "Mid: ok."]))
    mid = Agent(name="mid", model=mid_model, tools=[agent_tool(worker)], limits=Limits(retry_backoff_s=0))
    boss, boss_model, _ = _boss(mid, calls="mid")
    runner = Runner(boss)
    first = runner.run_sync("go")
    assert first.outcome == "suspended", (first.outcome, first.error)
    (asked,) = first.pending
    assert (asked.tool, asked.kind) == ("mid.worker.export", "result")
    assert asked.call_id == "b1/m1/x1"
    done = runner.resume_sync(first, {"b1/m1/x1": "42 rows"})
    assert done.outcome == "final", (done.outcome, done.error)
    assert STARTED == ["orders"]
    assert (boss_model.calls, mid_model.calls, worker_model.calls) == (2, 2, 2)
    answered = [p for m in done.run_state.messages for p in m.parts if getattr(p, "call_id", None) == "b1"]
    assert [a.content for a in answered] == ["Mid: ok."]


def test_with_a_store_a_new_runner_delivers_the_result(tmp_path: Path) -> None:
    """The child's place is kept in the top run's saved state: another runner on the same store
    (a new process) delivers the result, and nothing runs twice."""
    path = tmp_path / "runs.db"
    worker, _ = _worker()
    boss, _, _ = _boss(worker)
    first = Runner(boss, store=SQLiteStore(path)).run_sync("export", run_id="t1")
    assert first.outcome == "suspended", (first.outcome, first.error)
    worker2, worker2_model = _worker(restarted=True)
    boss2, boss2_model, _ = _boss(worker2, restarted=True)
    done = Runner(boss2, store=SQLiteStore(path)).resume_sync("t1", {"b1/x1": "42 rows"})
    assert done.outcome == "final", (done.outcome, done.error)
    assert STARTED == ["orders"]
    assert (boss2_model.calls, worker2_model.calls) == (1, 1)  # each went on from its wait: its last reply only


def test_a_workflow_step_whose_agent_tool_waits_on_a_result_suspends_the_workflow() -> None:
    from loopwright.workflows import SequentialAgent

    worker, worker_model = _worker()
    boss, boss_model, _ = _boss(worker)
    runner = Runner(SequentialAgent("flow", steps=[boss]))
    first = runner.run_sync("go")
    assert first.outcome == "suspended", (first.outcome, first.error)
    (asked,) = first.pending
    assert (asked.call_id, asked.tool, asked.kind) == ("b1/x1", "worker.export", "result")
    done = runner.resume_sync(first, {"b1/x1": "42 rows"})
    assert done.outcome == "final", (done.outcome, done.error)
    assert done.output == "The export is done."
    assert STARTED == ["orders"]
    assert (boss_model.calls, worker_model.calls) == (2, 2)
