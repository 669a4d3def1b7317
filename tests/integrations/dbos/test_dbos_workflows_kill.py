"""kill -9 of a DBOS worker inside a workflow agent's parallel branch (and inside step 3 of its
sequence), after the branch's confirmation was approved: DBOS recovers the run, finished steps and
branches are not run again, the child in flight goes on from its checkpoint, the approved call runs
once. SQLite: the worker restarted with its executor id; PostgreSQL: the other worker takes over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests import ROOT

if not os.environ.get("CI"):  # under CI the DBOS tests must run (.ci/run installs the extra)
    pytest.importorskip("dbos", reason="pip install -e '.[dbos]' to run the DBOS tests")

from loopwright import approve
from loopwright.integrations import dbos as lw

pytestmark = [pytest.mark.dbos, pytest.mark.slow]


def _worker(db: str, log: Path, crash_in: str, executor_id: str | None = None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "from loopwright.cli import main; raise SystemExit(main())", "worker"]
    command += ["--db", db, "--app", "tests.dbos_workflows_app"]
    if executor_id is not None:
        command += ["--executor-id", executor_id]
    env = {**os.environ, "LOOPWRIGHT_TEST_LOG": str(log), "PYTHONPATH": str(ROOT), "LOOPWRIGHT_CRASH_IN": crash_in}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    said = []
    for raw in proc.stdout:  # its first line says it serves (DBOS's tables made)
        said.append(raw.decode(errors="replace"))
        if said[-1].startswith("loopwright worker "):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # (its later lines: not to block it)
            return proc
    raise AssertionError("the worker did not start:\n" + "".join(said))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _until_suspended(client: lw.Client, run_id: str, timeout_s: float = 90.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.status(run_id)
        if status is not None and status.get("outcome") == "suspended":
            return [p["call_id"] for p in status["pending"]]
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never suspended; last status: {client.status(run_id)}")


def _kill_and_recover(db: str, tmp_path: Path, crash_in: str, *, two_workers: bool) -> None:
    log = tmp_path / "executions.log"
    workers = [_worker(db, log, crash_in, executor_id=None if two_workers else "w1")]
    if two_workers:
        workers.append(_worker(db, log, crash_in))
    client = lw.Client(db)
    try:
        client.enqueue("desk", "refund order A1", run_id="desk-1")
        pending = _until_suspended(client, "desk-1")  # the pay branch waits for a person
        assert len(pending) == 1
        client.decide("desk-1", {pending[0]: approve()})
        deadline = time.monotonic() + 90
        while not any(w.poll() is not None for w in workers):  # the crash tool kills the worker that holds the run
            assert time.monotonic() < deadline, "no worker was killed"
            time.sleep(0.05)
        (killed,) = [w for w in workers if w.poll() is not None]
        assert killed.returncode == -9, killed.returncode
        if not two_workers:  # restarted with its executor id: DBOS recovers its runs at launch
            workers.append(_worker(db, log, crash_in, executor_id="w1"))
        deadline = time.monotonic() + 120
        while client.state("desk-1").rpartition(".")[2] not in ("SUCCESS", "ERROR"):
            assert time.monotonic() < deadline, f"the run did not end; status {client.status('desk-1')}"
            time.sleep(0.1)
        result = client.result("desk-1")
        assert (result.outcome, result.output) == ("final", "all done"), result.error
        assert result.trace == ["start", "research", "work", "suspended", "work", "summary", "done"]
        ran = Counter(log.read_text().splitlines())
        assert ran == {
            "lookup refunds": 1,  # step 1 finished before the kill: not run again
            "lookup notes": 1,  # the other branch finished before the kill: not run again
            "refund A1": 1,  # the approved call ran once
            "crash": 2,  # the call in flight at the kill runs again (its idempotency key is the same)
            "lookup summary": 1,
        }
    finally:
        client.close()
        for w in workers:
            _stop(w)


def test_dbos_worker_killed_inside_a_parallel_branch_recovers_there_on_sqlite(tmp_path: Path) -> None:
    _kill_and_recover(f"sqlite:///{tmp_path / 'dbos.sqlite'}", tmp_path, "pay", two_workers=False)


def test_dbos_worker_killed_inside_step_3_of_a_sequence_recovers_there_on_sqlite(tmp_path: Path) -> None:
    _kill_and_recover(f"sqlite:///{tmp_path / 'dbos.sqlite'}", tmp_path, "summary", two_workers=False)


@pytest.mark.postgres
def test_dbos_worker_killed_inside_a_parallel_branch_the_other_worker_takes_over_on_postgres(
    pg_url: str, tmp_path: Path
) -> None:
    _kill_and_recover(pg_url, tmp_path, "pay", two_workers=True)
