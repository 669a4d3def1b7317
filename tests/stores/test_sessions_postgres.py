"""Sessions in PostgreSQL: scopes shared and kept apart as in SQLite, temp: never stored, one run at a time."""

from __future__ import annotations

import asyncio

import pytest

from loopwright import Agent, Runner, ScriptedModel
from loopwright.data.events import ModelRequest, ModelResponse, TextPart, ToolCall
from loopwright.stores.sessions import PostgresSessions, SessionBusy
from tests.stores.test_sessions import APP, remember

pytestmark = pytest.mark.postgres


def test_scopes_and_busy_in_postgres(pg_url: str) -> None:
    import psycopg

    async def main() -> None:
        sessions = PostgresSessions(pg_url)
        writes = {"app:greeting": "hi", "user:name": "Ada", "temp:scratch": "TEMPVALUE", "topic": "cats"}
        calls = [
            [ToolCall(id=f"c{i}", name="remember", args={"key": k, "value": v})]
            for i, (k, v) in enumerate(writes.items())
        ]
        agent = Agent(name="a", model=ScriptedModel([*calls, "done"]), tools=[remember])
        await Runner(agent, sessions=sessions).run("go", session=(APP, "u1", "s1"))
        plain = Runner(Agent(name="a", model=ScriptedModel(["ok", "ok"])), sessions=sessions)
        mine = await plain.run("again", session=(APP, "u1", "s2"))
        theirs = await plain.run("hello", session=(APP, "u2", "s1"))
        assert (
            mine.state["user:name"] == "AdaAda" and mine.state["app:greeting"] == "hihi" and "topic" not in mine.state
        )
        assert "user:name" not in theirs.state and theirs.state["app:greeting"] == "hihi"

        async def slow(request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(0.3)
            return ModelResponse(parts=(TextPart(text="slow"),))

        runner = Runner(Agent(name="a", model=ScriptedModel(slow)), sessions=sessions)
        first = asyncio.ensure_future(runner.run("one", session=(APP, "u1", "s1")))
        await asyncio.sleep(0.1)
        with pytest.raises(SessionBusy):
            await runner.run("two", session=(APP, "u1", "s1"))
        assert (await first).output == "slow"
        await sessions.close()

    asyncio.run(main())
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT state || coalesce(held, '') FROM lw_sessions").fetchall()
        rows += conn.execute("SELECT body FROM lw_session_messages").fetchall()
        scopes = conn.execute("SELECT value FROM lw_scopes").fetchall()
    dumped = repr(rows) + repr(scopes)
    assert "AdaAda" in dumped and "TEMPVALUETEMPVALUE" not in dumped
