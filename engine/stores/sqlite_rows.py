"""The SQLite store's row writes: a checkpoint appended to a run's log (its key is the
optimistic lock), a claim on a suspension, a run's user kept beside it, an ended run's heads
rewritten, a transaction rolled back after an error."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from ..data.errors import RunBusy
from ..data.signing import RowSigner
from .base import Checkpoint, check_claim, claim_mac, log_mac, user_mac, user_taken

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


def keep_user(db: sqlite3.Connection, run_id: str, user: str, run_no: int | None, signer: RowSigner | None) -> None:
    """Keep ``user`` as the one run ``run_id`` (numbered ``run_no``, if it is) belongs to: once,
    before the run's first checkpoint (else ConfigurationError: the id is taken)."""
    row = db.execute("SELECT user FROM lw_users WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None:
        if row[0] != user:
            raise user_taken(run_id)
        return
    if run_no is not None and db.execute("SELECT 1 FROM lw_log WHERE id BETWEEN ? AND ?", log_span(run_no)).fetchone():
        raise user_taken(run_id)
    mac = None if signer is None else user_mac(signer, run_id, user)
    db.execute("INSERT INTO lw_users VALUES (?, ?, ?)", (run_id, user, mac))


def rewrite_heads(
    db: sqlite3.Connection,
    run_id: str,
    run_no: int,
    holding: bytes,
    rewrite: Callable[[bytes], bytes],
    signer: RowSigner | None,
) -> int:
    """Each head of run ``run_id`` that holds ``holding`` replaced with ``rewrite(head)`` (signed
    again, with ``signer``); how many were."""
    rows = db.execute(
        "SELECT id, agent, stage, outcome, seq, head, body FROM lw_log WHERE id BETWEEN ? AND ? AND instr(head, ?)",
        (*log_span(run_no), holding),
    ).fetchall()
    for row_id, agent, stage, outcome, seq, head, body in rows:
        cp = Checkpoint(run_id, agent, stage, outcome, seq, rewrite(bytes(head)), bytes(body))
        mac = None if signer is None else log_mac(signer, cp, row_id & 0xFFFFFFFF)
        db.execute("UPDATE lw_log SET head = ?, mac = ? WHERE id = ?", (cp.head, mac, row_id))
    return len(rows)
