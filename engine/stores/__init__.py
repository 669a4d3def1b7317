"""Durable runs: every transition kept, resume after a crash, approvals honoured once.

::

    runner = Runner(agent, store=SQLiteStore("runs.db"))
    await runner.run(text, run_id="r1")             # every transition kept, written before each side effect
    await runner.resume("r1")                        # after a crash, in any process
    await runner.resume("r1", {"c1": approve()})     # a suspended run; the suspension is claimed once

:class:`SQLiteStore` (stdlib ``sqlite3``) is the embedded default; :class:`PostgresStore` runs on
psycopg 3 (``pip install 'loopwright[postgres]'``). :func:`open_store` opens either from a URL
(``sqlite:///runs.db``, ``postgresql://...``). :mod:`loopwright.stores.base` says what is kept,
:mod:`loopwright.durable.checkpoint` how checkpoints and resumes work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..data.errors import ConfigurationError as _ConfigurationError
from ..data.exports import claim_own as _claim_own
from ..data.exports import lazy_exports as _lazy_exports
from .base import STORE_SCHEMA, Checkpoint, RunStore, RunSummary, SavedRun, StoreWrapper
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .memory import MemoryHit as MemoryHit
    from .memory import MemoryService as MemoryService
    from .memory import PostgresMemory as PostgresMemory
    from .memory import SQLiteMemory as SQLiteMemory
    from .postgres import PostgresStore as PostgresStore
    from .session_base import SavedSession as SavedSession
    from .session_base import SessionBusy as SessionBusy
    from .session_base import SessionKey as SessionKey
    from .session_base import SessionStore as SessionStore
    from .sessions import SQLiteSessions as SQLiteSessions
    from .sessions import session_of as session_of
    from .sessions_postgres import PostgresSessions as PostgresSessions


async def open_store(url: str) -> RunStore:
    """The store at ``url``: ``sqlite:///path/to/runs.db`` (or a plain file path) or
    ``postgresql://user@host/db``."""
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return await PostgresStore.open(url)
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        path = path.removeprefix("/")  # sqlite:///runs.db is relative, sqlite:////abs/runs.db absolute
        if not path:
            raise _ConfigurationError(f"no file in {url!r}; write sqlite:///runs.db (or sqlite:////abs/path.db)")
        return SQLiteStore(path)
    if "://" in url:
        raise _ConfigurationError(f"unknown store URL {url!r}; use sqlite:///runs.db or postgresql://user@host/db")
    return SQLiteStore(url)


_LAZY = {
    "PostgresStore": ".postgres",
    "MemoryHit": ".memory",
    "MemoryService": ".memory",
    "PostgresMemory": ".memory",
    "SQLiteMemory": ".memory",
    "PostgresSessions": ".sessions_postgres",
    "SQLiteSessions": ".sessions",
    "SavedSession": ".session_base",
    "SessionBusy": ".session_base",
    "SessionKey": ".session_base",
    "SessionStore": ".session_base",
    "session_of": ".sessions",
}
"""Imported on first use (PostgreSQL's driver, sessions and memory are not needed by every run)."""

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY)


__all__ = [
    "STORE_SCHEMA",
    "Checkpoint",
    "MemoryHit",
    "MemoryService",
    "PostgresMemory",
    "PostgresSessions",
    "PostgresStore",
    "RunStore",
    "RunSummary",
    "SQLiteMemory",
    "SQLiteSessions",
    "SQLiteStore",
    "SavedRun",
    "SavedSession",
    "SessionBusy",
    "SessionKey",
    "SessionStore",
    "StoreWrapper",
    "open_store",
    "session_of",
]

_claim_own(__name__)
