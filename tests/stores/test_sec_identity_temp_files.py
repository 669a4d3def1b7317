"""Issue 42, S5: a ``temp:`` value given at a run's start reaches no file once the run has ended:
not the SQLite database, not its ``-wal`` nor its ``-shm``, while another connection (a session
store on the same file) keeps the WAL from being removed, and after every connection closed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from loopwright import Agent, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.stores import SQLiteStore
from loopwright.stores.sessions import SQLiteSessions

SECRET = "SECRET-MARKER-5a7c"


@tool(requires_confirmation=True)
def pay() -> str:
    """Pay (asks a person first)."""
    return "paid"


def leaks(folder: Path) -> list[str]:
    """The files of ``folder`` (the database, its -wal and -shm) whose bytes hold the secret."""
    return [p.name for p in sorted(folder.iterdir()) if p.is_file() and SECRET.encode() in p.read_bytes()]


@pytest.mark.parametrize("suspends", [False, True])
@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_a_temp_value_is_in_no_file_after_the_run_and_after_close(
    tmp_path: Path, suspends: bool, key: bytes | None
) -> None:
    db = tmp_path / "runs.db"

    async def main() -> None:
        sessions = SQLiteSessions(db)  # another connection on the file: the WAL is not removed at close
        store = SQLiteStore(db, key=key)
        script = [[ToolCall(id="c1", name="pay", args={})], "done"] if suspends else ["done"]
        runner = Runner(Agent(name="a", model=ScriptedModel(script), tools=[pay]), store=store)
        result = await runner.run("hi", state={"temp:token": SECRET})
        if suspends:
            assert result.outcome == "suspended"
            assert leaks(tmp_path)  # a suspended run resumes with its temp: keys: the store keeps them
            result = await runner.resume(result.run_id, {"c1": approve()})
        assert result.outcome == "final" and result.state["temp:token"] == SECRET
        assert leaks(tmp_path) == [], "after the run"
        loaded = await store.load(result.run_id)
        assert loaded is not None and SECRET.encode() not in loaded.head  # (signed rows still check)
        await store.close()
        assert leaks(tmp_path) == [], "after the store closed"
        await sessions.close()
        assert leaks(tmp_path) == [], "after every connection closed"

    asyncio.run(main())


def test_a_run_without_temp_keys_does_not_truncate_the_wal(tmp_path: Path) -> None:
    """The WAL is cut back only after a rewrite (a run that held temp: keys): others cost nothing more."""
    db = tmp_path / "runs.db"

    async def main() -> None:
        sessions = SQLiteSessions(db)
        store = SQLiteStore(db)
        runner = Runner(Agent(name="a", model=ScriptedModel(["done"])), store=store)
        await runner.run("hi", state={"plain": "value"})
        assert (tmp_path / "runs.db-wal").stat().st_size > 0
        await store.close()
        await sessions.close()

    asyncio.run(main())
