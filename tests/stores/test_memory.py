"""Memory across sessions: a fact said in an earlier session is found again (SQLite FTS5, PostgreSQL full text)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel
from loopwright.data.events import ModelRequest, ModelResponse, TextPart, ToolCall
from loopwright.features.memory import Memory
from loopwright.stores.memory import MemoryService, SQLiteMemory
from loopwright.stores.sessions import SQLiteSessions

APP = "shop"


def seen_by(requests: list[ModelRequest]) -> Any:
    def reply(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        return ModelResponse(parts=(TextPart(text="noted"),))

    return reply


async def remembered(sessions: Any, service: MemoryService) -> None:
    """u1 says a fact in session s1; s1 goes into memory; a run in s2 recalls it (preload), and
    u2 finds nothing of u1's."""
    memory = Memory(service)
    first = Runner(Agent(name="a", model=ScriptedModel(["noted"])), sessions=sessions)
    await first.run("My favourite colour is teal, remember that.", session=(APP, "u1", "s1"))
    await first.run("And I live in Lisbon.", session=(APP, "u2", "s1"))
    for user in ("u1", "u2"):
        saved = await sessions.load((APP, user, "s1"))
        assert saved is not None
        await service.add_session(saved)

    hits = await service.search("what colour do I like?", "u1", app=APP)
    assert hits and "teal" in hits[0].text and hits[0].session == "s1"
    assert not any("Lisbon" in h.text for h in hits)
    assert all("teal" not in h.text for h in await service.search("favourite colour", "u2"))
    assert await service.search("favourite colour", "u1", app="another-app") == []

    requests: list[ModelRequest] = []
    agent = Agent(name="a", model=ScriptedModel(seen_by(requests)), extensions=[memory.extension])
    result = await Runner(agent, sessions=sessions).run("Which colour do I like?", session=(APP, "u1", "s2"))
    assert "recall" in result.trace
    assert any("teal" in i.text for i in requests[0].instructions)

    tool_model = ScriptedModel([[ToolCall(id="m1", name="load_memory", args={"query": "favourite colour"})], "teal"])
    result = await Runner(Agent(name="a", model=tool_model, tools=[memory.tool]), sessions=sessions).run(
        "Which colour?", session=(APP, "u1", "s3")
    )
    answer = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
    assert answer and "teal" in str(answer[0])


def test_memory_finds_an_earlier_sessions_fact_sqlite(tmp_path: Path) -> None:
    async def main() -> None:
        sessions = SQLiteSessions(tmp_path / "app.db")
        memory = SQLiteMemory(tmp_path / "app.db")
        await remembered(sessions, memory)
        await memory.close()
        await sessions.close()

    asyncio.run(main())


def test_memory_outside_a_session_finds_nothing(tmp_path: Path) -> None:
    memory = Memory(SQLiteMemory(":memory:"))
    model = ScriptedModel([[ToolCall(id="m1", name="load_memory", args={"query": "colour"})], "ok"])
    agent = Agent(name="a", model=model, tools=[memory.tool], extensions=[memory.extension])
    result = Runner(agent).run_sync("hi")
    assert result.outcome == "final" and "not in a session" in str(result.messages[2])


def test_memory_bad_input() -> None:
    with pytest.raises(ValueError, match="MemoryService"):
        Memory(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        Memory(SQLiteMemory(":memory:"), limit=0)
    from loopwright.data.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="user id"):
        asyncio.run(SQLiteMemory(":memory:").search("x", ""))


@pytest.mark.postgres
def test_memory_finds_an_earlier_sessions_fact_postgres(pg_url: str) -> None:
    from loopwright.stores.memory import PostgresMemory
    from loopwright.stores.postgres import PostgresStore
    from loopwright.stores.sessions import PostgresSessions

    async def main() -> None:
        store = PostgresStore(pg_url)
        sessions, memory = PostgresSessions(store), PostgresMemory(store)
        await remembered(sessions, memory)
        await store.close()

    asyncio.run(main())


def test_the_preload_is_a_drawn_state() -> None:
    from loopwright.machines.diagram import diagram

    memory = Memory(SQLiteMemory(":memory:"))
    drawn = diagram(Agent(name="a", model=ScriptedModel(["x"]), extensions=[memory.extension]), "mermaid")
    assert isinstance(drawn, str) and "start --> recall" in drawn and "recall --> preprocess" in drawn
