"""kill -9 inside a parallel branch of a workflow (and inside step 3 of its sequence), resumed in a
new process from SQLite and from PostgreSQL: finished steps and branches are not run again and
the approved call runs once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests import ROOT


def _worker(url: str, log: Path, *extra: str, crash_in: str = "pay") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPWRIGHT_TEST_LOG": str(log), "PYTHONPATH": str(ROOT), "LOOPWRIGHT_CRASH_IN": crash_in}
    command = [sys.executable, "-m", "tests.workflow_worker", url, "w1", *extra]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _kill_and_resume(url: str, tmp_path: Path, crash_in: str = "pay") -> None:
    log = tmp_path / "executions.log"
    first = _worker(url, log, crash_in=crash_in)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("suspended"), first.stdout  # the pay branch waits for a person
    second = _worker(url, log, "approve", crash_in=crash_in)
    assert second.returncode == -9, (second.returncode, second.stdout, second.stderr)  # killed inside the branch
    third = _worker(url, log, crash_in=crash_in)
    assert third.returncode == 0, third.stderr
    assert third.stdout.strip() == "final 'all done'", third.stdout
    ran = Counter(log.read_text().splitlines())
    assert ran == {
        "lookup refunds": 1,  # step 1 finished before the kill: not run again
        "lookup notes": 1,  # the other branch finished before the kill: not run again
        "refund A1": 1,  # the approved call ran once
        "crash": 2,  # the call in flight at the kill runs again (its idempotency key is the same)
        "lookup summary": 1,
    }


@pytest.mark.slow
def test_kill_9_inside_a_parallel_branch_resumes_there_with_sqlite(tmp_path: Path) -> None:
    _kill_and_resume(str(tmp_path / "runs.db"), tmp_path)


@pytest.mark.slow
def test_kill_9_inside_a_parallel_branch_resumes_there_with_postgres(tmp_path: Path, pg_url: str) -> None:
    _kill_and_resume(pg_url, tmp_path)


@pytest.mark.slow
def test_kill_9_inside_step_3_of_a_sequence_resumes_there_with_sqlite(tmp_path: Path) -> None:
    _kill_and_resume(str(tmp_path / "runs.db"), tmp_path, crash_in="summary")
