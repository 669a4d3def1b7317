"""Memory across sessions: what a user said in earlier sessions, searched by words.

A :class:`MemoryService` takes finished sessions (``add_session``) and finds their passages
again (``search(query, user)``): :class:`SQLiteMemory` (SQLite's FTS5, ranked by bm25) is the
embedded default, :class:`PostgresMemory` uses PostgreSQL's full-text search (``tsvector``,
ranked by ``ts_rank``). Each message's text is one passage; adding a session again replaces its
passages. A search matches any of the query's words (stemmed, common words left out by
PostgreSQL; SQLite ranks rare words higher), within one user (and app, when given).

The run side (a ``load_memory`` tool, a preload before the first model call) is
:mod:`loopwright.features.memory`.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..data.errors import ConfigurationError
from .pg_tables import TablesOnce
from .sessions import SavedSession

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One passage found: the session it came from, who said it, and its text."""

    app: str
    user: str
    session: str
    role: str
    text: str
    score: float
    """Higher is better (comparable within one search only)."""


@runtime_checkable
class MemoryService(Protocol):
    """Keeps sessions and finds their passages again."""

    async def add_session(self, session: SavedSession) -> None:
        """Keep ``session``'s messages (replacing what was kept of it before)."""
        ...

    async def search(self, query: str, user: str, *, app: str | None = None, limit: int = 5) -> list[MemoryHit]:
        """The passages of ``user``'s sessions (of ``app``, when given) that best match ``query``."""
        ...

    async def close(self) -> None: ...


def passages(session: SavedSession) -> list[tuple[str, str]]:
    """``(role, text)`` of each message of ``session`` that has text."""
    return [(m.role, m.text) for m in session.messages if m.text.strip()]


def words(query: str) -> list[str]:
    """The query's words (letters and digits), each once, in order."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))


def _check(query: str, user: str, limit: int) -> None:
    if not isinstance(query, str) or not isinstance(user, str) or not user:
        raise ConfigurationError(f"search(query, user) takes text and a user id, got {query!r}, {user!r}")
    if not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"search(..., limit={limit!r}): limit is a whole number, at least 1")


class SQLiteMemory:
    """Memory in the SQLite file ``path`` (a path, a run store or a session store whose file it
    shares; ``":memory:"`` for a throwaway one), in an FTS5 table ``lw_memory``."""

    def __init__(self, path: str | Path | Any) -> None:
        self.path = str(getattr(path, "path", path))
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self._lock = threading.Lock()
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        try:
            self._db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS lw_memory USING fts5(text, app UNINDEXED, user UNINDEXED,"
                " session UNINDEXED, role UNINDEXED, tokenize = 'porter unicode61')"
            )
        except sqlite3.OperationalError as exc:  # pragma: no cover - depends on the SQLite build
            raise ConfigurationError(
                f"SQLiteMemory needs SQLite's FTS5, which this Python's sqlite3 lacks ({exc}); use PostgresMemory"
            ) from exc

    async def add_session(self, session: SavedSession) -> None:
        app, user, sid = session.key
        rows = [(text, app, user, sid, role) for role, text in passages(session)]
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM lw_memory WHERE app = ? AND user = ? AND session = ?", (app, user, sid))
                db.executemany("INSERT INTO lw_memory (text, app, user, session, role) VALUES (?, ?, ?, ?, ?)", rows)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    async def search(self, query: str, user: str, *, app: str | None = None, limit: int = 5) -> list[MemoryHit]:
        _check(query, user, limit)
        terms = words(query)
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        with self._lock:
            rows = self._db.execute(
                "SELECT app, user, session, role, text, -bm25(lw_memory) FROM lw_memory WHERE lw_memory MATCH ?"
                " AND user = ? AND (? IS NULL OR app = ?) ORDER BY bm25(lw_memory) LIMIT ?",
                (match, user, app, app, limit),
            ).fetchall()
        return [MemoryHit(*row) for row in rows]

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteMemory({self.path!r})"


_PG_TABLES = (
    "CREATE TABLE IF NOT EXISTS lw_memory (app TEXT NOT NULL, user_id TEXT NOT NULL, session TEXT NOT NULL,"
    " role TEXT NOT NULL, text TEXT NOT NULL,"
    " words tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)",
    "CREATE INDEX IF NOT EXISTS lw_memory_words ON lw_memory USING GIN (words)",
    "CREATE INDEX IF NOT EXISTS lw_memory_session ON lw_memory (user_id, app, session)",
)
_PG_LOCK = 0x6C77_6D6D  # held while the table is made


class PostgresMemory:
    """Memory in the PostgreSQL database at ``dsn`` (or a
    :class:`~loopwright.stores.PostgresStore`, whose pool it shares), searched with PostgreSQL's
    full-text search (English stemming). ``pip install 'loopwright[postgres]'``."""

    def __init__(self, dsn_or_store: str | Any) -> None:
        from .postgres import PostgresStore  # (psycopg: imported only when used)

        self._own = isinstance(dsn_or_store, str)
        self._store: PostgresStore = PostgresStore(dsn_or_store) if isinstance(dsn_or_store, str) else dsn_or_store
        self._tables = TablesOnce(_PG_TABLES, _PG_LOCK)

    async def _pool(self) -> Any:
        return await self._tables.pool(self._store)

    async def add_session(self, session: SavedSession) -> None:
        app, user, sid = session.key
        pool = await self._pool()
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM lw_memory WHERE app = %s AND user_id = %s AND session = %s", (app, user, sid)
            )
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO lw_memory (app, user_id, session, role, text) VALUES (%s, %s, %s, %s, %s)",
                    [(app, user, sid, role, text) for role, text in passages(session)],
                )

    async def search(self, query: str, user: str, *, app: str | None = None, limit: int = 5) -> list[MemoryHit]:
        _check(query, user, limit)
        terms = words(query)
        if not terms:
            return []
        pool = await self._pool()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "WITH q AS (SELECT to_tsquery('english', %s) AS q)"
                " SELECT app, user_id, session, role, text, ts_rank(words, q.q) FROM lw_memory, q"
                " WHERE words @@ q.q AND user_id = %s AND (%s::text IS NULL OR app = %s)"
                " ORDER BY 6 DESC LIMIT %s",
                (" | ".join(terms), user, app, app, limit),
            )
            rows = await cur.fetchall()
        return [MemoryHit(*row) for row in rows]

    async def close(self) -> None:
        if self._own:
            await self._store.close()

    def __repr__(self) -> str:
        return "PostgresMemory(...)"


__all__ = ["MemoryHit", "MemoryService", "PostgresMemory", "SQLiteMemory", "passages", "words"]
