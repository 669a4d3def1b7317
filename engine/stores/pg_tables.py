"""The tables of a PostgreSQL store, made on first use: :class:`TablesOnce` runs a store's
``CREATE ... IF NOT EXISTS`` statements once per store object, in one transaction holding a
transaction-level advisory lock (so two processes starting on one empty database do not race
on the catalog), and hands out the run store's pool. Used by
:class:`~loopwright.stores.memory.PostgresMemory` and
:class:`~loopwright.stores.sessions.PostgresSessions`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .postgres import PostgresStore


class TablesOnce:
    """``statements`` (``CREATE TABLE/INDEX IF NOT EXISTS ...``) run once, under the advisory
    lock ``lock`` (a number of the store's own)."""

    __slots__ = ("_lock", "_made", "_making", "_statements")

    def __init__(self, statements: Sequence[str], lock: int) -> None:
        self._statements = tuple(statements)
        self._lock = lock
        self._made = False
        self._making = asyncio.Lock()

    async def pool(self, store: PostgresStore) -> Any:
        """``store``'s pool, the tables made (the first call makes them; the others wait for it)."""
        pool = await store._ready()
        if not self._made:
            async with self._making:
                if not self._made:
                    async with pool.connection() as conn, conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
                        for statement in self._statements:
                            await conn.execute(statement)
                    self._made = True
        return pool
