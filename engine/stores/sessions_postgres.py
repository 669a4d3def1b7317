"""PostgresSessions: sessions in PostgreSQL (the tables of :mod:`loopwright.stores.sessions`,
``user`` spelled ``user_id``), on the run store's pool. ``pip install 'loopwright[postgres]'``."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from ..data.parts import Message
from .pg_tables import TablesOnce
from .session_base import SavedSession, SessionKey, busy, check_key, history, message_rows, prefixed, scope_rows

# ---------------------------------------------------------------- PostgreSQL

_PG_TABLES = (
    "CREATE TABLE IF NOT EXISTS lw_sessions (app TEXT NOT NULL, user_id TEXT NOT NULL, session TEXT NOT NULL,"
    " state TEXT NOT NULL DEFAULT '{}', agent TEXT, holder TEXT, held TEXT, updated DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (app, user_id, session))",
    "CREATE INDEX IF NOT EXISTS lw_sessions_holder ON lw_sessions (holder) WHERE holder IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS lw_session_messages (app TEXT NOT NULL, user_id TEXT NOT NULL,"
    " session TEXT NOT NULL, n INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (app, user_id, session, n))",
    "CREATE TABLE IF NOT EXISTS lw_scopes (app TEXT NOT NULL, user_id TEXT NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, PRIMARY KEY (app, user_id, key))",
)
_PG_WHERE = "app = %s AND user_id = %s AND session = %s"
_PG_LOCK = 0x6C77_7373  # held while the tables are made


class PostgresSessions:
    """Sessions in the PostgreSQL database at ``dsn`` (or a
    :class:`~loopwright.stores.PostgresStore`, whose database and pool they share).
    ``pip install 'loopwright[postgres]'``. A session is held with its row locked (``FOR
    UPDATE``), so two processes on two machines cannot both hold it."""

    def __init__(self, dsn_or_store: str | Any) -> None:
        from .postgres import PostgresStore  # (psycopg: imported only when used)

        self._own = isinstance(dsn_or_store, str)
        self._store: PostgresStore = PostgresStore(dsn_or_store) if isinstance(dsn_or_store, str) else dsn_or_store
        self._tables = TablesOnce(_PG_TABLES, _PG_LOCK)

    async def _pool(self) -> Any:
        return await self._tables.pool(self._store)

    @staticmethod
    async def _scopes(conn: Any, key: SessionKey) -> dict[str, Any]:
        cur = await conn.execute(
            "SELECT user_id, key, value FROM lw_scopes WHERE app = %s AND user_id IN ('', %s)", (key[0], key[1])
        )
        return prefixed(await cur.fetchall())

    @staticmethod
    async def _messages(conn: Any, key: SessionKey) -> list[Message]:
        cur = await conn.execute(f"SELECT body FROM lw_session_messages WHERE {_PG_WHERE} ORDER BY n", key)
        return history(await cur.fetchall())

    async def begin(self, key: SessionKey, holder: str) -> SavedSession:
        key = check_key(key)
        pool = await self._pool()
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO lw_sessions (app, user_id, session, updated) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (*key, time.time()),
            )
            cur = await conn.execute(
                f"SELECT state, agent, holder, updated FROM lw_sessions WHERE {_PG_WHERE} FOR UPDATE", key
            )
            row = await cur.fetchone()
            if row[2] is not None and row[2] != holder:
                raise busy(key, row[2])
            scopes = await self._scopes(conn, key)
            await conn.execute(
                f"UPDATE lw_sessions SET holder = %s, held = %s WHERE {_PG_WHERE}", (holder, json.dumps(scopes), *key)
            )
            messages = await self._messages(conn, key)
        return SavedSession(key, messages, json.loads(row[0]), scopes, row[1], row[3])

    async def commit(
        self, key: SessionKey, holder: str, messages: list[Message], state: Mapping[str, Any],
        scopes: Mapping[str, Any], agent: str | None, kept: int = 0,
    ) -> None:  # fmt: skip
        pool = await self._pool()
        bodies = message_rows(messages, kept)
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute(f"SELECT holder FROM lw_sessions WHERE {_PG_WHERE} FOR UPDATE", key)
            found = await cur.fetchone()
            if found is None or found[0] != holder:
                raise busy(key, found[0] if found else "(none: the session was removed)")
            for app, user, name, value in scope_rows(key, scopes):
                if value is None:
                    await conn.execute(
                        "DELETE FROM lw_scopes WHERE app = %s AND user_id = %s AND key = %s", (app, user, name)
                    )
                else:
                    await conn.execute(
                        "INSERT INTO lw_scopes VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (app, user_id, key) DO UPDATE SET value = EXCLUDED.value",
                        (app, user, name, value),
                    )
            await conn.execute(f"DELETE FROM lw_session_messages WHERE {_PG_WHERE} AND n >= %s", (*key, kept))
            if bodies:
                async with conn.cursor() as cursor:
                    await cursor.executemany(
                        "INSERT INTO lw_session_messages VALUES (%s, %s, %s, %s, %s)", [(*key, n, b) for n, b in bodies]
                    )
            await conn.execute(
                f"UPDATE lw_sessions SET state = %s, agent = %s, holder = NULL, held = NULL, updated = %s"
                f" WHERE {_PG_WHERE}",
                (json.dumps(dict(state)), agent, time.time(), *key),
            )

    async def release(self, key: SessionKey, holder: str | None = None) -> None:
        pool = await self._pool()
        async with pool.connection() as conn:
            await conn.execute(
                f"UPDATE lw_sessions SET holder = NULL, held = NULL WHERE {_PG_WHERE}"
                " AND (%s::text IS NULL OR holder = %s)",
                (*check_key(key), holder, holder),
            )

    async def held_by(self, holder: str) -> SavedSession | None:
        pool = await self._pool()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT app, user_id, session, state, agent, held, updated FROM lw_sessions WHERE holder = %s",
                (holder,),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            key: SessionKey = (row[0], row[1], row[2])
            messages = await self._messages(conn, key)
        return SavedSession(key, messages, json.loads(row[3]), json.loads(row[5] or "{}"), row[4], row[6])

    async def load(self, key: SessionKey) -> SavedSession | None:
        key = check_key(key)
        pool = await self._pool()
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute(f"SELECT state, agent, updated FROM lw_sessions WHERE {_PG_WHERE}", key)
            row = await cur.fetchone()
            if row is None:
                return None
            scopes = await self._scopes(conn, key)
            messages = await self._messages(conn, key)
        return SavedSession(key, messages, json.loads(row[0]), scopes, row[1], row[2])

    async def sessions(self, app: str, user: str) -> list[SavedSession]:
        pool = await self._pool()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT session FROM lw_sessions WHERE app = %s AND user_id = %s ORDER BY updated DESC", (app, user)
            )
            ids = await cur.fetchall()
        found = [await self.load((app, user, sid)) for (sid,) in ids]
        return [s for s in found if s is not None]

    async def close(self) -> None:
        if self._own:
            await self._store.close()

    def __repr__(self) -> str:
        return "PostgresSessions(...)"


__all__ = ["PostgresSessions"]
