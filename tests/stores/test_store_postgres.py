"""PostgresStore on a real PostgreSQL server: checkpoints, resume after a crash at every
transition, a resumed step re-running only unfinished calls, suspensions resumed once, two
workers on two connections, schema versions."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from loopwright import ConfigurationError, ResumeError, Runner, RunState, ToolCall, approve
from loopwright.data.errors import RunBusy
from loopwright.durable.checkpoint import rebuild
from loopwright.stores import open_store
from loopwright.stores.postgres import PostgresStore
from tests.store_app import CRASH_AFTER, EXECUTED, Crash, labels, make_agent, steps_script
from tests.store_fakes import CrashingStore, drive
from tests.stores.test_store_sqlite import PAY_SCRIPT

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _clean() -> None:
    EXECUTED.clear()
    CRASH_AFTER.clear()


def test_every_transition_is_checkpointed_in_postgres(pg_url: str) -> None:
    async def go() -> tuple[Any, Any, list[bytes], CrashingStore]:
        store = CrashingStore(PostgresStore(pg_url))
        result = await Runner(make_agent(steps_script(3, calls=2)), store=store).run("go", run_id="r1")
        saved, events = await store.load("r1"), await store.events("r1")
        await store.close()
        return result, saved, events, store

    result, saved, events, store = asyncio.run(go())
    assert result.outcome == "final" and [cp.stage for cp in store.checkpoints] == [
        "reason",
        "act",
        "act",
        "act",
        "done",
    ]
    again = rebuild(saved)
    assert again.trace == result.trace and again.messages == result.messages
    assert again.to_json() == result.run_state.to_json()
    assert [json.loads(e) for e in events] == [json.loads(e.model_dump_json()) for e in result.events]


def test_resume_after_a_crash_at_every_checkpoint_in_postgres(pg_url: str) -> None:
    script = steps_script(2, calls=2)
    plain = asyncio.run(Runner(make_agent(script)).run("go", run_id="r"))
    expected = labels()
    for k in range(1, 4 + 1):  # reason, act, act, done
        EXECUTED.clear()
        result, crashes = asyncio.run(
            drive(lambda: make_agent(script), lambda: PostgresStore(pg_url), crash_at=k, run_id=f"r{k}")
        )
        assert crashes == 1 and result.outcome == "final", k
        assert result.trace == plain.trace and result.messages == plain.messages, k
        assert labels() == expected, (k, EXECUTED)


def test_a_resumed_step_reruns_only_the_call_in_flight_in_postgres(pg_url: str) -> None:
    script = [
        [
            ToolCall(id="fast", name="work", args={"label": "fast"}),
            ToolCall(id="slow", name="work", args={"label": "slow", "seconds": 0.05}),
        ],
        "done",
    ]
    CRASH_AFTER.add("slow")

    async def crash_then_resume() -> Any:
        store = PostgresStore(pg_url)
        try:  # in a task of its own: the "dead" worker's task has ended
            await asyncio.create_task(Runner(make_agent(script), store=store).run("go", run_id="r1"))
        except BaseException as exc:
            assert isinstance(exc, Crash | BaseExceptionGroup)
        await store.close()
        store = PostgresStore(pg_url)
        try:
            return await Runner(make_agent(script), store=store).resume("r1")
        finally:
            await store.close()

    result = asyncio.run(crash_then_resume())
    assert result.outcome == "final"
    assert labels() == Counter({"fast": 1, "slow": 2})
    assert [key for label, key in EXECUTED if label == "slow"] == ["r1:slow", "r1:slow"]


def test_suspensions_are_resumed_once_across_workers_in_postgres(pg_url: str) -> None:
    async def go() -> list[Any]:
        first_store = PostgresStore(pg_url)
        first = await Runner(make_agent(PAY_SCRIPT), store=first_store).run("pay", run_id="r1")
        copy = first.run_state.to_json()
        stores = [PostgresStore(pg_url) for _ in range(3)]
        workers = [Runner(make_agent(PAY_SCRIPT), store=s) for s in stores]
        both = await asyncio.gather(
            *(w.resume("r1", {"c-pay": approve()}) for w in workers[:2]), return_exceptions=True
        )
        try:
            await workers[2].resume(RunState.from_json(copy), {"c-pay": approve()})
        except ResumeError as exc:
            both.append(exc)
        for s in [first_store, *stores]:
            await s.close()
        return list(both)

    outcomes = asyncio.run(go())
    assert sum(isinstance(o, RunBusy) for o in outcomes[:2]) == 1
    assert sum(getattr(o, "outcome", None) == "final" for o in outcomes[:2]) == 1
    assert isinstance(outcomes[2], ResumeError) and "already resumed" in str(outcomes[2])
    assert labels()["pay 500"] == 1


def test_postgres_schema_versions_and_urls(pg_url: str) -> None:
    import psycopg

    async def go() -> None:
        store = await open_store(pg_url)
        assert isinstance(store, PostgresStore)
        assert await store.runs() == []
        await store.close()

    asyncio.run(go())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE lw_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ConfigurationError, match="schema version 99, newer than this loopwright's 5"):
        asyncio.run(PostgresStore.open(pg_url))


def test_a_store_that_does_not_wait_for_the_disk(pg_url: str) -> None:
    """``synchronous_commit=False``: the store's sessions commit without waiting for the flush
    (the server's default is to wait); runs and resumes are the same."""

    async def go() -> tuple[Any, Any, str]:
        store = PostgresStore(pg_url, synchronous_commit=False)
        result = await Runner(make_agent(steps_script(2)), store=store).run("go", run_id="r1")
        pool = await store._ready()
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            row = await cur.fetchone()
        saved = await store.load("r1")
        await store.close()
        assert row is not None
        return result, saved, row[0]

    result, saved, setting = asyncio.run(go())
    assert setting == "off" and result.outcome == "final"
    assert saved is not None and rebuild(saved).messages == result.messages
