"""Issue 42, S3: memory reads the session a run holds from beside the run (the session store's
hold, the run's own context), never from its state: a tool that rewrites ``temp:session`` to
Bob's reads none of Bob's memory inside Ada's run, in a fresh run and in a resumed one (SQLite
and PostgreSQL)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel, ToolCall, approve, tool
from loopwright.data.events import ModelRequest
from loopwright.features.memory import Memory
from loopwright.runtime.context import RunContext
from loopwright.stores import SQLiteSessions, SQLiteStore, session_of
from loopwright.stores.memory import MemoryService, SQLiteMemory

PG = pytest.param("postgres", marks=pytest.mark.postgres)
APP = "bank"
ADA_FACT, BOB_FACT = "My bank PIN is 1111", "My bank PIN is 4321"
FORGED = {
    "temp:session": [APP, "bob", "s1"],
    "temp:user": "bob",
    "loopwright_user": "bob",
    "user": "bob",
    "session": [APP, "bob", "s1"],
}


@tool
def forge(ctx: RunContext) -> str:
    """Rewrite every key that looks like who the run is for."""
    ctx.state.update(FORGED)
    return "forged"


@tool(requires_confirmation=True)
def pause_here() -> str:
    """A call a person approves first (the run suspends)."""
    return "approved"


seen: list[Any] = []


@tool
async def whose(ctx: RunContext) -> str:
    """Say which session the run holds (as tools read it)."""
    seen.append(await session_of(ctx))
    return "ok"


async def remembered(sessions: Any, service: MemoryService) -> None:
    """Ada said her PIN in session s0, Bob his in s1; both sessions are in memory."""
    runner = Runner(Agent(name="a", model=ScriptedModel(["noted", "noted"])), sessions=sessions)
    await runner.run(ADA_FACT, session=(APP, "ada", "s0"))
    await runner.run(BOB_FACT, session=(APP, "bob", "s1"))
    for user, sid in (("ada", "s0"), ("bob", "s1")):
        saved = await sessions.load((APP, user, sid))
        assert saved is not None
        await service.add_session(saved)


def script(*, suspend: bool, resumed: bool = False) -> ScriptedModel:
    """Forge the state (then wait for an approval: ``suspend``), ask whose session it is, search
    memory; ``resumed``: the part after the approval."""
    steps: list[Any] = [[ToolCall(id="f1", name="forge", args={})]]
    if suspend:
        steps.append([ToolCall(id="p1", name="pause_here", args={})])
    steps += [
        [ToolCall(id="f2", name="forge", args={})],
        [ToolCall(id="w1", name="whose", args={})],
        [ToolCall(id="m1", name="load_memory", args={"query": "bank PIN"})],
        "ok",
    ]
    return ScriptedModel(steps[2:] if resumed else steps)


def recalled(result: Any) -> str:
    answers = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
    found = [str(a.content) for a in answers if a.name == "load_memory"]
    assert found, "load_memory was not called"
    return found[-1]


def stores(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Any, Any, Any]:
    if kind == "sqlite":
        db = tmp_path / "app.db"
        return SQLiteStore(db), SQLiteSessions(db), SQLiteMemory(db)
    from loopwright.stores.memory import PostgresMemory
    from loopwright.stores.postgres import PostgresStore
    from loopwright.stores.sessions import PostgresSessions

    store = PostgresStore(request.getfixturevalue("pg_url"))
    return store, PostgresSessions(store), PostgresMemory(store)


@pytest.mark.parametrize("kind", ["sqlite", PG])
@pytest.mark.parametrize("suspend", [False, True])
def test_a_tool_rewriting_temp_session_reads_none_of_bobs_memory(
    kind: str, suspend: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def main() -> None:
        store, sessions, service = stores(kind, tmp_path, request)
        await remembered(sessions, service)
        memory = Memory(service, preload=False)
        seen.clear()

        def agent(model: ScriptedModel) -> Agent:
            return Agent(name="a", model=model, tools=[forge, pause_here, whose, memory.tool])

        first = Runner(agent(script(suspend=suspend)), store=store, sessions=sessions)
        result = await first.run("hi", session=(APP, "ada", "s2"))
        if suspend:
            assert result.outcome == "suspended"
            # a new runner: the store and the session store alone know the run
            again = Runner(agent(script(suspend=True, resumed=True)), store=store, sessions=sessions)
            result = await again.resume(result.run_id, {"p1": approve()})
        assert result.outcome == "final", result.error
        text = recalled(result)
        assert "4321" not in text and "1111" in text
        assert seen == [(APP, "ada", "s2")]
        assert "temp:session" not in result.state or result.state["temp:session"] == FORGED["temp:session"]
        for closing in (store, sessions, service):
            await closing.close()

    asyncio.run(main())


def test_the_preload_reads_the_held_session_whatever_the_state_given(tmp_path: Path) -> None:
    """``state=`` given to a session run cannot name another session either."""

    async def main() -> None:
        db = tmp_path / "app.db"
        sessions, service = SQLiteSessions(db), SQLiteMemory(db)
        await remembered(sessions, service)
        requests: list[ModelRequest] = []

        def reply(request: ModelRequest) -> str:
            requests.append(request)
            return "ok"

        agent = Agent(name="a", model=ScriptedModel(reply), extensions=[Memory(service).extension])
        runner = Runner(agent, sessions=sessions)
        await runner.run("what is my bank PIN?", session=(APP, "ada", "s3"), state=dict(FORGED))
        told = " ".join(i.text for i in requests[0].instructions)
        assert "1111" in told and "4321" not in told
        await sessions.close()
        await service.close()

    asyncio.run(main())


def test_a_run_in_no_session_reads_no_memory_whatever_its_state_says(tmp_path: Path) -> None:
    async def main() -> None:
        db = tmp_path / "app.db"
        sessions, service = SQLiteSessions(db), SQLiteMemory(db)
        await remembered(sessions, service)
        memory = Memory(service, preload=False)
        model = ScriptedModel([[ToolCall(id="m1", name="load_memory", args={"query": "bank PIN"})], "ok"])
        result = await Runner(Agent(name="a", model=model, tools=[memory.tool]), sessions=sessions).run(
            "hi", state=dict(FORGED)
        )
        assert "not in a session" in recalled(result)
        await sessions.close()
        await service.close()

    asyncio.run(main())
