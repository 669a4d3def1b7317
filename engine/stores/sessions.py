"""Session stores: a conversation and its state kept across runs, keyed by (app, user, session).

Storage only (what a run does with a session: :mod:`loopwright.loop.sessions`). Three tables,
beside the run store's in the same SQLite file or PostgreSQL database:

- ``lw_sessions``: one row a session: its own state (the unprefixed keys), the agent that
  answered last, and ``holder``: the run that holds the session now (None: free), with
  ``held``, the ``app:``/``user:`` values that run started from;
- ``lw_session_messages``: the conversation, one row a message (JSON), numbered from 0. A run's
  end appends its new messages (a run that rewrote the history, e.g. compaction, rewrites it
  from the first message it changed), so saving costs the same in a long session as in a new one;
- ``lw_scopes``: one row a shared key: ``(app, "", key)`` for ``app:key``, ``(app, user, key)``
  for ``user:key``. A run writes only the keys it changed, so two users' runs changing different
  keys of the app both keep their changes.

A session is held by one run at a time: :meth:`SessionStore.begin` takes it (or raises
:class:`SessionBusy` naming the run that holds it), :meth:`SessionStore.commit` saves the run's
end and frees it, :meth:`SessionStore.release` frees it without saving.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from ..data.errors import ConfigurationError, LoopwrightError
from ..data.parts import Message

SessionKey = tuple[str, str, str]
"""``(app, user, session)``."""
SESSION_KEY = "temp:session"
"""The run state key that holds ``[app, user, session_id]`` of a run in a session (a ``temp:``
key: never saved with the session)."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
DELETED: Any = type("Deleted", (), {"__repr__": lambda self: "DELETED"})()
"""In :meth:`SessionStore.commit`'s ``scopes``: the key was removed (its row is deleted)."""


class SessionBusy(LoopwrightError, RuntimeError):
    """Another run holds this session (one run at a time on a session): wait for it to end (or
    resume it, if it is suspended), or, if the process that ran it died, free it with
    ``await sessions.release(key)``. Nothing was run and nothing changed."""


@dataclass(slots=True)
class SavedSession:
    """A session as a store holds it."""

    key: SessionKey
    messages: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    """The session's own state (unprefixed keys)."""
    scopes: dict[str, Any] = field(default_factory=dict)
    """The app's and the user's shared state, prefixed: ``{"app:x": ..., "user:y": ...}``."""
    agent: str | None = None
    """The agent that answered last (None: a new session)."""
    updated: float = 0.0

    @property
    def app(self) -> str:
        return self.key[0]

    @property
    def user(self) -> str:
        return self.key[1]

    @property
    def id(self) -> str:
        return self.key[2]


def check_key(key: object) -> SessionKey:
    """``key`` as a session key, or a one-line ConfigurationError saying what a key is."""
    if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) and k for k in key)):
        raise ConfigurationError(
            f"a session is named by three non-empty strings (app, user, session_id), got {key!r}; "
            'e.g. session=("my-app", "user-1", "s-42")'
        )
    return key


def _busy(key: SessionKey, holder: str) -> SessionBusy:
    return SessionBusy(
        f"session {key!r} is held by run {holder!r} (one run at a time on a session); wait for that run to end "
        "(or resume it, if it is suspended), or, if the process that ran it died, free the session: "
        "await sessions.release(key)"
    )


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions are kept (:class:`SQLiteSessions`, :class:`PostgresSessions`)."""

    async def begin(self, key: SessionKey, holder: str) -> SavedSession:
        """Hold the session for run ``holder`` (made if new) and return it; SessionBusy if
        another run holds it."""
        ...

    async def commit(
        self, key: SessionKey, holder: str, messages: list[Message], state: Mapping[str, Any],
        scopes: Mapping[str, Any], agent: str | None, kept: int = 0,
    ) -> None:  # fmt: skip
        """Save the end of run ``holder``: the session's messages (the first ``kept`` are stored
        already, unchanged: only the others are written) and own state, the ``app:`` and
        ``user:`` keys it changed (:data:`DELETED`: removed), and free the session."""
        ...

    async def release(self, key: SessionKey, holder: str | None = None) -> None:
        """Free the session without saving (only if ``holder`` holds it, when given)."""
        ...

    async def held_by(self, holder: str) -> SavedSession | None:
        """The session run ``holder`` holds (``scopes``: the values it started from), if any."""
        ...

    async def load(self, key: SessionKey) -> SavedSession | None: ...

    async def sessions(self, app: str, user: str) -> list[SavedSession]:
        """The user's sessions of the app, the latest first."""
        ...

    async def close(self) -> None: ...


def _scope_rows(key: SessionKey, scopes: Mapping[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """``(app, user or "", key, value JSON or None to delete)`` of each changed scoped key."""
    app, user, _ = key
    rows = []
    for name, value in scopes.items():
        scope, _, bare = name.partition(":")
        if scope not in ("app", "user") or not bare:
            raise ConfigurationError(f"{name!r} is not an app: or user: key; only those are shared")
        rows.append((app, user if scope == "user" else "", bare, None if value is DELETED else json.dumps(value)))
    return rows


def _history(bodies: list[tuple[str]]) -> list[Message]:
    """The messages of ``(body JSON,)`` rows, in one parse."""
    return _MESSAGES.validate_json("[" + ",".join(b for (b,) in bodies) + "]") if bodies else []


def _bodies(messages: list[Message], kept: int) -> list[tuple[int, str]]:
    """``(n, body JSON)`` of each message from ``kept`` on."""
    return [(n, m.model_dump_json()) for n, m in enumerate(messages[kept:], kept)]


def _prefixed(rows: list[tuple[str, str, str]]) -> dict[str, Any]:
    """``{"app:k"|"user:k": value}`` of ``(user or "", key, value JSON)`` rows."""
    return {f"{'user' if user else 'app'}:{name}": json.loads(value) for user, name, value in rows}


# ---------------------------------------------------------------- SQLite

_SQLITE_TABLES = (
    "CREATE TABLE IF NOT EXISTS lw_sessions (app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
    " state TEXT NOT NULL DEFAULT '{}', agent TEXT, holder TEXT, held TEXT, updated REAL NOT NULL,"
    " PRIMARY KEY (app, user, session))",
    "CREATE INDEX IF NOT EXISTS lw_sessions_holder ON lw_sessions (holder) WHERE holder IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS lw_session_messages (app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
    " n INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (app, user, session, n))",
    "CREATE TABLE IF NOT EXISTS lw_scopes (app TEXT NOT NULL, user TEXT NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, PRIMARY KEY (app, user, key))",
)
_SQLITE_WHERE = "app = ? AND user = ? AND session = ?"


class SQLiteSessions:
    """Sessions in the SQLite file ``path`` (a path, or a :class:`~loopwright.stores.SQLiteStore`
    whose file they share; ``":memory:"`` for a throwaway one). Its own connection, in WAL mode;
    each call is one short transaction on the calling thread."""

    def __init__(self, path: str | Path | Any) -> None:
        self.path = str(getattr(path, "path", path))
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self._lock = threading.Lock()
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        for statement in _SQLITE_TABLES:
            self._db.execute(statement)

    def _tx(self, fn: Any, *args: Any) -> Any:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(db, *args)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return out

    @staticmethod
    def _scopes(db: sqlite3.Connection, key: SessionKey) -> dict[str, Any]:
        rows = db.execute(
            "SELECT user, key, value FROM lw_scopes WHERE app = ? AND user IN ('', ?)", (key[0], key[1])
        ).fetchall()
        return _prefixed(rows)

    @staticmethod
    def _messages(db: sqlite3.Connection, key: SessionKey) -> list[Message]:
        return _history(db.execute(f"SELECT body FROM lw_session_messages WHERE {_SQLITE_WHERE} ORDER BY n", key)
                        .fetchall())  # fmt: skip

    async def begin(self, key: SessionKey, holder: str) -> SavedSession:
        return self._tx(self._begin, check_key(key), holder)  # type: ignore[no-any-return]

    def _begin(self, db: sqlite3.Connection, key: SessionKey, holder: str) -> SavedSession:
        db.execute("INSERT OR IGNORE INTO lw_sessions (app, user, session, updated) VALUES (?, ?, ?, ?)",
                   (*key, time.time()))  # fmt: skip
        row = db.execute(f"SELECT state, agent, holder, updated FROM lw_sessions WHERE {_SQLITE_WHERE}", key).fetchone()
        if row[2] is not None and row[2] != holder:
            raise _busy(key, row[2])
        scopes = self._scopes(db, key)
        db.execute(f"UPDATE lw_sessions SET holder = ?, held = ? WHERE {_SQLITE_WHERE}",
                   (holder, json.dumps(scopes), *key))  # fmt: skip
        return SavedSession(key, self._messages(db, key), json.loads(row[0]), scopes, row[1], row[3])

    async def commit(
        self, key: SessionKey, holder: str, messages: list[Message], state: Mapping[str, Any],
        scopes: Mapping[str, Any], agent: str | None, kept: int = 0,
    ) -> None:  # fmt: skip
        bodies = _bodies(messages, kept)
        self._tx(self._commit, key, holder, kept, bodies, json.dumps(dict(state)), _scope_rows(key, scopes), agent)

    def _commit(
        self, db: sqlite3.Connection, key: SessionKey, holder: str, kept: int, bodies: list[tuple[int, str]],
        state: str, rows: list[tuple[str, str, str, str | None]], agent: str | None,
    ) -> None:  # fmt: skip
        found = db.execute(f"SELECT holder FROM lw_sessions WHERE {_SQLITE_WHERE}", key).fetchone()
        if found is None or found[0] != holder:
            raise _busy(key, found[0] if found else "(none: the session was removed)")
        for app, user, name, value in rows:
            if value is None:
                db.execute("DELETE FROM lw_scopes WHERE app = ? AND user = ? AND key = ?", (app, user, name))
            else:
                db.execute("INSERT OR REPLACE INTO lw_scopes VALUES (?, ?, ?, ?)", (app, user, name, value))
        db.execute(f"DELETE FROM lw_session_messages WHERE {_SQLITE_WHERE} AND n >= ?", (*key, kept))
        db.executemany("INSERT INTO lw_session_messages VALUES (?, ?, ?, ?, ?)", [(*key, n, b) for n, b in bodies])
        db.execute(
            "UPDATE lw_sessions SET state = ?, agent = ?, holder = NULL, held = NULL, updated = ?"
            f" WHERE {_SQLITE_WHERE}",
            (state, agent, time.time(), *key),
        )

    async def release(self, key: SessionKey, holder: str | None = None) -> None:
        with self._lock:
            self._db.execute(
                f"UPDATE lw_sessions SET holder = NULL, held = NULL WHERE {_SQLITE_WHERE}"
                " AND (? IS NULL OR holder = ?)",
                (*check_key(key), holder, holder),
            )

    async def held_by(self, holder: str) -> SavedSession | None:
        with self._lock:
            row = self._db.execute(
                "SELECT app, user, session, state, agent, held, updated FROM lw_sessions WHERE holder = ?", (holder,)
            ).fetchone()
            if row is None:
                return None
            key: SessionKey = (row[0], row[1], row[2])
            return SavedSession(key, self._messages(self._db, key), json.loads(row[3]), json.loads(row[5] or "{}"),
                                row[4], row[6])  # fmt: skip

    async def load(self, key: SessionKey) -> SavedSession | None:
        key = check_key(key)
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                row = db.execute(f"SELECT state, agent, updated FROM lw_sessions WHERE {_SQLITE_WHERE}", key).fetchone()
                if row is None:
                    return None
                return SavedSession(key, self._messages(db, key), json.loads(row[0]), self._scopes(db, key), row[1],
                                    row[2])  # fmt: skip
            finally:
                db.execute("COMMIT")

    async def sessions(self, app: str, user: str) -> list[SavedSession]:
        with self._lock:
            ids = self._db.execute(
                "SELECT session FROM lw_sessions WHERE app = ? AND user = ? ORDER BY updated DESC", (app, user)
            ).fetchall()
        found = [await self.load((app, user, sid)) for (sid,) in ids]
        return [s for s in found if s is not None]

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteSessions({self.path!r})"


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
        self._made = False
        self._making = asyncio.Lock()

    async def _pool(self) -> Any:
        pool = await self._store._ready()
        if not self._made:
            async with self._making:
                if not self._made:
                    async with pool.connection() as conn, conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))
                        for statement in _PG_TABLES:
                            await conn.execute(statement)
                    self._made = True
        return pool

    @staticmethod
    async def _scopes(conn: Any, key: SessionKey) -> dict[str, Any]:
        cur = await conn.execute(
            "SELECT user_id, key, value FROM lw_scopes WHERE app = %s AND user_id IN ('', %s)", (key[0], key[1])
        )
        return _prefixed(await cur.fetchall())

    @staticmethod
    async def _messages(conn: Any, key: SessionKey) -> list[Message]:
        cur = await conn.execute(f"SELECT body FROM lw_session_messages WHERE {_PG_WHERE} ORDER BY n", key)
        return _history(await cur.fetchall())

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
                raise _busy(key, row[2])
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
        bodies = _bodies(messages, kept)
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute(f"SELECT holder FROM lw_sessions WHERE {_PG_WHERE} FOR UPDATE", key)
            found = await cur.fetchone()
            if found is None or found[0] != holder:
                raise _busy(key, found[0] if found else "(none: the session was removed)")
            for app, user, name, value in _scope_rows(key, scopes):
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


def open_sessions(target: str | Path | Any) -> SessionStore:
    """The session store for ``target``: a run store (its file or database), a
    ``postgresql://`` URL, or a SQLite path (or ``sqlite:///path``)."""
    if isinstance(target, str) and target.startswith(("postgresql://", "postgres://")):
        return PostgresSessions(target)
    if type(target).__name__ == "PostgresStore":
        return PostgresSessions(target)
    if isinstance(target, str) and target.startswith("sqlite://"):
        target = target.removeprefix("sqlite://").removeprefix("/")
    return SQLiteSessions(target)


__all__ = [
    "DELETED",
    "SESSION_KEY",
    "PostgresSessions",
    "SQLiteSessions",
    "SavedSession",
    "SessionBusy",
    "SessionKey",
    "SessionStore",
    "check_key",
    "open_sessions",
]
