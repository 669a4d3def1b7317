"""The SQLite store's WAL kept short: folded back into the database file on the store's own
thread (:class:`Folder`), so no commit waits for it; and cut to nothing after a rewrite whose
old bytes must not stay in any file (:func:`zeroing`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator

FOLD_EVERY = 400
"""Commits between two wake-ups of a store's folder (about 1000 WAL pages, SQLite's own default)."""
FOLD_LIMIT = 4000
"""WAL pages past which the writer folds the WAL itself (it did not start over); the WAL file
is cut back to that size when it starts over (``journal_size_limit``)."""


class Folder:
    """Folds the WAL back into the database file (a passive checkpoint, its fsyncs included)
    on its own thread and connection, woken every FOLD_EVERY commits: no commit waits for it
    (SQLite's automatic checkpoint would run inside the commit that crosses its threshold).
    A passive checkpoint never blocks the writer, nor readers and writers in other processes.

    The WAL starts over from its beginning only if, as a write begins, every page in it is
    folded back; a writer that never pauses keeps adding pages while the folder works, so the
    folder tries again at once (a few times), and once the WAL file is longer than FOLD_LIMIT
    pages (it is cut back to that when it starts over) the writer folds it itself, between two
    of its commits: a bounded WAL, whether or not the folder's thread got to run."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.wake = threading.Event()
        self.stopping = False
        self.folds = 0
        self.thread = threading.Thread(
            target=self._run, args=(path, synchronous), name="loopwright-sqlite-wal", daemon=True
        )
        self.thread.start()

    def _run(self, path: str, synchronous: str) -> None:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA synchronous={synchronous}")
            while True:
                self.wake.wait()
                self.wake.clear()
                if self.stopping:
                    return
                try:
                    for _ in range(4):
                        ((_busy, pages, folded),) = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        self.folds += 1
                        if pages == folded:
                            break
                except sqlite3.Error:  # another process's checkpoint holds the lock: the next wake-up
                    pass
        finally:
            db.close()

    def halt(self) -> None:
        self.stopping = True
        self.wake.set()

    def stop(self) -> None:
        self.halt()
        self.thread.join()


def wal_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


@contextlib.contextmanager
def zeroing(db: sqlite3.Connection) -> Iterator[None]:
    """Writes in the block zero the bytes they free (``secure_delete``, whatever the SQLite
    build's default). With :func:`truncate_wal` after it, what the block replaced is in no file
    (an ended run's ``temp:`` values)."""
    (zeroes,) = db.execute("PRAGMA secure_delete").fetchone()
    db.execute("PRAGMA secure_delete=ON")
    try:
        yield
    finally:
        db.execute(f"PRAGMA secure_delete={int(zeroes)}")


def truncate_wal(db: sqlite3.Connection) -> None:
    """Fold the WAL, which still holds pages as they were first written, back into the file and
    cut it to nothing (``wal_checkpoint(TRUNCATE)``: it waits, up to the connection's timeout,
    for readers of older pages to finish)."""
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
