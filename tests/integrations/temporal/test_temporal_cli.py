"""``loopwright worker --temporal`` and ``loopwright run --temporal`` as a user runs them: subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from loopwright import Runner
from tests import ROOT
from tests.integrations.temporal import app

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

CLI = [sys.executable, "-c", "from loopwright.cli import main; raise SystemExit(main())"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_cli_worker_serves_a_cli_run(temporal: str, tmp_path: Path) -> None:
    queue = f"cli-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "worker.log"
    address = ["--temporal", temporal, "--task-queue", queue]
    worker = subprocess.Popen(
        [*CLI, "worker", *address, "tests.integrations.temporal.app:plain"],
        cwd=ROOT,
        env=ENV,
        stdout=out.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while "loopwright worker" not in out.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.05)
        run_id = uuid.uuid4().hex[:12]
        ran = subprocess.run(
            [*CLI, "run", *address, "tests.integrations.temporal.app:plain", "go", "--run-id", run_id, "--json"],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        said = json.loads(ran.stdout)
        reference = Runner(app.three("plain")).run_sync("go")
        assert said["outcome"] == "final" and said["run_id"] == run_id
        assert said["trace"] == reference.trace and said["output"] == "all done"
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert worker.returncode == 0, out.read_text()  # SIGTERM: a clean stop


def test_a_worker_for_something_not_an_agent_says_so(temporal: str) -> None:
    ran = subprocess.run(
        [*CLI, "worker", "--temporal", temporal, "tests.integrations.temporal.app:nothing_here"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2 and "nothing_here" in ran.stderr, ran.stderr


def _page_events(page: str) -> list[dict[str, object]]:
    """The events a trace page holds (its ``lw-events`` script's JSON)."""
    import re

    found = re.search(r'<script type="application/json" id="lw-events">(.*?)</script>', page, re.S)
    assert found is not None, page[:500]
    events: list[dict[str, object]] = json.loads(found.group(1))
    return events


def test_loopwright_trace_draws_a_run_on_temporal_by_its_id_ended_or_suspended(temporal: str, tmp_path: Path) -> None:
    import asyncio

    from temporalio.client import Client

    from loopwright.integrations.temporal import TemporalRunner

    ended_id, waiting_id = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]

    def trace(run_id: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        out = tmp_path / f"{run_id}.html"
        drawn = subprocess.run(
            [*CLI, "trace", run_id, "--temporal", temporal, "-o", str(out), *extra],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return drawn, out

    async def main() -> tuple[Any, ...]:
        client = await Client.connect(temporal)
        queue = f"trace-{uuid.uuid4().hex[:8]}"  # (Temporal: one worker of a process per task queue)
        plain = TemporalRunner(app.three("plain"), client=client, task_queue=queue)
        payer = TemporalRunner(app.payer(), client=client, task_queue=f"{queue}-pay")
        async with plain.worker(), payer.worker():
            ended = await plain.run("go", run_id=ended_id)
            waiting = await payer.run("pay", run_id=waiting_id)
            drawn_waiting = await asyncio.to_thread(trace, waiting_id)  # (a query: the worker answers it)
        drawn_ended = await asyncio.to_thread(trace, ended_id, "--agent", "tests.integrations.temporal.app:plain")
        return ended, waiting, drawn_ended, drawn_waiting  # (the ended one, drawn with no worker running)

    ended, waiting, (drawn, page), (drawn_w, page_w) = asyncio.run(main())
    assert drawn.returncode == 0, drawn.stderr
    assert f"run {ended_id}: final" in drawn.stdout
    html = page.read_text()
    assert ended_id in html and "lw-taken" in html
    assert [e["type"] for e in _page_events(html)] == [e.type for e in ended.events]
    assert drawn_w.returncode == 0, drawn_w.stderr
    assert "suspended" in drawn_w.stdout
    assert [e["type"] for e in _page_events(page_w.read_text())] == [e.type for e in waiting.events]

    unknown, _ = trace("nobody-ran-this")
    assert unknown.returncode == 2 and "Temporal knows no run 'nobody-ran-this'" in unknown.stderr, unknown.stderr


def test_loopwright_trace_of_a_workflow_agent_on_temporal_draws_its_children_from_the_workers_store(
    temporal: str, tmp_path: Path
) -> None:
    import asyncio

    from temporalio.client import Client

    from loopwright.integrations.temporal import TemporalRunner
    from loopwright.stores import open_store

    run_id = uuid.uuid4().hex[:12]
    url = f"sqlite:///{tmp_path / 'children.sqlite'}"

    async def main() -> Any:
        store = await open_store(url)
        runner = TemporalRunner(
            app.pipeline(), client=await Client.connect(temporal), task_queue=f"q-{run_id}", store=store
        )
        async with runner.worker():
            result = await runner.run("go", run_id=run_id)
        await store.close()
        return result

    result = asyncio.run(main())
    assert result.outcome == "final"
    out = tmp_path / "pipeline.html"
    target = "tests.integrations.temporal.app:pipeline_agent"
    drawn = subprocess.run(
        [*CLI, "trace", run_id, "--temporal", temporal, "--agent", target, "--store", url, "-o", str(out)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert drawn.returncode == 0, drawn.stderr
    import re

    found = re.findall(r'data-key="([^"]+)"><span>[^<]*</span>(.*?)</div>', out.read_text())
    cells = {key: re.sub(r"<[^>]+>", "", value) for key, value in found}
    assert cells.get("child runs") == "5", cells  # first, branches, left, right, last: all drawn, all answered
