"""Scale-out on DBOS: 200 runs enqueued, worker processes, one SIGKILLed mid-way. Every run ends
exactly once, no tool call is lost, and none runs twice beyond the step in flight at the kill.
PostgreSQL: two workers, the survivor takes over the dead one's runs. SQLite: one worker, killed
and restarted with the same executor id (DBOS recovers its runs at launch)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest

from tests import ROOT

if not os.environ.get("CI"):  # under CI the DBOS tests must run (.ci/run installs the extra)
    pytest.importorskip("dbos", reason="pip install -e '.[dbos]' to run the DBOS tests")

from loopwright import approve
from loopwright.integrations import dbos as lw
from tests.dbos_app import SLOW_S, STEPS

pytestmark = [pytest.mark.dbos, pytest.mark.slow]


RUNS = 200
CONCURRENCY = 16


class Worker:
    """``loopwright worker`` in a subprocess; its stdout lines are kept with their times."""

    def __init__(self, db: str, log: Path, executor_id: str | None = None, queue: str | None = None) -> None:
        command = [sys.executable, "-c", "from loopwright.cli import main; raise SystemExit(main())", "worker"]
        command += ["--db", db, "--app", "tests.dbos_app", "--concurrency", str(CONCURRENCY)]
        if executor_id:
            command += ["--executor-id", executor_id]
        if queue:
            command += ["--queue", queue]
        env = {**os.environ, "LOOPWRIGHT_TEST_LOG": str(log), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip()))

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith("loopwright worker ") for _, line in self.lines):
            said = "\n".join(text for _, text in self.lines)
            assert self.proc.poll() is None, said
            assert time.monotonic() < deadline, "the worker did not start:\n" + said
            time.sleep(0.05)

    def first(self, prefix: str) -> float | None:
        return next((t for t, line in self.lines if line.startswith(prefix)), None)

    def kill(self) -> float:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return time.monotonic()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _executions(log: Path) -> list[str]:
    """The idempotency keys of the tool executions, one per execution."""
    return [line.split("\t")[1] for line in log.read_text().splitlines()] if log.exists() else []


def _wait_done(client: lw.Client, run_ids: list[str], timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    inner: Any = client._client
    while time.monotonic() < deadline:
        done = inner.list_workflows(status=["SUCCESS", "ERROR"], load_input=False, load_output=False)
        if len(done) >= len(run_ids):
            return time.monotonic()
        time.sleep(0.1)
    raise AssertionError(f"not all runs finished in {timeout_s}s")


def _check(client: lw.Client, run_ids: list[str], log: Path) -> tuple[int, int]:
    """Every run ended once, in ``final``, each call answered once; (executions, duplicates)."""
    expected = {f"{run_id}:s{s}c0" for run_id in run_ids for s in range(STEPS)}
    executed = Counter(_executions(log))
    assert set(executed) == expected  # no tool call lost (and none invented)
    inner: Any = client._client  # every run's status and output in one query
    ended = inner.list_workflows(workflow_ids=run_ids, load_input=False, load_output=True)
    assert sorted(wf.workflow_id for wf in ended) == sorted(run_ids)
    for wf in ended:
        assert str(wf.status).rpartition(".")[2] == "SUCCESS", (wf.workflow_id, wf.status, wf.error)
        result = lw.result_from_json(wf.output)
        assert result.outcome == "final", (wf.workflow_id, result.outcome, result.error)
        answers = Counter(
            p.call_id for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"
        )
        assert set(answers.values()) == {1} and len(answers) == STEPS
    total = sum(executed.values())
    return total, total - len(executed)


def _scenario(db: str, tmp_path: Path, *, restart: bool, runs: int = RUNS) -> None:
    log = tmp_path / "executions.log"
    first = Worker(db, log, executor_id="w1" if restart else None)
    others = [] if restart else [Worker(db, log)]  # (both start at once)
    for w in [first, *others]:
        w.wait_ready()
    client = lw.Client(db)
    workers = [first, *others]
    try:
        run_ids = [f"run-{i}-{uuid.uuid4().hex[:6]}" for i in range(runs)]
        started = time.monotonic()
        for run_id in run_ids:
            client.enqueue("durable", "go", run_id=run_id)
        while len(_executions(log)) < runs * STEPS // 3:  # a third of the work done: kill a worker mid-way
            assert first.proc.poll() is None
            time.sleep(0.01)
        killed_at = first.kill()
        at_kill = len(_executions(log))
        if restart:
            first = Worker(db, log, executor_id="w1")
            workers.append(first)
        done = _wait_done(client, run_ids, timeout_s=240)
        recovered = first.first("loopwright worker ") if restart else others[0].first("recovered the runs of")
        assert recovered is not None, "no worker recovered the killed worker's runs"
        checking = time.monotonic()
        executions, duplicates = _check(client, run_ids, log)
        checked = time.monotonic() - checking
        kind = "SQLite, killed + restarted" if restart else "PostgreSQL, 2 workers, 1 killed"
        print(
            f"\nDBOS {kind}: {runs} runs x {STEPS} tool calls, worker concurrency {CONCURRENCY}: "
            f"{runs / (done - started):.1f} runs/s ({done - started:.2f}s), kill after {at_kill} executions, "
            f"recovery started {recovered - killed_at:.2f}s after the kill, {executions} executions, "
            f"{duplicates} duplicates (checked in {checked:.1f}s)"
        )
        assert duplicates <= CONCURRENCY  # at most the calls in flight at the kill ran again
    finally:
        client.close()
        for w in workers:
            w.stop()


def test_dbos_postgres_two_workers_one_killed(pg_url: str, tmp_path: Path) -> None:
    _scenario(pg_url, tmp_path, restart=False)


def test_dbos_sqlite_worker_killed_and_restarted(tmp_path: Path) -> None:
    _scenario(f"sqlite:///{tmp_path / 'dbos.sqlite'}", tmp_path, restart=True)


def test_dbos_suspended_run_resumes_on_another_worker_after_its_worker_dies(pg_url: str, tmp_path: Path) -> None:
    """A run waits for approval on one worker; that worker is SIGKILLed; the decision is sent; the
    other worker takes the run over and pays exactly once."""
    log = tmp_path / "executions.log"
    workers = [Worker(pg_url, log), Worker(pg_url, log)]
    for w in workers:
        w.wait_ready()
    client = lw.Client(pg_url)
    try:
        client.enqueue("payer", "pay", run_id="wait-1")
        deadline = time.monotonic() + 60
        while (status := client.status("wait-1")) is None or status.get("outcome") != "suspended":
            assert time.monotonic() < deadline, "the run never suspended"
            time.sleep(0.05)
        inner: Any = client._client
        holder = inner.retrieve_workflow("wait-1").get_status().executor_id
        ids = {
            w: next(line.split()[2].rstrip(":") for _, line in w.lines if line.startswith("loopwright worker "))
            for w in workers
        }
        (holding,) = [w for w in workers if ids[w] == holder]
        (other,) = [w for w in workers if w is not holding]
        holding.kill()
        client.decide("wait-1", {"p1": approve()})
        result = client.result("wait-1")
        assert result.outcome == "final" and result.output == "paid"
        assert [line.split("\t")[0] for line in log.read_text().splitlines()] == ["pay 500"]
        assert other.first("recovered the runs of") is not None
        assert inner.retrieve_workflow("wait-1").get_status().executor_id == ids[other]
    finally:
        client.close()
        for w in workers:
            w.stop()


def _event_keys(db: str, run_id: str) -> list[str]:
    """The DBOS event keys a run has set (read from the SQLite system database)."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        return [key for (key,) in conn.execute("SELECT key FROM workflow_events WHERE workflow_uuid = ?", (run_id,))]


def test_dbos_worker_killed_mid_act_reruns_only_the_calls_that_had_not_finished(tmp_path: Path) -> None:
    """An act stage of three calls: two finish, the third is in flight when the worker is
    SIGKILLed. Restarted, the worker answers the two from their recorded results and runs only
    the third again; the run ends once, each call answered once."""
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    log = tmp_path / "executions.log"
    worker = Worker(db, log, executor_id="w1")
    worker.wait_ready()
    client = lw.Client(db)
    workers = [worker]
    try:
        client.enqueue("mixed", "go", run_id="mid-act")
        deadline = time.monotonic() + 60
        while sum(key.endswith(("c-quick-a", "c-quick-b")) for key in _event_keys(db, "mid-act")) < 2:
            assert time.monotonic() < deadline, f"the quick calls' results were never recorded: {_executions(log)}"
            time.sleep(0.02)
        assert "slow" in [line.split("\t")[0] for line in log.read_text().splitlines()]  # in flight
        worker.kill()
        worker = Worker(db, log, executor_id="w1")  # DBOS recovers its workflows at launch
        workers.append(worker)
        result = client.result("mid-act")
        assert result.outcome == "final" and result.output == "done"
        labels = Counter(line.split("\t")[0] for line in log.read_text().splitlines())
        assert labels == {"quick-a": 1, "quick-b": 1, "slow": 2}
        answers = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
        assert sorted(a.call_id for a in answers) == ["c-quick-a", "c-quick-b", "c-slow"]
        assert all(not a.is_error for a in answers), answers
        assert SLOW_S > 0
    finally:
        client.close()
        for w in workers:
            w.stop()


def test_dbos_run_cancelled_while_queued_ends_cancelled_without_running(tmp_path: Path) -> None:
    """``Client.cancel`` of a run no worker has taken yet: the worker that takes it ends it
    ``cancelled`` at its first step; no tool runs."""
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    log = tmp_path / "executions.log"
    workers = [Worker(db, log)]  # on another queue; its launch makes DBOS's tables
    workers[0].wait_ready()
    client = lw.Client(db)
    try:
        client.enqueue("durable", "go", run_id="queued-1", queue="later")
        assert client.state("queued-1").rpartition(".")[2] == "ENQUEUED"
        assert client.cancel("queued-1") is True
        workers.append(Worker(db, log, queue="later"))
        result = client.result("queued-1")
        assert result.outcome == "cancelled" and result.trace == ["start", "preprocess", "cancelled"]
        assert _executions(log) == []
    finally:
        client.close()
        for w in workers:
            w.stop()


def test_dbos_cancel_on_postgres_interrupts_a_run_on_a_worker(pg_url: str, tmp_path: Path) -> None:
    """``Client.cancel`` from another process, PostgreSQL: the worker interrupts the minute-long
    call of the run it holds; the run ends ``cancelled``, the call answered."""
    log = tmp_path / "executions.log"
    worker = Worker(pg_url, log)
    worker.wait_ready()
    client = lw.Client(pg_url)
    try:
        client.enqueue("stuck", "go", run_id="stuck-1")
        deadline = time.monotonic() + 60
        while not _executions(log):
            assert time.monotonic() < deadline, "the run's call never started"
            time.sleep(0.05)
        started = time.monotonic()
        assert client.cancel("stuck-1") is True
        result = client.result("stuck-1")
        assert time.monotonic() - started < 30  # not the call's 60 s
        assert result.outcome == "cancelled" and result.trace[-2:] == ["act", "cancelled"]
        answers = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
        assert [(a.call_id, a.content) for a in answers] == [
            ("c-stuck", "tool 'work' did not finish: the run was cancelled")
        ]
        assert client.cancel("stuck-1") is False
    finally:
        client.close()
        worker.stop()
