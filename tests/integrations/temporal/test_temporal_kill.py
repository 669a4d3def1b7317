"""Worker crashes on Temporal: ``loopwright worker --temporal`` in a subprocess, SIGKILLed while a
call is in flight, another started; the run ends as ``Runner.run`` ends it, and no call that had
finished runs again (the one in flight at the kill may: activities are at least once)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loopwright import Runner, RunResult
from tests import ROOT

if not os.environ.get("CI"):
    pytest.importorskip("temporalio", reason="pip install -e '.[dev]' for the Temporal tests")

from temporalio.client import Client

from loopwright.integrations.temporal import TemporalRunner
from tests.integrations.temporal import app

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


class Worker:
    """``loopwright worker --temporal`` in a subprocess."""

    def __init__(self, target: str, queue: str, agent: str, env: dict[str, str], *extra: str) -> None:
        command = [sys.executable, "-c", "from loopwright.cli import main; raise SystemExit(main())", "worker"]
        command += ["--temporal", target, "--task-queue", queue, "--heartbeat", "1", "--sticky-timeout", "1"]
        command += [*extra, f"tests.integrations.temporal.app:{agent}"]
        self.out = Path(env["LOOPWRIGHT_TEST_GATE"]) / f"worker-{uuid.uuid4().hex[:6]}.log"
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            stdout=self.out.open("wb"),
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _wait_for(path: Path, worker: Worker, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert worker.proc.poll() is None, worker.out.read_text(errors="replace")
        assert time.monotonic() < deadline, f"no {path.name} after {timeout_s}s:\n" + worker.out.read_text()
        time.sleep(0.05)


async def _kept(handle: Any, client: Client, count: int) -> None:
    """Until the server holds a heartbeat of the stage in flight with ``count`` kept results."""
    while True:
        described = await handle.describe()
        for pending in described.raw_description.pending_activities:
            if pending.heartbeat_details.payloads:
                (kept,) = await client.data_converter.decode(pending.heartbeat_details.payloads)
                if len(kept) >= count:
                    return
        await asyncio.sleep(0.05)


def _killed_and_replaced(
    temporal: str,
    tmp_path: Path,
    agent_name: str,
    agent: Any,
    hold: str,
    *extra: str,
    kept: int = 0,
    spans: Path | None = None,
) -> tuple[RunResult, Counter[str]]:
    """Start a run of ``agent`` on a worker subprocess; kill it (-9) while the call ``hold``
    waits (and the server holds ``kept`` results of the stage in flight); start another; the
    run's result and how many times each call ran."""
    gate = tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "calls.log"
    env = {"LOOPWRIGHT_TEST_LOG": str(log), "LOOPWRIGHT_TEST_GATE": str(gate)}
    if spans is not None:  # the workers trace their runs into this file (app.py)
        env["LOOPWRIGHT_TEST_SPANS"] = str(spans)
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    run_id = uuid.uuid4().hex[:12]
    first = Worker(temporal, queue, agent_name, env, *extra)
    second: Worker | None = None
    try:

        async def main() -> RunResult:
            nonlocal second
            client = await Client.connect(temporal)
            runner = TemporalRunner(agent, client=client, task_queue=queue)
            await runner.start("go", run_id=run_id)
            await asyncio.to_thread(_wait_for, gate / f"at-{hold}", first)
            if kept:
                await asyncio.wait_for(_kept(client.get_workflow_handle(run_id), client, kept), 60)
            first.kill()
            (gate / "go").write_text("")
            second = Worker(temporal, queue, agent_name, env, *extra)
            return await asyncio.wait_for(runner.result(run_id), 120)

        result = asyncio.run(main())
    finally:
        first.stop()
        if second is not None:
            second.stop()
    ran = Counter(line.split("\t")[0] for line in log.read_text().splitlines())
    return result, ran


def test_a_worker_killed_after_the_first_call_is_replaced_and_no_finished_call_runs_again(
    temporal: str, tmp_path: Path
) -> None:
    result, ran = _killed_and_replaced(temporal, tmp_path, "killable", app.killable, "hold-second")
    reference = Runner(app.three("killable", "first", "second", "third")).run_sync("go")
    assert result.outcome == reference.outcome == "final"
    assert result.trace == reference.trace and result.output == reference.output
    assert ran["first"] == 1 and ran["third"] == 1  # finished before the kill / after it: once
    assert 1 <= ran["hold-second"] <= 2  # in flight at the kill: at least once


def test_a_workflow_agent_with_a_parallel_branch_survives_a_worker_kill(temporal: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'children.sqlite'}"
    result, ran = _killed_and_replaced(
        temporal, tmp_path, "pipeline_agent", app.pipeline_agent, "hold-right", "--store", store
    )
    reference = Runner(app.pipeline()).run_sync("go")
    assert result.outcome == reference.outcome == "final"
    assert result.trace == reference.trace and result.output == reference.output
    assert result.usage == reference.usage  # budgets counted across the tree, as on Runner
    assert ran["first"] == 1 and ran["left"] == 1 and ran["last"] == 1
    assert 1 <= ran["hold-right"] <= 2


def test_calls_that_completed_in_the_stage_in_flight_are_not_run_again(temporal: str, tmp_path: Path) -> None:
    result, ran = _killed_and_replaced(temporal, tmp_path, "mixed", app.mixed, "hold-c", kept=2)
    reference = Runner(app.mixed_agent()).run_sync("go")
    assert result.outcome == reference.outcome == "final"
    assert result.trace == reference.trace and result.messages == reference.messages
    assert ran["quick-a"] == 1 and ran["quick-b"] == 1  # kept by the heartbeat, answered from it
    assert 1 <= ran["hold-c"] <= 2


def test_a_run_whose_worker_is_killed_and_replaced_is_traced_once_as_on_runner(temporal: str, tmp_path: Path) -> None:
    from tests.integrations.otel.test_otel import tree
    from tests.integrations.temporal.test_temporal_otel import _runner_spans

    spans = tmp_path / "spans.jsonl"
    result, ran = _killed_and_replaced(temporal, tmp_path, "killable", app.killable, "hold-second", spans=spans)
    assert result.outcome == "final" and ran["first"] == 1
    said = [json.loads(line) for line in spans.read_text().splitlines()] if spans.exists() else []
    by_parent: dict[Any, list[dict[str, Any]]] = {}
    for span in said:
        by_parent.setdefault(span["parent"], []).append(span)

    def walk(parent: Any, depth: int) -> list[tuple[int, str]]:
        return [(depth, s["name"]) for s in by_parent.get(parent, [])] + [
            found for s in by_parent.get(parent, []) for found in walk(s["id"], depth + 1)
        ]

    reference = tree(_runner_spans(app.three("killable", "first", "second", "third"), "go"))
    assert sorted(walk(None, 0)) == sorted(reference)  # each span once, the run's tree
    assert len({s["pid"] for s in said}) == 1  # all from the worker that ended it: the killed one sent none
