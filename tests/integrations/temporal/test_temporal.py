"""Runs as Temporal workflows on a real dev server: the loop is the workflow, each stage's work an
activity; the same RunResult as ``Runner.run``, approvals resumed once, replay checked."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from loopwright import Runner, RunResult, approve
from loopwright.extend import Extension, Rule

if not os.environ.get("CI"):
    pytest.importorskip("temporalio", reason="pip install -e '.[dev]' for the Temporal tests")

from temporalio.client import Client

from loopwright.integrations.temporal import ReplayDivergence, TemporalRunner
from tests.integrations.temporal import app

pytestmark = [pytest.mark.temporal, pytest.mark.slow]  # (a dev server: out of the fast subset)


def _id() -> str:
    return uuid.uuid4().hex[:12]


def on_worker(target: str, agent: Any, body: Callable[[TemporalRunner], Awaitable[Any]], **options: Any) -> Any:
    """``body(runner)`` with a worker of ``agent`` running in this process, on its own task queue."""

    async def main() -> Any:
        client = await Client.connect(target)
        runner = TemporalRunner(agent, client=client, task_queue=f"q-{_id()}", **options)
        async with runner.worker():
            return await body(runner)

    return asyncio.run(main())


def _log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("LOOPWRIGHT_TEST_LOG", str(log))
    return log


def _labels(log: Path) -> list[str]:
    return [line.split("\t")[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_a_three_call_run_ends_as_runner_run_does(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path, monkeypatch)
    run_id = _id()

    async def body(runner: TemporalRunner) -> RunResult:
        return await runner.run("go", run_id=run_id)

    result = on_worker(temporal, app.three(), body)
    on_temporal = _labels(log)
    reference = Runner(app.three()).run_sync("go", run_id=run_id)
    assert result.outcome == reference.outcome == "final"
    assert result.output == reference.output == "all done"
    assert result.trace == reference.trace
    assert result.messages == reference.messages
    assert [e.type for e in result.events] == [e.type for e in reference.events]
    assert on_temporal == ["a", "b", "c"]  # each call ran once
    assert {line.split("\t")[1] for line in log.read_text().splitlines()} == {f"{run_id}:c{i}" for i in range(3)}


def test_an_approval_suspends_and_a_resume_runs_the_call_once(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopwright import ResumeError

    log = _log(tmp_path, monkeypatch)
    run_id = _id()

    async def body(runner: TemporalRunner) -> tuple[RunResult, dict[str, Any], RunResult, str]:
        suspended = await runner.run("pay", run_id=run_id)
        state = await runner.state(run_id)
        done = await runner.resume(run_id, {"p1": approve()})
        with pytest.raises(ResumeError) as refused:
            await runner.resume(run_id, {"p1": approve()})
        return suspended, state, done, str(refused.value)

    suspended, state, done, refused = on_worker(temporal, app.payer(), body)
    assert suspended.outcome == "suspended" and [p.call_id for p in suspended.pending] == ["p1"]
    assert state["stopped"] and state["stage"] == suspended.run_state.stage and state["pending"][0]["call_id"] == "p1"
    assert _labels(log) == ["pay 500"]
    assert done.outcome == "final" and done.output == "paid"
    assert "not waiting" in refused or "completed" in refused


def _always(rs: Any) -> bool:
    return True


SKIP_ACT = Extension(
    name="skip_act",
    rows_before={("postprocess", "act"): [Rule("postprocess", "decide", "_always")]},
    guards={"_always": _always},
)
"""A row added to the machine: after postprocess, straight to decide (the recorded run went to act)."""


def test_replay_of_a_recorded_history_passes_and_fails_by_name_after_a_row_is_added(temporal: str) -> None:
    run_id = _id()

    async def body(runner: TemporalRunner) -> tuple[RunResult, Any]:
        result = await runner.run("go", run_id=run_id)
        await runner.replay(run_id)  # the current code replays its own history
        return result, await runner.client.get_workflow_handle(run_id).fetch_history()

    result, history = on_worker(temporal, app.three("replayed"), body)
    assert result.outcome == "final"

    async def changed() -> str:
        agent = app.three("replayed").replace(extensions=[SKIP_ACT])
        runner = TemporalRunner(agent, client=await Client.connect(temporal), unverified=True)
        await runner.replay_history(history)  # the same history, unchanged code: passes
        return "replayed"

    with pytest.raises(ReplayDivergence) as diverged:
        asyncio.run(changed())
    said = str(diverged.value)
    assert run_id in said and "the recorded run went to state 'act'" in said, said


def _gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("LOOPWRIGHT_TEST_GATE", str(gate))
    return gate


async def _at(path: Path) -> None:
    while not await asyncio.to_thread(path.exists):  # noqa: ASYNC110 (the tool writes it: a gate, not a timing)
        await asyncio.sleep(0.02)


def test_cancel_ends_the_run_cancelled_with_its_result(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gated(tmp_path, monkeypatch)
    log = _log(tmp_path, monkeypatch)
    run_id = _id()

    async def body(runner: TemporalRunner) -> tuple[dict[str, Any], RunResult]:
        await runner.start("go", run_id=run_id)
        await _at(gate / "at-hold-x")
        state = await runner.state(run_id)
        await runner.cancel(run_id)
        return state, await runner.result(run_id)

    state, result = on_worker(temporal, app.three("cancelled", "first", "hold-x", "third"), body)
    assert state["stage"] == "act" and not state["stopped"]  # the query: its place in the machine
    assert result.outcome == "cancelled" and result.trace[-1] == "cancelled"
    assert _labels(log) == ["first", "hold-x"]


def test_pause_stops_the_run_between_stages_and_resume_goes_on(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gated(tmp_path, monkeypatch)
    run_id = _id()

    async def body(runner: TemporalRunner) -> tuple[RunResult, dict[str, Any], RunResult]:
        await runner.start("go", run_id=run_id)
        await _at(gate / "at-hold-p")
        await runner.pause(run_id)
        (gate / "go").write_text("")
        paused = await runner.result(run_id)
        state = await runner.state(run_id)
        return paused, state, await runner.resume(run_id)

    paused, state, done = on_worker(temporal, app.three("pausing", "hold-p", "b", "c"), body)
    assert paused.outcome == "paused" and state["paused"] and state["stage"] == paused.run_state.stage
    assert done.outcome == "final" and done.output == "all done"
    assert done.trace == Runner(app.three("pausing", "hold-p", "b", "c")).run_sync("go").trace


def test_a_run_of_an_agent_the_worker_lacks_fails_naming_it(temporal: str) -> None:
    from temporalio.client import WorkflowFailureError

    from loopwright.integrations.temporal import WORKFLOW

    run_id = _id()

    async def body(runner: TemporalRunner) -> str:
        await runner.client.start_workflow(
            WORKFLOW, {"agent": "nobody", "input": "hi"}, id=run_id, task_queue=runner.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await runner.result(run_id)
        return str(failed.value.cause)

    said = on_worker(temporal, app.three("present"), body)
    assert "no agent named 'nobody'" in said and "present" in said, said


def test_bad_arguments_say_what_to_pass_instead() -> None:
    from loopwright import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"client= takes a temporalio.client.Client, got str"):
        TemporalRunner(app.three(), client="localhost:7233")  # type: ignore[arg-type]

    async def zero_heartbeat() -> None:
        client = await Client.connect("127.0.0.1:1", lazy=True)
        TemporalRunner(app.three(), client=client, heartbeat_s=0)

    with pytest.raises(ConfigurationError, match="heartbeat_s must be more than 0"):
        asyncio.run(zero_heartbeat())
