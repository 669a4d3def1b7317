"""PostgreSQL stores make their tables once, under an advisory lock, through one helper
(:class:`loopwright.stores.pg_tables.TablesOnce`): many first calls at once, from store objects
standing for two processes, run the statements once per object and never race."""

from __future__ import annotations

import asyncio

import pytest

from loopwright.stores.memory import PostgresMemory
from loopwright.stores.pg_tables import TablesOnce
from loopwright.stores.postgres import PostgresStore
from loopwright.stores.sessions import PostgresSessions

pytestmark = pytest.mark.postgres


def test_the_statements_run_once_per_object_however_many_wait(pg_url: str) -> None:
    statements = ("CREATE TABLE IF NOT EXISTS made (n INTEGER)", "INSERT INTO made VALUES (1)")

    async def main() -> int:
        store = PostgresStore(pg_url)
        try:
            one, other = TablesOnce(statements, 0x6C77_7474), TablesOnce(statements, 0x6C77_7474)
            pools = await asyncio.gather(*(tables.pool(store) for tables in (one, other) for _ in range(8)))
            assert all(pool is pools[0] for pool in pools)  # the run store's own pool
            async with pools[0].connection() as conn:
                cur = await conn.execute("SELECT count(*) FROM made")
                row = await cur.fetchone()
            return int(row[0])
        finally:
            await store.close()

    assert asyncio.run(main()) == 2  # once for each object, never once for each caller


def test_memory_and_sessions_make_their_tables_at_once_on_an_empty_database(pg_url: str) -> None:
    async def main() -> set[str]:
        store = PostgresStore(pg_url)
        try:
            users = [PostgresMemory(store), PostgresMemory(store), PostgresSessions(store), PostgresSessions(store)]
            await asyncio.gather(*(user._pool() for user in users for _ in range(4)))
            async with (await store._ready()).connection() as conn:
                cur = await conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'lw\\_%%'")
                return {row[0] for row in await cur.fetchall()}
        finally:
            await store.close()

    assert {"lw_memory", "lw_sessions", "lw_session_messages", "lw_scopes"} <= asyncio.run(main())
