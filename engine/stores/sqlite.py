"""SQLiteStore: durable runs in one SQLite file (the stdlib ``sqlite3``), the embedded default.

The file is opened in WAL mode with ``synchronous=NORMAL``: a checkpoint is one insert into
the run's log (:mod:`loopwright.stores.base`; a rowid table keyed by ``run_no << 32 |
version``, ``lw_runs`` numbering the runs), its own transaction, which readers never block. A
committed checkpoint survives the process being killed (``kill -9``); a power cut may lose the
last few (WAL's NORMAL mode; pass ``synchronous="FULL"`` to fsync every commit). The WAL is
folded back into the file on the store's own thread (:class:`Folder`), not in a commit.

By default each write runs on the calling thread: a WAL commit takes tens of microseconds,
less than a hop to a worker thread and back. ``SQLiteStore(path, thread=True)`` runs every
statement on one worker thread instead, off the event loop (for slow disks or network file
systems).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..data.errors import ConfigurationError, RunBusy
from ..data.signing import row_signer
from .base import (
    STORE_SCHEMA,
    Checkpoint,
    RunSummary,
    SavedRun,
    check_log,
    check_result,
    check_user,
    check_user_id,
    decode_bodies,
    log_mac,
    merge_heads,
    result_mac,
    under_prefix,
)
from .sqlite_rows import append_checkpoint, claim_suspension, keep_user, log_span, rewrite_heads, rollback
from .sqlite_schema import MIGRATIONS, open_existing
from .sqlite_wal import FOLD_EVERY, FOLD_LIMIT, Folder, truncate_wal, wal_size, zeroing

T = TypeVar("T")


class SQLiteStore:
    """Durable runs in the SQLite file ``path`` (created if missing; ``":memory:"`` for a
    throwaway store). See the module docstring for durability and threading. ``read_only=True``
    opens an existing store to read it (``loopwright runs list``): the file is not made, changed
    or migrated, and one that is not a loopwright store is a ConfigurationError. With ``key``
    (bytes), every row is signed and a row not signed with it is refused (:mod:`loopwright.data.signing`);
    without, the store trusts its rows: whoever can write the file can change a resumed run."""

    def __init__(
        self,
        path: str | Path,
        *,
        thread: bool = False,
        synchronous: str = "NORMAL",
        read_only: bool = False,
        key: bytes | None = None,
    ) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self._signer = row_signer(key)
        """Rows are signed with it, and refused unless signed with it (None: trusted as they are)."""
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="loopwright-sqlite") if thread else None
        self.inline = not thread
        """Writes run on the caller's thread (``save_now`` and ``save_result_now`` may be called)."""
        self._lock = threading.Lock()
        self._run_nos: dict[str, int] = {}
        """The numbers of the runs under way (a run's log keys are ``run_no << 32 | version``), as
        looked up or made; a run that stops (ends, suspends, pauses) is forgotten here."""
        self._folder: Folder | None = None
        if read_only:  # an existing store, to read: no file made, no table added, no switch to WAL
            self._db = open_existing(self.path)
            self._cursor = self._db.cursor()
            return
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        db = self._db
        self._cursor = db.cursor()
        """The checkpoints' and results' inserts go through this one cursor (not one made per call)."""
        self._writes = 0
        try:
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._migrate()
            if self.path != ":memory:":  # the WAL is folded back on the folder's thread, not in a commit
                self._wal = f"{self.path}-wal"
                self._wal_limit = FOLD_LIMIT * (db.execute("PRAGMA page_size").fetchone()[0] + 24)
                db.execute("PRAGMA wal_autocheckpoint=0")
                db.execute(f"PRAGMA journal_size_limit={self._wal_limit}")
        except BaseException:
            self._cursor.close()
            db.close()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            raise
        if self.path != ":memory:":
            self._folder = Folder(self.path, synchronous.upper())
            weakref.finalize(self, self._folder.halt)  # a store dropped unclosed stops its folder too

    # ------------------------------------------------------------------ schema

    def _migrate(self) -> None:
        """Bring the tables to STORE_SCHEMA. Tables already there are only read: a store the
        process may not write opens (its runs can be listed and loaded; a write fails then)."""
        db = self._db
        if self._schema_version() == STORE_SCHEMA:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS lw_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = self._schema_version()
            if found > STORE_SCHEMA:
                raise ConfigurationError(
                    f"the run store {self.path} has schema version {found}, newer than this loopwright's "
                    f"{STORE_SCHEMA}; open it with the loopwright version that wrote it"
                )
            for version in range(found + 1, STORE_SCHEMA + 1):
                for statement in MIGRATIONS[version]:
                    db.execute(statement)
            db.execute("INSERT OR REPLACE INTO lw_meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA),))
            db.execute("COMMIT")
        except BaseException:
            rollback(db)
            raise

    def _schema_version(self) -> int:
        """The tables' version (0: none yet)."""
        try:
            row = self._db.execute("SELECT value FROM lw_meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:  # no lw_meta yet
            return 0
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ plumbing

    async def _do(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            return self._locked(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._locked, fn, *args)

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            return fn(*args)

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            out = fn(db, *args)
        except BaseException:
            rollback(db)
            raise
        db.execute("COMMIT")
        self._wrote()
        return out

    # ------------------------------------------------------------------ RunStore

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        if self._pool is None:  # the hot path: inline, no extra await
            with self._lock:
                return self._save(checkpoint, version, owner)
        return await self._do(self._save, checkpoint, version, owner)

    def save_now(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        """``save`` on the calling thread, without a coroutine (a store made with ``thread=False``:
        a runner's checkpoints call it directly)."""
        with self._lock:
            return self._save(checkpoint, version, owner)

    def _save(self, cp: Checkpoint, version: int, owner: str) -> int:
        """One insert, its own transaction: version ``version + 1`` of the run (the first also
        numbers the run)."""
        run_no = self._run_nos.get(cp.run_id) if version else None
        if run_no is None:
            return self._write(self._first, cp, version, owner)
        signer = self._signer
        append_checkpoint(
            self._cursor, run_no, cp, version, owner, None if signer is None else log_mac(signer, cp, version + 1)
        )
        if cp.outcome is not None:  # the run stopped: its number is looked up again if it resumes
            del self._run_nos[cp.run_id]
        self._wrote()
        return version + 1

    def _first(self, db: sqlite3.Connection, cp: Checkpoint, version: int, owner: str) -> int:
        """A run's first checkpoint (or the first this store object writes of it)."""
        if version == 0:
            try:
                run_no = db.execute("INSERT INTO lw_runs (run_id) VALUES (?)", (cp.run_id,)).lastrowid
            except sqlite3.IntegrityError:  # a run in the store, or numbered by tool results kept before it
                run_no = self._run_no(cp.run_id)  # (durability="exit" writes its first checkpoint at the end)
                assert run_no is not None
                if db.execute("SELECT 1 FROM lw_log WHERE id BETWEEN ? AND ?", log_span(run_no)).fetchone():
                    raise ConfigurationError(
                        f"run id {cp.run_id!r} is already in the store; resume it with "
                        f"runner.resume({cp.run_id!r}) or start the run with a new run_id"
                    ) from None
        else:
            run_no = self._run_no(cp.run_id, make=True)
        assert run_no is not None
        try:
            append_checkpoint(
                db,
                run_no,
                cp,
                version,
                owner,
                None if self._signer is None else log_mac(self._signer, cp, version + 1),
            )
        except BaseException:  # rolled back: a number made here is not the run's
            self._run_nos.pop(cp.run_id, None)
            raise
        if cp.outcome is None:  # (a store serving many runs keeps the numbers of those under way only)
            self._run_nos[cp.run_id] = run_no
        else:
            self._run_nos.pop(cp.run_id, None)
        return version + 1

    def _run_no(self, run_id: str, make: bool = False) -> int | None:
        """The run's number (None if the store has no such run, unless ``make``)."""
        run_no = self._run_nos.get(run_id)
        if run_no is None:
            if make:
                self._db.execute("INSERT OR IGNORE INTO lw_runs (run_id) VALUES (?)", (run_id,))
            row = self._db.execute("SELECT run_no FROM lw_runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            run_no = self._run_nos[run_id] = row[0]
        return run_no

    async def take(self, run_id: str, version: int, owner: str) -> int:
        if self._signer is not None:
            return await self._do(self._write, self._take_signed, run_id, version, owner)
        return await self._do(self._take, run_id, version, owner)

    def _take_signed(self, db: sqlite3.Connection, run_id: str, version: int, owner: str) -> int:
        """:meth:`_take` in a store with a key: the new row is signed for its version."""
        assert self._signer is not None
        run_no = self._run_no(run_id)
        row = None
        if run_no is not None:
            row = db.execute(
                "SELECT agent, stage, outcome, seq, head FROM lw_log WHERE id = ?", ((run_no << 32) | version,)
            ).fetchone()
        if run_no is None or row is None:
            raise RunBusy(f"run {run_id!r} was resumed by another worker first; this worker does not run it")
        cp = Checkpoint(run_id, row[0], row[1], row[2], row[3], bytes(row[4]), b"")
        try:
            append_checkpoint(db, run_no, cp, version, owner, log_mac(self._signer, cp, version + 1))
        except RunBusy:
            raise RunBusy(f"run {run_id!r} was resumed by another worker first; this worker does not run it") from None
        return version + 1

    def _take(self, run_id: str, version: int, owner: str) -> int:
        """Version ``version + 1``: the same head, no body, a new owner (RunBusy if taken first)."""
        run_no = self._run_no(run_id)
        moved = 0
        if run_no is not None:
            try:
                moved = self._db.execute(
                    "INSERT INTO lw_log SELECT id + 1, agent, stage, outcome, seq, ?, ?, head, ?, NULL FROM lw_log"
                    " WHERE id = ?",
                    (owner, time.time(), b"", (run_no << 32) | version),
                ).rowcount
            except sqlite3.IntegrityError:
                moved = 0
        if not moved:
            raise RunBusy(f"run {run_id!r} was resumed by another worker first; this worker does not run it")
        return version + 1

    async def rewrite_heads(self, run_id: str, holding: bytes, rewrite: Callable[[bytes], bytes]) -> int:
        """Replace each head of the ended run ``run_id`` that holds ``holding`` with
        ``rewrite(head)`` (signed again, with a key), in one transaction; how many were. What
        was replaced is in no file afterwards (:mod:`~loopwright.stores.sqlite_wal`: zeroed, the WAL cut)."""
        return await self._do(self._scrub, run_id, holding, rewrite)

    def _scrub(self, run_id: str, holding: bytes, rewrite: Callable[[bytes], bytes]) -> int:
        run_no = self._run_no(run_id)
        if run_no is None:
            return 0
        with zeroing(self._db):
            rewritten = self._write(rewrite_heads, run_id, run_no, holding, rewrite, self._signer)
        if rewritten and self._folder is not None:
            truncate_wal(self._db)
        return rewritten

    async def load(self, run_id: str) -> SavedRun | None:
        return await self._do(self._load, run_id)

    def _load(self, run_id: str) -> SavedRun | None:
        db = self._db
        db.execute("BEGIN")
        try:
            run_no = self._run_no(run_id)
            rows = (
                []
                if run_no is None
                else db.execute(
                    "SELECT agent, stage, outcome, id & 4294967295, owner, updated, head, body, mac, seq FROM lw_log"
                    " WHERE id BETWEEN ? AND ? ORDER BY id",
                    log_span(run_no),
                ).fetchall()
            )
            by = db.execute("SELECT user, mac FROM lw_users WHERE run_id = ?", (run_id,)).fetchone() if rows else None
        finally:
            db.execute("COMMIT")
        if not rows:
            return None
        if self._signer is not None:
            check_log(self._signer, run_id, [(r[3], r[0], r[1], r[2], r[9], r[6], r[7], r[8]) for r in rows])
            if by is not None:
                check_user(self._signer, run_id, by[0], by[1])
        agent, stage, outcome, version, owner, updated = rows[-1][:6]
        heads = [bytes(r[6]) for r in rows]
        head = merge_heads(heads)
        messages, trace, _events = decode_bodies([r[7] for r in rows], run_id, events=False, heads=heads)
        user = None if by is None else by[0]
        return SavedRun(run_id, agent, stage, outcome, version, owner, updated, head, messages, trace, user)

    async def set_user(self, run_id: str, user: str) -> None:
        """Keep ``user`` as the one run ``run_id`` belongs to, once, before its first checkpoint
        (:class:`~loopwright.stores.base.RunStore`; signed, with a key)."""
        check_user_id(user)
        await self._do(self._write, self._set_user, run_id, user)

    def _set_user(self, db: sqlite3.Connection, run_id: str, user: str) -> None:
        keep_user(db, run_id, user, self._run_no(run_id), self._signer)

    async def claim(self, run_id: str, suspension: str, owner: str, decisions: bytes) -> tuple[str, bytes] | None:
        return await self._do(self._write, claim_suspension, run_id, suspension, owner, decisions, self._signer)

    async def save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        if self._pool is None:
            with self._lock:
                return self._save_result(run_id, call_id, seq, body)
        await self._do(self._save_result, run_id, call_id, seq, body)

    def save_result_now(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        """``save_result`` on the calling thread, without a coroutine (as :meth:`save_now`)."""
        with self._lock:
            self._save_result(run_id, call_id, seq, body)

    def _save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        run_no = self._run_nos.get(run_id)
        if run_no is None:  # (a run's first checkpoint, before any of its calls, numbered it)
            run_no = self._run_no(run_id, make=True)
        mac = None if self._signer is None else result_mac(self._signer, run_id, call_id, seq, body)
        self._cursor.execute("INSERT OR REPLACE INTO lw_results VALUES (?, ?, ?, ?, ?)", (run_no, call_id, seq, body,
                                                                                          mac))  # fmt: skip
        self._wrote()

    async def results(self, run_id: str, after_seq: int) -> dict[str, bytes]:
        return await self._do(self._results, run_id, after_seq)

    def _results(self, run_id: str, after_seq: int) -> dict[str, bytes]:
        rows = self._db.execute(
            "SELECT call_id, seq, body, mac FROM lw_results"
            " WHERE run_no = (SELECT run_no FROM lw_runs WHERE run_id = ?) AND seq > ?",
            (run_id, after_seq),
        ).fetchall()
        if self._signer is not None:
            for call_id, seq, body, mac in rows:
                check_result(self._signer, run_id, call_id, seq, bytes(body), mac)
        return {call_id: bytes(body) for call_id, _seq, body, _mac in rows}

    async def events(self, run_id: str) -> list[bytes]:
        return await self._do(self._events, run_id)

    def _events(self, run_id: str) -> list[bytes]:
        run_no = self._run_no(run_id)
        if run_no is None:
            return []
        rows = self._db.execute(
            "SELECT head, body, id & 4294967295, agent, stage, outcome, seq, mac FROM lw_log WHERE id BETWEEN ? AND ?"
            " ORDER BY id",
            log_span(run_no),
        ).fetchall()
        if self._signer is not None:
            check_log(self._signer, run_id, [(r[2], r[3], r[4], r[5], r[6], r[0], r[1], r[7]) for r in rows])
        events = decode_bodies([r[1] for r in rows], run_id, heads=[r[0] for r in rows])[2]
        return [json.dumps(e).encode() for e in events]

    async def children(self, run_id: str) -> list[str]:
        """The ids of the runs under ``run_id`` (``run_id + "."`` and more: a workflow's children
        at every depth) that have a checkpoint, sorted; a range of the ids' index, no pattern."""
        return await self._do(self._children, run_id)

    def _children(self, run_id: str) -> list[str]:
        rows = self._db.execute(
            "SELECT run_id FROM lw_runs AS r WHERE run_id >= ? AND run_id < ? AND EXISTS (SELECT 1 FROM lw_log"
            " WHERE id BETWEEN r.run_no << 32 AND (r.run_no << 32) | 4294967295) ORDER BY run_id",
            under_prefix(run_id),
        ).fetchall()
        return [row[0] for row in rows]

    async def runs(self, limit: int = 100) -> list[RunSummary]:
        return await self._do(self._runs, limit)

    def _runs(self, limit: int) -> list[RunSummary]:
        rows = self._db.execute(
            "SELECT r.run_id, l.agent, l.stage, l.outcome, l.updated, l.id & 4294967295 FROM lw_runs AS r"
            " JOIN lw_log AS l ON l.id = (SELECT MAX(id) FROM lw_log WHERE id BETWEEN r.run_no << 32"
            " AND (r.run_no << 32) | 4294967295) ORDER BY l.updated DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [RunSummary(*row) for row in rows]

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._folder is not None:
            self._folder.stop()
        self._cursor.close()  # (a cursor whose insert failed holds its statement, and so the connection's files)
        self._db.close()

    def _wrote(self) -> None:
        """After a commit: every FOLD_EVERY-th wakes the folder."""
        self._writes += 1
        if self._writes >= FOLD_EVERY:
            self._fold()

    def _fold(self) -> None:
        """FOLD_EVERY commits since the last: the folder folds the WAL back (or, past
        FOLD_LIMIT pages, this writer does)."""
        if self._folder is not None:
            self._writes = 0
            if wal_size(self._wal) > self._wal_limit:
                with contextlib.suppress(sqlite3.Error):  # another process's checkpoint: it folds
                    self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            else:
                self._folder.wake.set()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
