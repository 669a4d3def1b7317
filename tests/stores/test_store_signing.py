"""A store opened with ``key=`` signs every row it writes (HMAC-SHA256, as ``RunState.to_json(key=...)``) and
refuses to load a row that was changed, moved, removed from the middle, left unsigned or signed with another key;
an unsigned store trusts its rows as they are."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopwright import ConfigurationError, ResumeError, Runner, approve
from loopwright.stores import RunStore, SQLiteStore
from tests.store_app import CRASH_AFTER, EXECUTED, labels, make_agent, steps_script
from tests.stores.test_store_sqlite import PAY_SCRIPT

KEY = b"k" * 32
OTHER = b"o" * 32


def _suspend(store: RunStore) -> None:
    async def go() -> None:
        first = await Runner(make_agent(PAY_SCRIPT), store=store).run("pay", run_id="pay")
        assert first.outcome == "suspended"
        await store.close()

    asyncio.run(go())
    EXECUTED.clear()


def _resume(store: RunStore) -> Any:
    async def go() -> Any:
        try:
            return await Runner(make_agent(PAY_SCRIPT), store=store).resume("pay", {"c-pay": approve()})
        finally:
            await store.close()

    return asyncio.run(go())


def _sqlite_edit(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        db.execute(statement)
    db.close()


PAYMENT = "replace(CAST({0} AS TEXT), '\"amount\":500', '\"amount\":5000')"
"""The attacker's consistent edit: the payment in the reply, in the history and in the request shown."""
CONSISTENT_EDIT = (
    f"UPDATE lw_log SET head = CAST({PAYMENT.format('head')} AS BLOB), body = CAST({PAYMENT.format('body')} AS BLOB)",
)


def test_an_unsigned_store_trusts_a_consistent_edit_of_its_rows(tmp_path: Path) -> None:
    """What the key is for: without it, an edit that keeps the rows consistent is run."""
    path = tmp_path / "runs.db"
    _suspend(SQLiteStore(path))
    _sqlite_edit(path, *CONSISTENT_EDIT)
    assert _resume(SQLiteStore(path)).outcome == "final"
    assert labels() == {"pay 5000": 1}


def test_a_signed_store_refuses_a_consistent_edit_and_nothing_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _suspend(SQLiteStore(path, key=KEY))
    _sqlite_edit(path, *CONSISTENT_EDIT)
    with pytest.raises(ResumeError, match=r"run 'pay': checkpoint \d+ in the store does not match its signature"):
        _resume(SQLiteStore(path, key=KEY))
    assert labels() == {}


def test_a_signed_store_runs_resumes_and_lists_as_an_unsigned_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _suspend(SQLiteStore(path, key=KEY))
    db = sqlite3.connect(path)
    macs = [row[0] for row in db.execute("SELECT mac FROM lw_log")]
    db.close()
    assert macs and all(isinstance(mac, bytes) and len(mac) == 32 for mac in macs)
    assert _resume(SQLiteStore(path, key=KEY)).outcome == "final"
    assert labels() == {"pay 500": 1}

    async def later() -> None:
        store = SQLiteStore(path, key=KEY)
        saved = await store.load("pay")
        assert saved is not None and saved.outcome == "final"
        assert [e for e in await store.events("pay")]
        assert [r.run_id for r in await store.runs()] == ["pay"]
        await store.close()

    asyncio.run(later())


def test_a_signed_store_resumes_a_crashed_run_from_its_kept_results(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _crash(path)

    async def resume() -> Any:
        store = SQLiteStore(path, key=KEY)
        try:
            return await Runner(make_agent(steps_script(1, calls=2)), store=store).resume("r1")
        finally:
            await store.close()

    assert asyncio.run(resume()).outcome == "final"
    assert labels() == {"s0c0": 1, "s0c1": 2}  # the kept result answered s0c0


def _crash(path: Path) -> None:
    """A run of two calls whose second "kills the process" (the first call's result is kept)."""
    CRASH_AFTER.add("s0c1")

    async def crash() -> None:
        store = SQLiteStore(path, key=KEY)
        try:
            await Runner(make_agent(steps_script(1, calls=2)), store=store).run("go", run_id="r1")
        finally:
            await store.close()

    with pytest.raises(BaseException):  # noqa: B017 (Crash, in a group from the task group of the calls)
        asyncio.run(crash())


TAMPERING: dict[str, tuple[tuple[str, ...], str]] = {
    "a row edited": (CONSISTENT_EDIT, "does not match its signature"),
    "the signature removed": (("UPDATE lw_log SET mac = NULL",), "is not signed"),
    "a row from the middle removed": (
        ("DELETE FROM lw_log WHERE id = (SELECT MIN(id) + 1 FROM lw_log)",),
        r"checkpoints 1\.\.\d+ are not all there",
    ),
    "a row moved to another version": (
        ("UPDATE lw_log SET id = id + 100 WHERE id = (SELECT MAX(id) FROM lw_log)",),
        "not all there|does not match",
    ),
}


@pytest.mark.parametrize("fault", TAMPERING)
def test_a_signed_store_refuses_tampered_rows(tmp_path: Path, fault: str) -> None:
    statements, refusal = TAMPERING[fault]
    path = tmp_path / "runs.db"
    _suspend(SQLiteStore(path, key=KEY))
    _sqlite_edit(path, *statements)
    with pytest.raises(ResumeError, match=refusal):
        _resume(SQLiteStore(path, key=KEY))
    assert labels() == {}


def test_a_signed_store_refuses_rows_signed_with_another_key_or_none(tmp_path: Path) -> None:
    _suspend(SQLiteStore(tmp_path / "other.db", key=OTHER))
    with pytest.raises(ResumeError, match="does not match its signature"):
        _resume(SQLiteStore(tmp_path / "other.db", key=KEY))
    _suspend(SQLiteStore(tmp_path / "unsigned.db"))
    with pytest.raises(ResumeError, match="is not signed: it was written without key="):
        _resume(SQLiteStore(tmp_path / "unsigned.db", key=KEY))
    assert labels() == {}


def test_a_signed_store_refuses_an_edited_claim_or_kept_result(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _suspend(SQLiteStore(path, key=KEY))
    db = sqlite3.connect(path, isolation_level=None)
    owner = "elsewhere|1|dead"
    db.execute("INSERT INTO lw_claims VALUES ('pay', (SELECT seq FROM lw_log ORDER BY id DESC LIMIT 1), ?, ?, 0, NULL)",
               (owner, b'{"c-pay": {"type": "approve"}}'))  # fmt: skip
    db.close()
    with pytest.raises(ResumeError, match=r"the claim of suspension \d+ of run 'pay' is not signed"):
        _resume(SQLiteStore(path, key=KEY))

    results = tmp_path / "results.db"
    _crash(results)
    _sqlite_edit(results, "UPDATE lw_results SET body = CAST(replace(CAST(body AS TEXT), 'did', 'DID') AS BLOB)")

    async def resume() -> None:
        store = SQLiteStore(results, key=KEY)
        try:
            await Runner(make_agent(steps_script(1, calls=2)), store=store).resume("r1")
        finally:
            await store.close()

    with pytest.raises(ResumeError, match="the kept result of call 's0c0' of run 'r1' does not match its signature"):
        asyncio.run(resume())


@pytest.mark.parametrize("key", [b"", "text", 5])
def test_a_key_is_bytes(tmp_path: Path, key: Any) -> None:
    with pytest.raises(ConfigurationError, match="key= takes the signing key as bytes"):
        SQLiteStore(tmp_path / "runs.db", key=key)


def test_a_signed_postgres_store_refuses_a_consistent_edit(pg_url: str) -> None:
    import psycopg

    from loopwright.stores.postgres import PostgresStore

    def edit(*statements: str) -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    payment: Callable[[str], str] = lambda column: (  # noqa: E731
        f"convert_to(replace(convert_from({column}, 'UTF8'), '\"amount\":500', '\"amount\":5000'), 'UTF8')"
    )
    _suspend(PostgresStore(pg_url, key=KEY))
    edit(f"UPDATE lw_log SET head = {payment('head')}, body = {payment('body')}")
    with pytest.raises(ResumeError, match="does not match its signature"):
        _resume(PostgresStore(pg_url, key=KEY))
    edit("UPDATE lw_log SET mac = NULL")
    with pytest.raises(ResumeError, match="is not signed"):
        _resume(PostgresStore(pg_url, key=KEY))
    assert labels() == {}
    _resume(PostgresStore(pg_url))  # unsigned, the store trusts its rows: the edit is run
    assert labels() == {"pay 5000": 1}


def test_a_signed_postgres_store_runs_and_resumes(pg_url: str) -> None:
    from loopwright.stores.postgres import PostgresStore

    _suspend(PostgresStore(pg_url, key=KEY))
    assert _resume(PostgresStore(pg_url, key=KEY)).outcome == "final"
    assert labels() == {"pay 500": 1}
