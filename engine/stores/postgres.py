"""PostgresStore: durable runs in PostgreSQL, on psycopg 3 (async, pooled).

``pip install 'loopwright[postgres]'``. ``PostgresStore(dsn)`` opens its pool and checks (or
creates, or migrates) its tables on first use; ``await PostgresStore.open(dsn)`` does it at once.
The tables are the SQLite store's (:mod:`loopwright.stores.sqlite`), prefixed ``lw_``: a
checkpoint is one ``INSERT`` into the run's log (one round trip, its own transaction: the
pooled connections are in autocommit mode) and the log's key ``(run_id, version)`` makes two
workers on two machines safe: the second to write a version gets :class:`~loopwright.data.errors.RunBusy`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

from ..data.errors import ConfigurationError, RunBusy
from ..data.signing import row_signer
from .base import (
    STORE_SCHEMA,
    Checkpoint,
    RunSummary,
    SavedRun,
    check_claim,
    check_log,
    check_result,
    check_user,
    check_user_id,
    claim_mac,
    decode_bodies,
    log_mac,
    merge_heads,
    result_mac,
    user_mac,
    user_taken,
)

try:
    import psycopg
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ConfigurationError(
        "PostgresStore needs psycopg 3 and psycopg-pool: pip install 'loopwright[postgres]'"
    ) from exc

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE lw_log (
            run_id TEXT NOT NULL, version BIGINT NOT NULL, agent TEXT NOT NULL, stage TEXT NOT NULL,
            outcome TEXT, seq BIGINT NOT NULL, owner TEXT NOT NULL, updated DOUBLE PRECISION NOT NULL,
            head BYTEA NOT NULL, body BYTEA NOT NULL, PRIMARY KEY (run_id, version))""",
        "CREATE TABLE lw_results (run_id TEXT NOT NULL, call_id TEXT NOT NULL, seq BIGINT NOT NULL,"
        " body BYTEA NOT NULL, PRIMARY KEY (run_id, call_id))",
        "CREATE TABLE lw_claims (run_id TEXT NOT NULL, suspension TEXT NOT NULL, owner TEXT NOT NULL,"
        " decisions BYTEA NOT NULL, claimed DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, suspension))",
    ),
    2: (),  # the rows' format (heads of the changed fields, events as lists): the tables are the same
    3: (),  # SQLite's log is keyed by one integer (its B-tree appends); these tables are the same
    4: (  # each row's signature, when the store has a key (loopwright.data.signing)
        "ALTER TABLE lw_log ADD COLUMN mac BYTEA",
        "ALTER TABLE lw_results ADD COLUMN mac BYTEA",
        "ALTER TABLE lw_claims ADD COLUMN mac BYTEA",
    ),
    5: (  # the user each run belongs to, beside it (never read from its state)
        "CREATE TABLE lw_users (run_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, mac BYTEA)",
    ),
}
_LOCK = 0x6C77_7374  # the advisory lock held while the tables are created or migrated


class PostgresStore:
    """Durable runs in the PostgreSQL database at ``dsn`` (``postgresql://user@host:port/db``).

    Each commit waits for the server to flush it to disk (PostgreSQL's default). With
    ``synchronous_commit=False`` the store's sessions do not wait (``SET synchronous_commit =
    off``): a commit then survives this process dying, as SQLite's WAL does, but a crash of the
    database server or its machine may lose the last few hundred milliseconds of checkpoints
    (never a torn one); a resume then repeats that work.

    With ``key`` (bytes), every row is signed and a row not signed with it is refused
    (:mod:`loopwright.data.signing`); without, the store trusts its rows: whoever can write the
    tables can change a resumed run."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        synchronous_commit: bool = True,
        read_only: bool = False,
        key: bytes | None = None,
    ) -> None:
        self._signer = row_signer(key)
        self.url = dsn
        self._read_only = read_only
        """Read an existing store only (``loopwright runs list``): read-only sessions, no table
        made; a database without the store's tables is a ConfigurationError."""
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._sizes = (min_size, max_size)
        # one statement per call, each its own transaction: autocommit saves the COMMIT round trip
        self._options: dict[str, Any] = {"autocommit": True}
        settings = ["-c synchronous_commit=off"] if not synchronous_commit else []
        settings += ["-c default_transaction_read_only=on"] if read_only else []
        if settings:
            self._options["options"] = " ".join(settings)
        self._opening: asyncio.Lock | None = None

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        synchronous_commit: bool = True,
        read_only: bool = False,
        key: bytes | None = None,
    ) -> PostgresStore:
        store = cls(
            dsn,
            min_size=min_size,
            max_size=max_size,
            synchronous_commit=synchronous_commit,
            read_only=read_only,
            key=key,
        )
        await store._ready()
        return store

    async def _ready(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        pool = self._pool
        if pool is not None:
            return pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                pool = AsyncConnectionPool(
                    self.url, min_size=self._sizes[0], max_size=self._sizes[1], kwargs=self._options, open=False
                )
                try:
                    await _probe(self.url, self._options)
                    await pool.open(wait=True, timeout=10)
                    await (_check_schema(pool, self.url) if self._read_only else _migrate(pool, self.url))
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
        assert self._pool is not None
        return self._pool

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        cp = checkpoint
        pool = await self._ready()
        async with pool.connection() as conn:
            mac = None if self._signer is None else log_mac(self._signer, cp, version + 1)
            cur = await conn.execute(
                "INSERT INTO lw_log VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (cp.run_id, version + 1, cp.agent, cp.stage, cp.outcome, cp.seq, owner, time.time(), cp.head, cp.body,
                 mac),
            )  # fmt: skip
            if cur.rowcount == 1:
                return version + 1
        if version == 0:
            raise ConfigurationError(
                f"run id {cp.run_id!r} is already in the store; resume it with runner.resume({cp.run_id!r}) "
                "or start the run with a new run_id"
            )
        raise RunBusy(f"run {cp.run_id!r} was taken over by another worker; this worker stops running it")

    async def take(self, run_id: str, version: int, owner: str) -> int:
        pool = await self._ready()
        async with pool.connection() as conn:
            if self._signer is None:
                cur = await conn.execute(
                    "INSERT INTO lw_log SELECT run_id, version + 1, agent, stage, outcome, seq, %s, %s, head, %s, NULL"
                    " FROM lw_log WHERE run_id = %s AND version = %s ON CONFLICT DO NOTHING",
                    (owner, time.time(), b"", run_id, version),
                )
            else:  # the new row signed for its version
                cur = await conn.execute(
                    "SELECT agent, stage, outcome, seq, head FROM lw_log WHERE run_id = %s AND version = %s",
                    (run_id, version),
                )
                row = await cur.fetchone()
                if row is not None:
                    cp = Checkpoint(run_id, row[0], row[1], row[2], row[3], bytes(row[4]), b"")
                    cur = await conn.execute(
                        "INSERT INTO lw_log VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (run_id, version + 1, cp.agent, cp.stage, cp.outcome, cp.seq, owner, time.time(), cp.head,
                         b"", log_mac(self._signer, cp, version + 1)),
                    )  # fmt: skip
            if cur.rowcount == 1:
                return version + 1
        raise RunBusy(f"run {run_id!r} was resumed by another worker first; this worker does not run it")

    async def rewrite_heads(self, run_id: str, holding: bytes, rewrite: Callable[[bytes], bytes]) -> int:
        """Replace each head of the ended run ``run_id`` that holds ``holding`` with
        ``rewrite(head)`` (signed again, with a key), in one transaction; how many were."""
        pool = await self._ready()
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT version, agent, stage, outcome, seq, head, body FROM lw_log"
                " WHERE run_id = %s AND position(%s::bytea in head) > 0 FOR UPDATE",
                (run_id, holding),
            )
            rows = await cur.fetchall()
            for version, agent, stage, outcome, seq, head, body in rows:
                cp = Checkpoint(run_id, agent, stage, outcome, seq, rewrite(bytes(head)), bytes(body))
                mac = None if self._signer is None else log_mac(self._signer, cp, version)
                await conn.execute(
                    "UPDATE lw_log SET head = %s, mac = %s WHERE run_id = %s AND version = %s",
                    (cp.head, mac, run_id, version),
                )
        return len(rows)

    async def set_user(self, run_id: str, user: str) -> None:
        """Keep ``user`` as the one run ``run_id`` belongs to, once, before its first checkpoint
        (:class:`~loopwright.stores.base.RunStore`; signed, with a key)."""
        check_user_id(user)
        mac = None if self._signer is None else user_mac(self._signer, run_id, user)
        pool = await self._ready()
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute("SELECT 1 FROM lw_log WHERE run_id = %s LIMIT 1", (run_id,))
            if await cur.fetchone() is not None:
                raise user_taken(run_id)
            cur = await conn.execute(
                "INSERT INTO lw_users VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", (run_id, user, mac)
            )
            if cur.rowcount == 1:
                return
            cur = await conn.execute("SELECT user_id FROM lw_users WHERE run_id = %s", (run_id,))
            row = await cur.fetchone()
        if row is None or row[0] != user:
            raise user_taken(run_id)

    async def load(self, run_id: str) -> SavedRun | None:
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT l.agent, l.stage, l.outcome, l.version, l.owner, l.updated, l.head, l.body, l.mac, l.seq,"
                " u.user_id, u.mac FROM lw_log AS l LEFT JOIN lw_users AS u USING (run_id)"
                " WHERE l.run_id = %s ORDER BY l.version",
                (run_id,),
            )
            rows = await cur.fetchall()
        if not rows:
            return None
        user = rows[-1][10]
        if self._signer is not None:
            check_log(self._signer, run_id, [(r[3], r[0], r[1], r[2], r[9], r[6], r[7], r[8]) for r in rows])
            if user is not None:
                check_user(self._signer, run_id, user, rows[-1][11])
        agent, stage, outcome, version, owner, updated = rows[-1][:6]
        heads = [bytes(r[6]) for r in rows]
        head = merge_heads(heads)
        messages, trace, _events = decode_bodies([bytes(r[7]) for r in rows], run_id, events=False, heads=heads)
        return SavedRun(run_id, agent, stage, outcome, version, owner, updated, head, messages, trace, user)

    async def claim(self, run_id: str, suspension: str, owner: str, decisions: bytes) -> tuple[str, bytes] | None:
        pool = await self._ready()
        async with pool.connection() as conn, conn.cursor() as cur:
            mac = None if self._signer is None else claim_mac(self._signer, run_id, suspension, owner, decisions)
            await cur.execute(
                "INSERT INTO lw_claims VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (run_id, suspension, owner, decisions, time.time(), mac),
            )
            if cur.rowcount == 1:
                return None
            await cur.execute(
                "SELECT owner, decisions, mac FROM lw_claims WHERE run_id = %s AND suspension = %s",
                (run_id, suspension),
            )
            row = await cur.fetchone()
        assert row is not None
        if self._signer is not None:
            check_claim(self._signer, run_id, suspension, row[0], bytes(row[1]), row[2])
        return row[0], bytes(row[1])

    async def save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        mac = None if self._signer is None else result_mac(self._signer, run_id, call_id, seq, body)
        pool = await self._ready()
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO lw_results VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, call_id)"
                " DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body, mac = EXCLUDED.mac",
                (run_id, call_id, seq, body, mac),
            )

    async def results(self, run_id: str, after_seq: int) -> dict[str, bytes]:
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT call_id, seq, body, mac FROM lw_results WHERE run_id = %s AND seq > %s", (run_id, after_seq)
            )
            rows = await cur.fetchall()
        if self._signer is not None:
            for call_id, seq, body, mac in rows:
                check_result(self._signer, run_id, call_id, seq, bytes(body), mac)
        return {call_id: bytes(body) for call_id, _seq, body, _mac in rows}

    async def events(self, run_id: str) -> list[bytes]:
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT head, body, version, agent, stage, outcome, seq, mac FROM lw_log WHERE run_id = %s"
                " ORDER BY version",
                (run_id,),
            )
            rows = await cur.fetchall()
        if self._signer is not None and rows:
            check_log(
                self._signer, run_id, [(r[2], r[3], r[4], r[5], r[6], bytes(r[0]), bytes(r[1]), r[7]) for r in rows]
            )
        events = decode_bodies([bytes(r[1]) for r in rows], run_id, heads=[bytes(r[0]) for r in rows])[2]
        return [json.dumps(e).encode() for e in events]

    async def children(self, run_id: str) -> list[str]:
        """The ids of the runs under ``run_id`` (``run_id + "."`` and more: a workflow's children
        at every depth), sorted (by code point, not by the database's collation)."""
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT run_id FROM lw_log WHERE run_id LIKE %s ESCAPE '\\'", (_escaped(run_id) + ".%",)
            )
            rows = await cur.fetchall()
        return sorted(row[0] for row in rows)

    async def runs(self, limit: int = 100) -> list[RunSummary]:
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT ON (run_id) run_id, agent, stage, outcome, updated, version FROM lw_log"
                " ORDER BY run_id, version DESC",
            )
            rows = await cur.fetchall()
        return sorted((RunSummary(*row) for row in rows), key=lambda r: -r.updated)[:limit]

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"


def _escaped(text: str) -> str:
    """``text`` in a LIKE pattern as itself: its ``\\``, ``%`` and ``_`` escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def _probe(url: str, options: dict[str, Any]) -> None:
    """One connection before the pool's: an error the server answers with (no such database,
    a bad password) is a ConfigurationError at once, where the pool would retry it until its
    timeout; a server that does not answer yet is left to the pool's retries."""
    try:
        conn = await AsyncConnection.connect(url, **options)
    except psycopg.OperationalError as exc:
        said = " ".join(str(exc).split())
        if "FATAL:" not in said and "password" not in said:
            return
        raise ConfigurationError(f"cannot connect to the run store {_redacted(url)}: {said}") from None
    except psycopg.ProgrammingError as exc:  # a malformed URL
        raise ConfigurationError(f"bad PostgreSQL URL {_redacted(url)}: {exc}") from None
    await conn.close()


def _redacted(url: str) -> str:
    """``url`` without its password."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


async def _check_schema(pool: AsyncConnectionPool[AsyncConnection[Any]], url: str) -> None:
    """The database holds a store this loopwright reads (for a read-only store: nothing is made)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT to_regclass('lw_meta') IS NOT NULL")
        row = await cur.fetchone()
        if not (row and row[0]):
            raise ConfigurationError(f"{_redacted(url)} is not a loopwright run store (it has no lw_meta table)")
        cur = await conn.execute("SELECT value FROM lw_meta WHERE key = 'schema_version'")
        row = await cur.fetchone()
    found = int(row[0]) if row else 0
    if found != STORE_SCHEMA:
        raise ConfigurationError(
            f"the run store {_redacted(url)} has schema version {found}, this loopwright reads {STORE_SCHEMA}; "
            "open it with a Runner of the loopwright that matches it"
        )


async def _migrate(pool: AsyncConnectionPool[AsyncConnection[Any]], url: str) -> None:
    """Bring the tables to STORE_SCHEMA. Tables already there are only read: a database the
    store may not write (read-only) opens, its runs can be listed and loaded (a write fails then)."""
    async with pool.connection() as conn:
        if await _schema_version(conn) == STORE_SCHEMA:
            return
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS lw_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        found = await _schema_version(conn)
        if found > STORE_SCHEMA:
            raise ConfigurationError(
                f"the run store at {url} has schema version {found}, newer than this loopwright's {STORE_SCHEMA}; "
                "open it with the loopwright version that wrote it"
            )
        for version in range(found + 1, STORE_SCHEMA + 1):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement)
        await conn.execute(
            "INSERT INTO lw_meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(STORE_SCHEMA),),
        )


async def _schema_version(conn: AsyncConnection[Any]) -> int:
    """The tables' version (0: none yet)."""
    cur = await conn.execute("SELECT to_regclass('lw_meta') IS NOT NULL")
    exists = await cur.fetchone()
    if not exists or not exists[0]:
        return 0
    cur = await conn.execute("SELECT value FROM lw_meta WHERE key = 'schema_version'")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


__all__ = ["PostgresStore"]
