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

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..data.parts import Message
from .session_base import (
    DELETED,
    RunSession,
    SavedSession,
    SessionBusy,
    SessionKey,
    SessionStore,
    busy,
    check_key,
    history,
    message_rows,
    prefixed,
    scope_rows,
    session_of,
)
from .sessions_postgres import PostgresSessions

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
        return prefixed(rows)

    @staticmethod
    def _messages(db: sqlite3.Connection, key: SessionKey) -> list[Message]:
        return history(db.execute(f"SELECT body FROM lw_session_messages WHERE {_SQLITE_WHERE} ORDER BY n", key)
                        .fetchall())  # fmt: skip

    async def begin(self, key: SessionKey, holder: str) -> SavedSession:
        return self._tx(self._begin, check_key(key), holder)  # type: ignore[no-any-return]

    def _begin(self, db: sqlite3.Connection, key: SessionKey, holder: str) -> SavedSession:
        db.execute("INSERT OR IGNORE INTO lw_sessions (app, user, session, updated) VALUES (?, ?, ?, ?)",
                   (*key, time.time()))  # fmt: skip
        row = db.execute(f"SELECT state, agent, holder, updated FROM lw_sessions WHERE {_SQLITE_WHERE}", key).fetchone()
        if row[2] is not None and row[2] != holder:
            raise busy(key, row[2])
        scopes = self._scopes(db, key)
        db.execute(f"UPDATE lw_sessions SET holder = ?, held = ? WHERE {_SQLITE_WHERE}",
                   (holder, json.dumps(scopes), *key))  # fmt: skip
        return SavedSession(key, self._messages(db, key), json.loads(row[0]), scopes, row[1], row[3])

    async def commit(
        self, key: SessionKey, holder: str, messages: list[Message], state: Mapping[str, Any],
        scopes: Mapping[str, Any], agent: str | None, kept: int = 0,
    ) -> None:  # fmt: skip
        bodies = message_rows(messages, kept)
        self._tx(self._commit, key, holder, kept, bodies, json.dumps(dict(state)), scope_rows(key, scopes), agent)

    def _commit(
        self, db: sqlite3.Connection, key: SessionKey, holder: str, kept: int, bodies: list[tuple[int, str]],
        state: str, rows: list[tuple[str, str, str, str | None]], agent: str | None,
    ) -> None:  # fmt: skip
        found = db.execute(f"SELECT holder FROM lw_sessions WHERE {_SQLITE_WHERE}", key).fetchone()
        if found is None or found[0] != holder:
            raise busy(key, found[0] if found else "(none: the session was removed)")
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
    "PostgresSessions",
    "RunSession",
    "SQLiteSessions",
    "SavedSession",
    "SessionBusy",
    "SessionKey",
    "SessionStore",
    "check_key",
    "open_sessions",
    "session_of",
]
