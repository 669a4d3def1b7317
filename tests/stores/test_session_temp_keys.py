"""temp: keys live for one run: a durable store keeps them while the run goes on and holds none once it has ended."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel, approve, tool
from loopwright.data.events import ToolCall
from loopwright.runtime.tool_context import ToolContext
from loopwright.stores import SQLiteStore
from loopwright.stores.sessions import PostgresSessions, SQLiteSessions

KEY = ("chat", "ada", "s1")


@tool
def scratch(ctx: ToolContext) -> str:
    """Keep a draft for this run only."""
    ctx.state["temp:draft"] = "SCRATCH-VALUE-1"
    ctx.state["user:seen"] = True
    return "ok"


@tool(requires_confirmation=True)
def pay(ctx: ToolContext) -> str:
    """Pay (asks a person first)."""
    return "paid"


def script() -> ScriptedModel:
    scratching, paying = ToolCall(id="c1", name="scratch", args={}), ToolCall(id="c2", name="pay", args={})
    return ScriptedModel([[scratching], [paying], "done"])


def dump(path: Path) -> str:
    """Every value of every table of the file, blobs as text."""
    out: list[str] = []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for row in conn.execute(f"SELECT * FROM {table}"):
                out += [v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in row]
    return "\n".join(out)


@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_a_finished_session_run_leaves_no_temp_key_in_sqlite(tmp_path: Path, key: bytes | None) -> None:
    db = tmp_path / "app.db"

    async def main() -> None:
        store, sessions = SQLiteStore(db, key=key), SQLiteSessions(db)
        runner = Runner(Agent(name="a", model=script(), tools=[scratch, pay]), store=store, sessions=sessions)
        waiting = await runner.run("go", session=KEY)
        assert waiting.outcome == "suspended"
        held = dump(db)
        assert "temp:draft" in held and "SCRATCH-VALUE-1" in held  # a suspended run resumes with them
        done = await runner.resume(waiting.run_id, {"c2": approve()})
        assert done.outcome == "final" and done.state["temp:draft"] == "SCRATCH-VALUE-1"  # the result keeps them
        loaded = await store.load(done.run_id)  # (signed rows still check)
        assert loaded is not None and b"temp:" not in loaded.head and len(await store.events(done.run_id)) > 5
        await store.close()
        await sessions.close()

    asyncio.run(main())
    stored = dump(db)
    assert "temp:" not in stored and "SCRATCH-VALUE-1" not in stored and "user:seen" in stored
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        zeroed = conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    if zeroed:  # (a SQLite built to zero what it deletes: the file's bytes hold none either)
        raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
        assert b"temp:" not in raw and b"SCRATCH-VALUE-1" not in raw


def test_a_run_without_a_session_drops_its_temp_keys_at_its_end(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = ScriptedModel([[ToolCall(id="c1", name="scratch", args={})], "done"])
    runner = Runner(Agent(name="a", model=model, tools=[scratch]), store=SQLiteStore(db))
    result = runner.run_sync("go", state={"temp:given": "GIVEN-VALUE", "kept": 1})
    assert result.outcome == "final"
    stored = dump(db)
    assert "temp:" not in stored and "GIVEN-VALUE" not in stored and '"kept":1' in stored


def test_temp_keys_are_gone_from_postgres_after_the_run(pg_url: str) -> None:
    import psycopg

    from loopwright.stores import PostgresStore

    async def main() -> Any:
        store = PostgresStore(pg_url)
        runner = Runner(
            Agent(name="a", model=script(), tools=[scratch, pay]), store=store, sessions=PostgresSessions(store)
        )
        waiting = await runner.run("go", session=KEY)
        done = await runner.resume(waiting.run_id, {"c2": approve()})
        assert done.outcome == "final"
        await runner.sessions.close()
        await store.close()

    asyncio.run(main())
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT head, body FROM lw_log").fetchall()
        rows += conn.execute("SELECT body, '' FROM lw_results").fetchall()
        rows += conn.execute("SELECT state || coalesce(held, ''), '' FROM lw_sessions").fetchall()
    stored = b"".join(
        bytes(h if isinstance(h, bytes | memoryview) else str(h).encode()) + bytes(b or b"") for h, b in rows
    )
    assert b"temp:" not in stored and b"SCRATCH-VALUE-1" not in stored
