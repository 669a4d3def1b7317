"""The SQLite store's tables: the statements that bring them from one version to the next
(:data:`MIGRATIONS`), and opening an existing store read-only (:func:`open_existing`)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..data.errors import ConfigurationError
from .base import STORE_SCHEMA

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE lw_log (
            run_id TEXT NOT NULL, version INTEGER NOT NULL, agent TEXT NOT NULL, stage TEXT NOT NULL,
            outcome TEXT, seq INTEGER NOT NULL, owner TEXT NOT NULL, updated REAL NOT NULL,
            head BLOB NOT NULL, body BLOB NOT NULL, PRIMARY KEY (run_id, version)) WITHOUT ROWID""",
        "CREATE TABLE lw_results (run_id TEXT NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL,"
        " body BLOB NOT NULL, PRIMARY KEY (run_id, call_id)) WITHOUT ROWID",
        "CREATE TABLE lw_claims (run_id TEXT NOT NULL, suspension TEXT NOT NULL, owner TEXT NOT NULL,"
        " decisions BLOB NOT NULL, claimed REAL NOT NULL, PRIMARY KEY (run_id, suspension)) WITHOUT ROWID",
    ),
    2: (),  # the rows' format (heads of the changed fields, events as lists): the tables are the same
    3: (  # the log keyed by one integer (run number << 32 | version): a checkpoint appends to a rowid table
        "ALTER TABLE lw_log RENAME TO lw_log_2",
        "CREATE TABLE lw_runs (run_no INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE)",
        """CREATE TABLE lw_log (
            id INTEGER PRIMARY KEY, agent TEXT NOT NULL, stage TEXT NOT NULL, outcome TEXT,
            seq INTEGER NOT NULL, owner TEXT NOT NULL, updated REAL NOT NULL, head BLOB NOT NULL,
            body BLOB NOT NULL)""",
        "INSERT INTO lw_runs (run_id) SELECT DISTINCT run_id FROM lw_log_2 ORDER BY run_id",
        "INSERT INTO lw_log SELECT (r.run_no << 32) | l.version, l.agent, l.stage, l.outcome, l.seq, l.owner,"
        " l.updated, l.head, l.body FROM lw_log_2 AS l JOIN lw_runs AS r USING (run_id) ORDER BY 1",
        "DROP TABLE lw_log_2",
        # tool results keyed by the run's number too (a new run's results append to the tree)
        "ALTER TABLE lw_results RENAME TO lw_results_2",
        "CREATE TABLE lw_results (run_no INTEGER NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL,"
        " body BLOB NOT NULL, PRIMARY KEY (run_no, call_id)) WITHOUT ROWID",
        "INSERT OR IGNORE INTO lw_runs (run_id) SELECT DISTINCT run_id FROM lw_results_2 ORDER BY run_id",
        "INSERT INTO lw_results SELECT r.run_no, s.call_id, s.seq, s.body FROM lw_results_2 AS s"
        " JOIN lw_runs AS r USING (run_id) ORDER BY 1, 2",
        "DROP TABLE lw_results_2",
    ),
    4: (  # each row's signature, when the store has a key (loopwright.data.signing)
        "ALTER TABLE lw_log ADD COLUMN mac BLOB",
        "ALTER TABLE lw_results ADD COLUMN mac BLOB",
        "ALTER TABLE lw_claims ADD COLUMN mac BLOB",
    ),
    5: (  # the user each run belongs to, beside it (never read from its state)
        "CREATE TABLE lw_users (run_id TEXT PRIMARY KEY, user TEXT NOT NULL, mac BLOB) WITHOUT ROWID",
    ),
}
"""The statements that bring the tables from version ``n - 1`` to ``n``."""


def open_existing(path: str) -> sqlite3.Connection:
    """A read-only connection to the loopwright store ``path`` (ConfigurationError, in one line,
    when there is no file, or it is not SQLite, or not a loopwright store)."""
    if not os.path.isfile(path):
        raise ConfigurationError(f"no run store at {path!r} (no such file); check the path")
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30)
    try:
        row = db.execute("SELECT value FROM lw_meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        if "no such table" in str(exc):
            raise ConfigurationError(f"{path!r} is not a loopwright run store (it has no lw_meta table)") from None
        raise ConfigurationError(f"{path!r} is not a SQLite database ({exc}); name a loopwright run store") from None
    found = int(row[0]) if row is not None else 0
    if found != STORE_SCHEMA:
        db.close()
        do = (
            "read it with the loopwright version that wrote it"
            if found > STORE_SCHEMA
            else "open it once for writing (a Runner with this store) to bring it up to date"
        )
        raise ConfigurationError(
            f"the run store {path!r} has schema version {found}, this loopwright reads {STORE_SCHEMA}; {do}"
        )
    return db
