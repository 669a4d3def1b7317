"""SQLiteStore's tables: the log keyed by one integer per row (run number << 32 | version),
a store of the previous schema migrated when opened, runs listed and loaded by id."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest

from loopwright import Runner, RunResult, approve
from loopwright.data.errors import ConfigurationError, RunBusy
from loopwright.durable.checkpoint import rebuild
from loopwright.stores import Checkpoint, SQLiteStore, StoreWrapper
from loopwright.stores.base import STORE_SCHEMA, SavedRun, decode_bodies
from tests.store_app import EXECUTED, labels, make_agent, steps_script
from tests.stores.test_store_sqlite import PAY_SCRIPT

SCHEMA_2_LOG = """CREATE TABLE lw_log (
    run_id TEXT NOT NULL, version INTEGER NOT NULL, agent TEXT NOT NULL, stage TEXT NOT NULL,
    outcome TEXT, seq INTEGER NOT NULL, owner TEXT NOT NULL, updated REAL NOT NULL,
    head BLOB NOT NULL, body BLOB NOT NULL, PRIMARY KEY (run_id, version)) WITHOUT ROWID"""
SCHEMA_2_RESULTS = """CREATE TABLE lw_results (run_id TEXT NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL,
    body BLOB NOT NULL, PRIMARY KEY (run_id, call_id)) WITHOUT ROWID"""


def back_to_schema_2(path: Path) -> None:
    """Rewrite a store's tables as schema 2 had them (the log keyed by ``(run_id, version)``, the
    results by ``(run_id, call_id)``)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    db.execute("ALTER TABLE lw_log RENAME TO lw_log_3")
    db.execute(SCHEMA_2_LOG)
    db.execute(
        "INSERT INTO lw_log SELECT r.run_id, l.id & 4294967295, l.agent, l.stage, l.outcome, l.seq, l.owner,"
        " l.updated, l.head, l.body FROM lw_log_3 AS l JOIN lw_runs AS r ON r.run_no = l.id >> 32"
    )
    db.execute("DROP TABLE lw_log_3")
    db.execute("ALTER TABLE lw_results RENAME TO lw_results_3")
    db.execute(SCHEMA_2_RESULTS)
    db.execute(
        "INSERT INTO lw_results SELECT r.run_id, s.call_id, s.seq, s.body FROM lw_results_3 AS s"
        " JOIN lw_runs AS r USING (run_no)"
    )
    db.execute("DROP TABLE lw_results_3")
    db.execute("ALTER TABLE lw_claims DROP COLUMN mac")  # (schema 4's)
    db.execute("DROP TABLE lw_users")  # (schema 5's)
    db.execute("DROP TABLE lw_runs")
    db.execute("UPDATE lw_meta SET value = '2' WHERE key = 'schema_version'")
    db.execute("COMMIT")
    db.close()


def test_a_store_of_schema_2_is_migrated_and_its_runs_load_list_and_resume(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"

    async def before() -> tuple[list[bytes], SavedRun | None, RunResult]:
        store = SQLiteStore(path)
        done = await Runner(make_agent(steps_script(2, calls=2)), store=store).run("go", run_id="done")
        waiting = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="waiting")
        saved = await store.load("done")
        events = await store.events("done")
        kept.update(await store.results("done", 0))
        await store.close()
        assert waiting.outcome == "suspended"
        return events, saved, done

    kept: dict[str, bytes] = {}
    events, saved, done = asyncio.run(before())
    assert len(kept) == 4
    back_to_schema_2(path)

    async def after() -> None:
        store = SQLiteStore(path)
        tables = {r[0] for r in store._db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        assert {"lw_runs", "lw_log", "lw_results", "lw_claims", "lw_users"} <= tables
        assert "lw_log_2" not in tables and "lw_results_2" not in tables
        version = store._db.execute("SELECT value FROM lw_meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == STORE_SCHEMA == 5
        assert await store.load("done") == saved
        assert await store.events("done") == events
        assert await store.results("done", 0) == kept
        assert sorted(r.run_id for r in await store.runs()) == ["done", "waiting"]
        EXECUTED.clear()
        resumed = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {"c-pay": approve()})
        assert resumed.outcome == "final" and labels() == {"pay 500": 1}
        listed = {r.run_id: (r.stage, r.outcome) for r in await store.runs()}
        assert listed == {"done": ("done", "final"), "waiting": ("done", "final")}
        await store.close()

    asyncio.run(after())
    assert saved is not None and rebuild(saved).messages == done.messages


def test_the_store_keeps_the_numbers_of_runs_under_way_only(tmp_path: Path) -> None:
    """A store serving many runs does not grow with every run it ever wrote: a run that ends or
    suspends is forgotten, and looked up again when it resumes."""

    async def go() -> None:
        store = SQLiteStore(tmp_path / "runs.db")
        for i in range(3):
            assert (await Runner(make_agent(steps_script(2)), store=store).run("go", run_id=f"r{i}")).outcome == "final"
        waiting = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="waiting")
        assert waiting.outcome == "suspended"
        assert store._run_nos == {}
        EXECUTED.clear()
        resumed = await Runner(make_agent(PAY_SCRIPT), store=store).resume("waiting", {"c-pay": approve()})
        assert resumed.outcome == "final" and labels() == {"pay 500": 1}
        assert store._run_nos == {}
        await store.close()

    asyncio.run(go())


def test_many_runs_keep_their_own_logs_and_versions(tmp_path: Path) -> None:
    """Runs written interleaved each keep their own log; a stale version is RunBusy, a new run
    id already in the store a ConfigurationError, in a second store object on the same file too."""
    path = tmp_path / "runs.db"

    async def go() -> None:
        store = SQLiteStore(path)
        agent = make_agent(steps_script(2))
        results = await asyncio.gather(*(Runner(agent, store=store).run("go", run_id=f"r{i}") for i in range(5)))
        assert all(r.outcome == "final" for r in results)
        other = SQLiteStore(path)  # knows no run numbers yet
        for i, result in enumerate(results):
            saved = await other.load(f"r{i}")
            assert saved is not None and rebuild(saved).messages == result.messages
        runs = await other.runs()
        assert sorted(r.run_id for r in runs) == [f"r{i}" for i in range(5)]
        assert len({r.version for r in runs}) == 1
        version = runs[0].version
        assert await other.take("r3", version, "me") == version + 1
        with pytest.raises(RunBusy):
            await store.take("r3", version, "them")
        with pytest.raises(RunBusy):
            await other.take("nope", 1, "me")
        assert await other.load("nope") is None and await other.events("nope") == []
        await other.close()
        await store.close()

    asyncio.run(go())


def test_bodies_written_by_schema_2_still_decode() -> None:
    """A store migrated from schema 2 keeps its rows: their events (lists with seq, stage,
    iteration and agent each) decode as before, beside schema-3 bodies after them."""
    old = (
        b'{"m":[{"role":"user","parts":[{"type":"text","text":"go"}],"agent":null}],"t":["start","preprocess"],'
        b'"e":[["run_started",1,10.5,"start",0,"bench","go"],["state_entered",2,10.75,"preprocess",0,"bench",'
        b'"start","else"]],"k":{"run_started":["input"],"state_entered":["source","guard"]}}'
    )
    new = (
        b'{"s":3,"w":["preprocess",0,"bench"],"m":[],"t":["reason"],"e":[[11.0,"preprocess","reason","else"],'
        b'[null,"reason",1,"bench"],["model_responded",11.5]],"k":{"model_responded":["response"]}}'
    )
    head = b'{"~":1,"response":{"parts":[]}}'
    messages, trace, events = decode_bodies([old, new], "r1", heads=[b"{}", head])
    assert trace == ["start", "preprocess", "reason"] and len(messages) == 1
    assert events == [
        {"type": "run_started", "run_id": "r1", "seq": 1, "time": 10.5, "state": "start", "iteration": 0,
         "agent": "bench", "input": "go"},
        {"type": "state_entered", "run_id": "r1", "seq": 2, "time": 10.75, "state": "preprocess", "iteration": 0,
         "agent": "bench", "source": "start", "guard": "else"},
        {"type": "state_entered", "run_id": "r1", "seq": 3, "time": 11.0, "state": "reason", "iteration": 0,
         "agent": "bench", "source": "preprocess", "guard": "else"},
        {"type": "model_responded", "run_id": "r1", "seq": 4, "time": 11.5, "state": "reason", "iteration": 1,
         "agent": "bench", "response": {"parts": []}},
    ]  # fmt: skip
    with pytest.raises(ValueError, match="needs the rows' heads"):
        decode_bodies([old, new], "r1")


def test_every_reply_of_a_checkpoint_is_kept_the_latest_once(tmp_path: Path) -> None:
    """A reply that fails the output check is sent back and answered again: both replies are in
    the store's events and history, equal to the run's own, each kept once (in the head written
    with it; its event and its message refer to it)."""
    from pydantic import BaseModel

    from loopwright import Agent, ScriptedModel

    class Answer(BaseModel):
        n: int

    model = ScriptedModel(["not json", '{"n": 3}'])
    agent = Agent(name="typed", model=model, output_type=Answer)
    store = SQLiteStore(tmp_path / "runs.db")
    result = asyncio.run(Runner(agent, store=store).run("go", run_id="r1"))
    assert result.outcome == "final" and result.output == Answer(n=3)
    kept = [json.loads(e) for e in asyncio.run(store.events("r1"))]
    assert kept == [json.loads(e.model_dump_json()) for e in result.events]
    assert [e["response"]["parts"][0]["text"] for e in kept if e["type"] == "model_responded"] == [
        "not json",
        '{"n": 3}',
    ]
    bodies = b"".join(r[0] for r in store._db.execute("SELECT body FROM lw_log ORDER BY id"))
    assert len(re.findall(rb'\["model_responded",[0-9.]+\]', bodies)) == 2  # each the head's response then
    assert bodies.count(b'["typed"]') == 2  # so are the replies' messages, [agent]
    saved = asyncio.run(store.load("r1"))
    assert saved is not None and rebuild(saved).messages == result.messages


def test_the_session_state_changed_in_place_is_in_every_checkpoint(tmp_path: Path) -> None:
    """``ctx.state`` is one dict the run changes in place: each checkpoint's head carries it
    when it holds something or held something at the checkpoint before (emptied), so the
    state loaded after every checkpoint is the run's state then."""
    from loopwright import Agent, RunContext, ScriptedModel, ToolCall, tool

    @tool
    async def note(key: str, ctx: RunContext) -> str:
        """Set or clear a key."""
        if key:
            ctx.state[key] = len(ctx.state) + 1
        else:
            ctx.state.clear()
        return "ok"

    seen: list[dict[str, object]] = []

    class Loading(StoreWrapper):
        async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
            version = await self.inner.save(checkpoint, version, owner)
            saved = await self.inner.load(checkpoint.run_id)
            assert saved is not None
            seen.append(dict(rebuild(saved).state))
            return version

    keys = ["a", "b", "", "", "c"]
    script: list[object] = [[ToolCall(id=f"c{i}", name="note", args={"key": k})] for i, k in enumerate(keys)]
    agent = Agent(name="notes", model=ScriptedModel([*script, "done"]), tools=[note])
    result = asyncio.run(Runner(agent, store=Loading(SQLiteStore(tmp_path / "runs.db"))).run("go", run_id="r1"))
    assert result.outcome == "final" and result.run_state.state == {"c": 1}
    # checkpoints: entering reason, then act of each step (the state as the step before left it), then done
    assert seen == [{}, {}, {"a": 1}, {"a": 1, "b": 2}, {}, {}, {"c": 1}]


@pytest.mark.slow
def test_the_wal_is_folded_back_off_the_commits_and_stays_bounded(tmp_path: Path) -> None:
    """No commit runs SQLite's checkpoint (autocheckpoint off on the writer); the store's
    folder thread folds the WAL back every FOLD_EVERY commits, and a writer that never pauses
    (the WAL cannot start over while pages are added during each fold) folds it itself past
    FOLD_LIMIT pages: the WAL stays bounded. The folder stops on close, or when an unclosed
    store is dropped."""
    import gc
    import os

    from loopwright.stores import sqlite as lite

    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    folder = store._folder
    assert folder is not None and folder.thread.is_alive()
    biggest = 0

    def wal_size() -> int:
        return os.path.getsize(f"{path}-wal")

    async def write(n: int) -> None:
        nonlocal biggest
        for i in range(n):
            await store.save_result("r", f"c{i % 50}", i, b"x" * 3000)  # 1 to 4 pages a commit
            if i % 50 == 0:
                biggest = max(biggest, wal_size())

    asyncio.run(write(lite.FOLD_EVERY * 25))
    for _ in range(100):  # the folder's thread was woken 25 times; it may lag behind the writer
        if folder.folds:
            break
        folder.thread.join(0.05)
    assert folder.folds >= 1
    # unfolded: ~130 MB. Folded: the limit, and a wake-up or two of commits of up to 5 pages
    # (a fold of the writer's own gives way to one of the folder's in progress)
    assert biggest < (lite.FOLD_LIMIT + lite.FOLD_EVERY * 15) * 4120
    # once folded, the WAL starts over and its file is cut back to the limit
    for _ in range(100):  # (a fold of the folder's own may hold the checkpoint lock a moment)
        ((busy, pages, folded),) = store._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        if not busy and pages == folded:
            break
        folder.thread.join(0.05)
    asyncio.run(write(1))
    assert wal_size() <= lite.FOLD_LIMIT * 4120
    asyncio.run(store.close())
    assert not folder.thread.is_alive()

    dropped = SQLiteStore(tmp_path / "other.db")
    thread = dropped._folder.thread  # type: ignore[union-attr]
    del dropped
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_a_run_saved_on_exit_keeps_its_results_and_its_log(tmp_path: Path) -> None:
    """``durability="exit"``: the tool results are kept as the calls complete, before the run's
    first checkpoint (at its end); the run's number made for them is the log's too."""
    store = SQLiteStore(tmp_path / "runs.db")
    result = asyncio.run(
        Runner(make_agent(steps_script(2, calls=2)), store=store, durability="exit").run("go", run_id="r1")
    )
    assert result.outcome == "final"
    saved = asyncio.run(store.load("r1"))
    assert saved is not None and rebuild(saved).messages == result.messages
    assert len(asyncio.run(store.results("r1", 0))) == 4
    with pytest.raises(ConfigurationError, match="already in the store"):
        asyncio.run(Runner(make_agent(steps_script(1)), store=store, durability="exit").run("go", run_id="r1"))


def test_a_guard_label_is_written_once_per_worker(tmp_path: Path) -> None:
    """A transition's guard is a number after its label's first body (``"g"`` names it), so a
    long label is not repeated every iteration; the events decode to the run's own."""
    store = SQLiteStore(tmp_path / "runs.db")
    result = asyncio.run(Runner(make_agent(steps_script(6)), store=store).run("go", run_id="r1"))
    assert result.outcome == "final"
    bodies = b"".join(r[0] for r in store._db.execute("SELECT body FROM lw_log ORDER BY id"))
    assert bodies.count(b"within_iteration_budget") == 1
    kept = [json.loads(e) for e in asyncio.run(store.events("r1"))]
    assert kept == [json.loads(e.model_dump_json()) for e in result.events]
    assert sum(1 for e in kept if "within_iteration_budget" in e.get("guard", "")) == 6
