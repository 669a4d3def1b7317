"""The SQLite store's row writes: a checkpoint appended to a run's log (its key is the
optimistic lock), a claim on a suspension, a transaction rolled back after an error."""

from __future__ import annotations

import sqlite3
import time

from ..data.errors import RunBusy
from ..data.signing import RowSigner
from .base import Checkpoint, check_claim, claim_mac

APPEND = "INSERT INTO lw_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def append_checkpoint(
    db: sqlite3.Connection | sqlite3.Cursor, run_no: int, cp: Checkpoint, version: int, owner: str, mac: bytes | None
) -> None:
    """Version ``version + 1`` of run ``run_no`` into the log (``mac``: its signature, if the
    store has a key): its key is the optimistic lock (a worker that wrote that version first
    makes this one RunBusy)."""
    try:
        db.execute(
            APPEND,
            ((run_no << 32) | (version + 1), cp.agent, cp.stage, cp.outcome, cp.seq, owner, time.time(), cp.head,
             cp.body, mac),
        )  # fmt: skip
    except sqlite3.IntegrityError:
        raise RunBusy(f"run {cp.run_id!r} was taken over by another worker; this worker stops running it") from None


def rollback(db: sqlite3.Connection) -> None:
    """Roll the transaction back, if the error that stopped it left one (a full disk may have)."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def log_span(run_no: int) -> tuple[int, int]:
    """The first and last key of a run's log."""
    return run_no << 32, (run_no << 32) | 0xFFFFFFFF


def claim_suspension(
    db: sqlite3.Connection, run_id: str, suspension: str, owner: str, decisions: bytes, signer: RowSigner | None
) -> tuple[str, bytes] | None:
    row = db.execute(
        "SELECT owner, decisions, mac FROM lw_claims WHERE run_id = ? AND suspension = ?", (run_id, suspension)
    ).fetchone()
    if row is not None:
        if signer is not None:
            check_claim(signer, run_id, suspension, row[0], bytes(row[1]), row[2])
        return row[0], bytes(row[1])
    mac = None if signer is None else claim_mac(signer, run_id, suspension, owner, decisions)
    db.execute(
        "INSERT INTO lw_claims VALUES (?, ?, ?, ?, ?, ?)", (run_id, suspension, owner, decisions, time.time(), mac)
    )
    return None
