"""Temporal runs of loop and map agents (budgets counted across the tree, as on ``Runner``), a
suspension nobody resumes within ``wait_timeout_s``, and two agents of one name in one process."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, ConfigurationError, Runner, RunResult, approve

if not os.environ.get("CI"):
    pytest.importorskip("temporalio", reason="pip install -e '.[dev]' for the Temporal tests")

from temporalio.client import Client

from loopwright.integrations.temporal import TemporalRunner
from tests.integrations.temporal import app
from tests.store_app import by_turn

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _id() -> str:
    return uuid.uuid4().hex[:12]


def _on_worker(target: str, agent: Any, input: str, **options: Any) -> RunResult:
    async def main() -> RunResult:
        runner = TemporalRunner(agent, client=await Client.connect(target), task_queue=f"q-{_id()}")
        async with runner.worker():
            return await runner.run(input, run_id=_id(), **options)

    return asyncio.run(main())


def _labels(log: Path) -> list[str]:
    return [line.split("\t")[0] for line in log.read_text().splitlines()] if log.exists() else []


def _same_as_runner(result: RunResult, reference: RunResult) -> None:
    assert result.outcome == reference.outcome
    assert result.trace == reference.trace
    assert result.output == reference.output
    assert result.limit == reference.limit
    assert result.tool_calls == reference.tool_calls
    assert result.usage == reference.usage
    assert result.state == reference.state


def test_a_loop_agent_runs_on_temporal_as_on_runner_its_tree_budget_stopping_it(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("LOOPWRIGHT_TEST_LOG", str(log))
    result = _on_worker(temporal, app.looped(), "go")
    on_temporal = _labels(log)
    log.unlink()
    reference = Runner(app.looped()).run_sync("go")
    _same_as_runner(result, reference)
    assert reference.tool_calls == 2 and on_temporal == _labels(log) == ["round", "round"]  # the tree's budget


def test_a_map_agent_runs_on_temporal_as_on_runner_its_tree_budget_stopping_it(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("LOOPWRIGHT_TEST_LOG", str(log))
    items = {"items": ["a", "b", "c"]}
    result = _on_worker(temporal, app.mapped(), "go", state=items)
    on_temporal = _labels(log)
    log.unlink()
    reference = Runner(app.mapped()).run_sync("go", state=items)
    _same_as_runner(result, reference)
    assert reference.tool_calls == 2 and on_temporal == _labels(log) == ["item", "item"]  # the tree's budget


def test_a_suspension_nobody_resumes_within_wait_timeout_goes_on_its_calls_denied_timed_out(
    temporal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopwright import ResumeError
    from loopwright.durable.codec import run_result_from_json

    log = tmp_path / "calls.log"
    monkeypatch.setenv("LOOPWRIGHT_TEST_LOG", str(log))
    run_id = _id()

    async def main() -> tuple[RunResult, RunResult, str]:
        runner = TemporalRunner(app.timing_out(), client=await Client.connect(temporal), task_queue=f"q-{_id()}")
        async with runner.worker():
            suspended = await runner.run("pay", run_id=run_id)
            ended = run_result_from_json(await runner.client.get_workflow_handle(run_id).result())
            with pytest.raises(ResumeError) as late:
                await runner.resume(run_id, {"p1": approve()})
            return suspended, ended, str(late.value)

    suspended, ended, late = asyncio.run(main())
    assert suspended.outcome == "suspended"
    assert ended.outcome == "final" and ended.output == "paid"
    assert _labels(log) == []  # denied: the payment never ran
    answered = [e for e in ended.events if e.type == "tool_answered"]
    assert len(answered) == 1 and answered[0].is_error and "timed out" in str(answered[0].content)
    resumed = [e for e in ended.events if e.type == "resumed"]
    assert len(resumed) == 1 and resumed[0].timed_out
    assert "not waiting" in late or "completed" in late, late


def _twin(reply: str) -> Agent:
    return Agent(name="twin", model=by_turn([reply]), limits=app.LIMITS)


def test_two_runners_for_one_agent_name_on_two_queues_each_run_their_own_agent(temporal: str) -> None:
    async def main() -> tuple[RunResult, RunResult]:
        client = await Client.connect(temporal)
        old = TemporalRunner(_twin("from the old machine"), client=client, task_queue=f"old-{_id()}")
        new = TemporalRunner(_twin("from the new machine"), client=client, task_queue=f"new-{_id()}")
        async with old.worker(), new.worker():
            return await old.run("hi", run_id=_id()), await new.run("hi", run_id=_id())

    on_old, on_new = asyncio.run(main())
    assert on_old.output == "from the old machine"
    assert on_new.output == "from the new machine"


def test_a_second_runner_for_one_agent_name_on_one_queue_is_refused_naming_the_clash(temporal: str) -> None:
    async def main() -> str:
        client = await Client.connect(temporal)
        queue = f"q-{_id()}"
        first = TemporalRunner(_twin("first"), client=client, task_queue=queue)
        second = TemporalRunner(_twin("second"), client=client, task_queue=queue)
        async with first.worker():
            with pytest.raises(ConfigurationError) as clash:
                second.worker()
            assert (await first.run("hi", run_id=_id())).output == "first"
        async with second.worker():  # the first one's worker stopped: the name is free on the queue
            assert (await second.run("hi", run_id=_id())).output == "second"
        return str(clash.value)

    said = asyncio.run(main())
    assert "two TemporalRunners for agent 'twin'" in said and "task_queue=" in said, said
