"""A store that cannot write (a full disk, a read-only file or database) ends the run failed with the
store's error named, keeps the run as of its last checkpoint for a later resume, and leaves no files open."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.stores import SQLiteStore
from tests import ROOT
from tests.store_app import EXECUTED, labels, make_agent
from tests.stores.test_store_sqlite import PAY_SCRIPT

BIG = "x" * 200_000
RAN: list[int] = []


@pytest.fixture(autouse=True)
def _clear_ran() -> None:  # EXECUTED: tests/stores/conftest.py
    RAN.clear()


@tool
def fetch(n: int) -> str:
    """Fetch a large page."""
    RAN.append(n)
    return BIG


def _fetcher() -> Agent:
    script = [[ToolCall(id="c1", name="fetch", args={"n": 1})], "fetched"]
    return Agent(name="fetcher", model=ScriptedModel(script), instruction="Fetch.", tools=[fetch])


def _open_files(folder: Path) -> list[str]:
    """The files in ``folder`` this process holds open (/proc/self/fd), one entry a descriptor."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(folder)):
                out.append(target)
    return sorted(out)


@pytest.mark.parametrize("thread", [False, True], ids=["inline", "thread"])
def test_a_full_disk_ends_the_run_failed_naming_the_store_error_and_keeps_the_run(tmp_path: Path, thread: bool) -> None:
    path = tmp_path / "runs.db"

    async def go() -> None:
        store = SQLiteStore(path, thread=thread)
        (pages,) = store._db.execute("PRAGMA page_count").fetchone()
        store._db.execute(f"PRAGMA max_page_count = {pages + 4}")  # SQLite's own "disk is full", a few pages on
        run = await Runner(_fetcher(), store=store).run("fetch", run_id="r1")
        assert run.outcome == "failed" and run.error is not None and run.error.kind == "store"
        assert "OperationalError: database or disk is full" in run.error.message
        assert "runner.resume('r1')" in run.error.message
        assert run.trace[-1] == "failed" and RAN == [1]
        saved = await store.load("r1")
        assert saved is not None and saved.outcome is None  # the last checkpoint written: nothing was lost
        await store.close()
        assert _open_files(tmp_path) == []  # (it held 4 after the failed write)

        store = SQLiteStore(path, thread=thread)  # the disk has room again: the run goes on from there
        resumed = await Runner(_fetcher(), store=store).resume("r1")
        assert resumed.outcome == "final", resumed.error
        await store.close()

    asyncio.run(go())
    assert _open_files(tmp_path) == []


def test_a_store_that_fails_before_the_first_checkpoint_ends_the_run_failed(tmp_path: Path) -> None:
    async def go() -> Any:
        store = SQLiteStore(tmp_path / "runs.db")
        store._db.execute("PRAGMA query_only = 1")  # every write refused from here on
        run = await Runner(_fetcher(), store=store).run("fetch", run_id="r1")
        await store.close()
        return run

    run = asyncio.run(go())
    assert run.outcome == "failed" and run.error is not None and run.error.kind == "store"
    assert "attempt to write a readonly database" in run.error.message and RAN == []


READ_ONLY = """
import asyncio, json, os, sys
sys.path.insert(0, {root!r})
from loopwright import Runner, approve
from loopwright.stores import SQLiteStore
from tests.store_app import EXECUTED, labels, make_agent
from tests.stores.test_store_sqlite import PAY_SCRIPT

path = sys.argv[1]


def open_files():
    return sorted(os.listdir("/proc/self/fd"))


async def main():
    out = {{}}
    store = SQLiteStore(path)
    first = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="waiting")
    out["first"] = first.outcome
    await store.close()
    EXECUTED.clear()
    os.chmod(path, 0o444)  # the file is read-only for this process (no capability overrides its mode)
    before = open_files()
    store = SQLiteStore(path)  # it opens: its runs can be read
    out["listed"] = [r.run_id for r in await store.runs()]
    resumed = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {{"c-pay": approve()}})
    out["resumed"] = [resumed.outcome, resumed.error.kind, resumed.error.message]
    new = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="new")
    out["new"] = [new.outcome, new.error.kind, new.error.message]
    await store.close()
    out["leaked"] = sorted(set(open_files()) - set(before))
    out["paid_while_read_only"] = dict(labels())
    for name in (path, path + "-wal", path + "-shm"):  # (the read-only store made its -shm read-only too)
        if os.path.exists(name):
            os.chmod(name, 0o644)
    store = SQLiteStore(path)
    again = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {{"c-pay": approve()}})
    out["again"] = again.outcome if again.error is None else again.error.message
    out["paid"] = dict(labels())
    await store.close()
    print(json.dumps(out))


asyncio.run(main())
"""


@pytest.mark.slow
def test_a_read_only_store_file_ends_runs_and_resumes_failed_and_keeps_them(tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the check without the capabilities that override file modes")
    folder = tempfile.mkdtemp(prefix="loopwright-ro-", dir="/tmp")
    try:
        os.chmod(folder, 0o777)
        script = Path(folder) / "read_only.py"
        script.write_text(READ_ONLY.format(root=str(ROOT)))
        done = subprocess.run(
            # root without the capabilities that override file permissions: a 0o444 file is read-only
            # for it (it keeps reading the checkout and its venv, whatever their modes)
            [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search",
             sys.executable, str(script), f"{folder}/runs.db"],
            capture_output=True, text=True, timeout=120, cwd=folder,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert out["first"] == "suspended" and out["listed"] == ["waiting"]
    for outcome, kind, message in (out["resumed"], out["new"]):
        assert (outcome, kind) == ("failed", "store")
        assert "OperationalError: attempt to write a readonly database" in message
    assert out["leaked"] == [] and out["paid_while_read_only"] == {}
    assert out["again"] == "final", out
    assert out["paid"] == {"pay 500": 1}


def test_a_read_only_postgres_database_ends_runs_failed_and_keeps_them(pg_url: str, pg_dsn: str) -> None:
    import psycopg

    from loopwright.stores.postgres import PostgresStore

    database = pg_url.rpartition("/")[2]

    def read_only(on: bool) -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = {'on' if on else 'off'}")  # type: ignore[arg-type]

    async def go() -> None:
        store = PostgresStore(pg_url)
        first = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="waiting")
        assert first.outcome == "suspended"
        await store.close()
        EXECUTED.clear()
        read_only(True)
        store = PostgresStore(pg_url)
        assert [r.run_id for r in await store.runs()] == ["waiting"]
        resumed = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {"c-pay": approve()})
        new = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="new")
        for run in (resumed, new):
            assert run.outcome == "failed" and run.error is not None and run.error.kind == "store"
            assert "ReadOnlySqlTransaction" in run.error.message, run.error.message
        assert labels() == {}
        await store.close()
        read_only(False)
        store = PostgresStore(pg_url)
        again = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {"c-pay": approve()})
        assert again.outcome == "final" and labels() == {"pay 500": 1}
        await store.close()

    asyncio.run(go())


def test_a_write_that_fails_as_the_run_ends_makes_its_outcome_failed(tmp_path: Path) -> None:
    async def go() -> Any:
        store = SQLiteStore(tmp_path / "runs.db")
        store._db.execute("PRAGMA query_only = 1")
        agent = Agent(name="greeter", model=ScriptedModel(["hello"]), instruction="Greet.")
        run = await Runner(agent, store=store, durability="exit").run("hi", run_id="r1")
        assert await store.load("r1") is None  # nothing was written: the run is not in the store
        await store.close()
        return run

    run = asyncio.run(go())
    assert run.outcome == "failed" and run.error is not None and run.error.kind == "store"
    assert run.trace[-1] == "done" and run.output == "hello"  # (answered, but not saved)
    assert "attempt to write a readonly database" in run.error.message
