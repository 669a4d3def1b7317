"""``loopwright worker --temporal`` and ``loopwright run --temporal`` as a user runs them: subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

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
