"""kill -9: a worker process running slow tools is killed at random points and resumed each time
in a new process; nothing is lost and nothing runs twice beyond the call in flight at each kill."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from loopwright.durable.checkpoint import rebuild
from loopwright.stores import SQLiteStore
from tests import ROOT

STEPS = 24  # more than 6 kills can get through (at most 3 calls each), so every kill lands
KILLS = 6


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_kill_9_at_random_points_then_resume_in_new_processes(tmp_path: Path) -> None:
    rng = random.Random(13)
    db, log = tmp_path / "runs.db", tmp_path / "executions.log"
    env = {**os.environ, "LOOPWRIGHT_TEST_LOG": str(log), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.store_worker", str(db), "r1", str(STEPS)]
    kills = 0
    while True:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if kills < KILLS:  # let it do one or two calls, then kill it somewhere in the next one
            target = _lines(log) + rng.randint(1, 2)
            while worker.poll() is None and _lines(log) < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.06))
            if worker.poll() is None:
                worker.kill()  # SIGKILL: no clean-up, no finally blocks
                worker.wait()
                kills += 1
                continue
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
        assert out.decode().strip() == "final"
        break
    executed = Counter(line.split("\t")[0] for line in log.read_text().splitlines())
    keys = {tuple(line.split("\t")) for line in log.read_text().splitlines()}
    duplicates = sum(executed.values()) - len(executed)
    print(f"\nkill -9: 1 run, {kills} kills, {sum(executed.values())} executions, {duplicates} duplicates")
    assert kills == KILLS
    assert set(executed) == {f"s{s}c0" for s in range(STEPS)}  # nothing lost
    assert duplicates <= kills  # at most the one call in flight at each kill ran again
    assert len(keys) == len(executed)  # a call that ran twice had the same idempotency key both times
    store = SQLiteStore(db)
    saved = asyncio.run(store.load("r1"))
    assert saved is not None and saved.outcome == "final"
    rs = rebuild(saved)
    answers = Counter(p.call_id for m in rs.messages for p in m.parts if getattr(p, "type", "") == "tool_result")
    assert set(answers.values()) == {1} and len(answers) == STEPS  # each call answered exactly once
