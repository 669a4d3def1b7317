"""Issue 42, S2 and S3 as a property: no value a tool can write (any state key, any ``temp:``
key, any JSON value) changes who may see, resume or approve a run, or whose memory it reads."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, approve, tool
from loopwright.features.memory import Memory
from loopwright.runtime.context import RunContext
from loopwright.serve.decisions import DecisionIn, ServeError
from loopwright.serve.service import Service
from loopwright.stores import SQLiteSessions, SQLiteStore, session_of
from loopwright.stores.memory import SQLiteMemory

pytestmark = pytest.mark.slow

APP = "bank"
IDENTITY_KEYS = [
    "loopwright_user",
    "temp:session",
    "temp:user",
    "temp:loopwright_user",
    "user",
    "owner",
    "session",
    "user:id",
    "app:user",
]
NAMES = st.sampled_from(["bob", "ada", "", APP, "s1", "*"])
IDENTITIES = st.one_of(NAMES, st.lists(NAMES, min_size=1, max_size=4), st.tuples(NAMES, NAMES, NAMES).map(list))
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | IDENTITIES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
KEYS = st.one_of(st.sampled_from(IDENTITY_KEYS), st.text(max_size=10), st.text(max_size=10).map("temp:".__add__))
WRITES = st.dictionaries(KEYS, VALUES, max_size=6)


def writer(written: dict[str, Any]) -> Any:
    @tool
    def write_state(ctx: RunContext) -> str:
        """Write the drawn keys into the run's state."""
        ctx.state.update(written)
        return "written"

    return write_state


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sec-identity")


def _seeded(folder: Path) -> Path:
    """A file whose memory holds Ada's PIN (session s0) and Bob's (s1), made once."""
    db = folder / "memory.db"
    if db.exists():
        return db

    async def seed() -> None:
        sessions, service = SQLiteSessions(db), SQLiteMemory(db)
        runner = Runner(Agent(name="a", model=ScriptedModel(["noted", "noted"])), sessions=sessions)
        await runner.run("My bank PIN is 1111", session=(APP, "ada", "s0"))
        await runner.run("My bank PIN is 4321", session=(APP, "bob", "s1"))
        for user, sid in (("ada", "s0"), ("bob", "s1")):
            saved = await sessions.load((APP, user, sid))
            assert saved is not None
            await service.add_session(saved)
        await sessions.close()
        await service.close()

    asyncio.run(seed())
    return db


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=WRITES, suspend=st.booleans())
def test_no_written_value_changes_whose_memory_a_run_reads(
    folder: Path, written: dict[str, Any], suspend: bool
) -> None:
    db = _seeded(folder)
    seen: list[Any] = []

    @tool
    async def whose(ctx: RunContext) -> str:
        """Say whose session the run holds."""
        seen.append(await session_of(ctx))
        return "ok"

    @tool(requires_confirmation=True)
    def wait_here() -> str:
        """A call a person approves first."""
        return "approved"

    async def main() -> None:
        sessions, service = SQLiteSessions(db), SQLiteMemory(db)
        memory = Memory(service, preload=False)
        steps: list[Any] = [[ToolCall(id="w0", name="write_state", args={})]]
        if suspend:
            steps.append([ToolCall(id="p1", name="wait_here", args={})])
        steps += [
            [ToolCall(id="w1", name="write_state", args={})],
            [ToolCall(id="q1", name="whose", args={})],
            [ToolCall(id="m1", name="load_memory", args={"query": "bank PIN"})],
            "ok",
        ]
        tools = [writer(written), wait_here, whose, memory.tool]
        store = SQLiteStore(folder / "runs.db")
        key = (APP, "ada", f"s-{time.monotonic_ns()}")
        result = await Runner(
            Agent(name="a", model=ScriptedModel(steps), tools=tools), store=store, sessions=sessions
        ).run("hi", session=key)
        if suspend:
            assert result.outcome == "suspended"
            again = Runner(Agent(name="a", model=ScriptedModel(steps[2:]), tools=tools), store=store, sessions=sessions)
            result = await again.resume(result.run_id, {"p1": approve()})
        assert result.outcome == "final", result.error
        answers = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
        text = str([a.content for a in answers if a.name == "load_memory"][-1])
        assert "1111" in text and "4321" not in text
        assert seen == [key]
        for closing in (store, sessions, service):
            await closing.close()

    asyncio.run(main())


def _reply(request: ModelRequest) -> ModelResponse:
    answered = sum(1 for m in request.messages for p in m.parts if p.type == "tool_result")
    if answered == 0:
        return ModelResponse(parts=(ToolCall(name="write_state", args={}),))
    if answered == 1:
        return ModelResponse(parts=(ToolCall(name="refund", args={"order": "G7"}),))
    return ModelResponse(parts=(TextPart(text="refunded"),))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=WRITES)
def test_no_written_value_changes_who_may_see_resume_or_approve_a_run(folder: Path, written: dict[str, Any]) -> None:
    def agent() -> Agent:
        return Agent(name="support", model=ScriptedModel(_reply), tools=[writer(written), refund])

    async def main() -> None:
        store = SQLiteStore(folder / "served.db")
        first = Service([agent()], store)
        run_id = await first.start("support", "refund G7", "ada")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            saved = await store.load(run_id)
            if saved is not None and saved.outcome == "suspended" and run_id not in first.live:
                break
            await asyncio.sleep(0.01)
        call = (await first.show(run_id, "ada", False))["pending"][0]["call_id"]
        await first.close()
        again = Service([agent()], store)  # a restart: what is known is what the store keeps
        for who in ("bob", "", "*", APP):
            for refused in (
                again.show(run_id, who, False),
                again.decide(run_id, [DecisionIn(call, "approve")], who, False),
                again.resume(run_id, who, False),
                again.cancel(run_id, who, False),
            ):
                with pytest.raises(ServeError) as caught:
                    await refused
                assert caught.value.status == 404
            assert run_id not in [r["run_id"] for r in await again.runs(who, False)]
        assert (await again.show(run_id, "ada", False))["user"] == "ada"
        assert run_id in [r["run_id"] for r in await again.runs("ada", False)]
        await again.close()
        await store.close()

    asyncio.run(main())
