"""Durable runs: every transition kept, resume after a crash, approvals honoured once.

::

    runner = Runner(agent, store=SQLiteStore("runs.db"))
    await runner.run(text, run_id="r1")             # every transition kept, written before each side effect
    await runner.resume("r1")                        # after a crash, in any process
    await runner.resume("r1", {"c1": approve()})     # a suspended run; the suspension is claimed once

:class:`SQLiteStore` (stdlib ``sqlite3``) is the embedded default; :class:`PostgresStore` runs on
psycopg 3 (``pip install 'loopwright[postgres]'``). :func:`open_store` opens either from a URL
(``sqlite:///runs.db``, ``postgresql://...``). :mod:`loopwright.stores.base` says what is kept,
:mod:`loopwright.stores.durable` how checkpoints and resumes work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..data.errors import ConfigurationError
from .base import STORE_SCHEMA, Checkpoint, RunStore, RunSummary, SavedRun, StoreWrapper
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore


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
            raise ConfigurationError(f"no file in {url!r}; write sqlite:///runs.db (or sqlite:////abs/path.db)")
        return SQLiteStore(path)
    if "://" in url:
        raise ConfigurationError(f"unknown store URL {url!r}; use sqlite:///runs.db or postgresql://user@host/db")
    return SQLiteStore(url)


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)


__all__ = [
    "STORE_SCHEMA",
    "Checkpoint",
    "PostgresStore",
    "RunStore",
    "RunSummary",
    "SQLiteStore",
    "SavedRun",
    "StoreWrapper",
    "open_store",
]
