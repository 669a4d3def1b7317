"""The server's front door over real HTTP: a body must be JSON (415), the Host must be one the
server answers to (421), a state-changing request from a foreign Origin is refused (403), a body
past ``max_body_bytes`` gets 413 before it is all read, deep or broken JSON gets 400 (never a 500
or a reset), and a refused request leaves nothing in the store."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loopwright.serve import app
from loopwright.stores import SQLiteStore
from tests.serve_agents import serving, support

JSON = {"Content-Type": "application/json"}


def stored_runs(db: Path) -> list[str]:
    async def read() -> list[str]:
        store = SQLiteStore(db)
        try:
            return [s.run_id for s in await store.runs(limit=100)]
        finally:
            await store.close()

    return asyncio.run(read()) if db.exists() else []


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def base(db: Path) -> Iterator[str]:
    with serving(app([support], store=f"sqlite:///{db}", max_body_bytes=4096)) as url:
        yield url


def _settled(c: httpx.Client, run_id: str) -> None:
    """Wait until the run has ended (so the store holds it)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = c.get(f"/runs/{run_id}")
        if got.status_code == 200 and got.json()["outcome"] is not None and not got.json()["running"]:
            return
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end")


def _error(got: httpx.Response, status: int, *words: str) -> None:
    assert got.status_code == status, (got.status_code, got.text)
    assert got.headers["content-type"].startswith("application/json"), got.headers
    message = got.json()["error"]
    for word in words:
        assert word in message, message


def test_a_body_that_is_not_declared_json_gets_415_and_starts_nothing(base: str, db: Path) -> None:
    body = json.dumps({"agent": "support", "input": "refund A1"})
    with httpx.Client(base_url=base, timeout=20) as c:
        for kind in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None):
            headers = {"Content-Type": kind} if kind else {}
            _error(c.post("/runs", content=body, headers=headers), 415, "Content-Type: application/json")
            _error(c.post("/agents/support/agui", content=body, headers=headers), 415, "application/json")
            _error(c.post("/runs/x/decisions", content=body, headers=headers), 415)
        assert c.get("/runs").json()["runs"] == []
        ok = c.post("/runs", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
        assert ok.status_code == 202, ok.text
        _settled(c, ok.json()["run_id"])
    assert stored_runs(db) == [ok.json()["run_id"]]


def test_a_forged_host_gets_421_and_the_loopback_names_are_served(base: str, db: Path) -> None:
    port = base.rsplit(":", 1)[1]
    with httpx.Client(base_url=base, timeout=20) as c:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "attacker.test:80"):
            _error(c.get("/runs", headers={"Host": host}), 421, "Host", "--allowed-host")
            _error(c.post("/runs", json={"input": "hi"}, headers={"Host": host}), 421)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"LOCALHOST:{port}"):
            assert c.get("/runs", headers={"Host": host}).status_code == 200, host
    assert stored_runs(db) == []


@pytest.mark.slow  # (two servers, one after the other)
def test_allowed_hosts_are_served_and_a_star_serves_any(db: Path) -> None:
    asgi = app([support], store=f"sqlite:///{db}", allowed_hosts=["agents.example.com"])
    with serving(asgi) as url, httpx.Client(base_url=url, timeout=20) as c:
        assert c.get("/runs", headers={"Host": "agents.example.com"}).status_code == 200
        assert c.get("/runs", headers={"Host": "agents.example.com:443"}).status_code == 200
        _error(c.get("/runs", headers={"Host": "other.example.com"}), 421)
        assert c.get("/runs").status_code == 200  # the address it was reached on still is
    with serving(app([support], store=f"sqlite:///{db}", allowed_hosts=["*"])) as url:
        assert httpx.get(url + "/runs", headers={"Host": "anything.test"}).status_code == 200


def test_a_foreign_origin_cannot_change_anything_and_the_own_origin_can(base: str, db: Path) -> None:
    port = base.rsplit(":", 1)[1]
    with httpx.Client(base_url=base, timeout=20) as c:
        for origin in ("http://evil.example", f"http://127.0.0.1:{int(port) + 1}", "null", "https://127.0.0.1"):
            got = c.post("/runs", json={"input": "refund B2"}, headers={"Origin": origin})
            _error(got, 403, "Origin")
            _error(c.post("/runs/x/cancel", headers={"Origin": origin}), 403)
        assert stored_runs(db) == []
        assert c.get("/runs", headers={"Origin": "http://evil.example"}).status_code == 200  # reading: CORS's job
        own = c.post("/runs", json={"input": "hello"}, headers={"Origin": base})
        assert own.status_code == 202, own.text
        local = c.post("/runs", json={"input": "hello"}, headers={"Origin": f"http://localhost:{port}"})
        _error(local, 403)  # localhost:port is another origin than 127.0.0.1:port, though it is served
        same = c.post(
            "/runs",
            json={"input": "hello"},
            headers={"Origin": f"http://localhost:{port}", "Host": f"localhost:{port}"},
        )
        assert same.status_code == 202, same.text


def test_cors_origins_may_post(db: Path) -> None:
    asgi = app([support], store=f"sqlite:///{db}", cors_origins=["http://ui.example"])
    with serving(asgi) as url, httpx.Client(base_url=url, timeout=20) as c:
        assert c.post("/runs", json={"input": "hi"}, headers={"Origin": "http://ui.example"}).status_code == 202
        _error(c.post("/runs", json={"input": "hi"}, headers={"Origin": "http://other.example"}), 403)


def test_a_body_past_the_limit_gets_413(base: str, db: Path) -> None:
    big = json.dumps({"input": "x" * 5000})
    with httpx.Client(base_url=base, timeout=20) as c:
        _error(c.post("/runs", content=big, headers=JSON), 413, "4096", "max_body_bytes")

        def chunks() -> Iterator[bytes]:
            yield big[:3000].encode()
            yield big[3000:].encode()

        _error(c.post("/runs", content=chunks(), headers=JSON), 413)  # chunked: no Content-Length
        ok = c.post("/runs", content=json.dumps({"input": "x" * 3000}), headers=JSON)
        assert ok.status_code == 202
        _settled(c, ok.json()["run_id"])
    assert stored_runs(db) == [ok.json()["run_id"]]


def _raw(base: str, head: str, body: bytes) -> bytes:
    """Send a request's head and part of its body on a raw socket; what the server answers (without the rest)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head.encode() + body)
        got = b""
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            more = s.recv(65536)
            if not more:
                break
            got += more
        return got


def test_a_huge_body_is_refused_before_it_is_read(base: str, db: Path) -> None:
    port = base.rsplit(":", 1)[1]
    declared = (
        f"POST /runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {100 * 2**20}\r\n\r\n"
    )
    got = _raw(base, declared, b'{"input": "')  # 100 MiB announced, 11 bytes sent: answered at once
    assert got.startswith(b"HTTP/1.1 413"), got[:200]
    chunked = (
        f"POST /runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 2000
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(4))  # 8,000 bytes, and no end chunk
    got = _raw(base, chunked, body)
    assert got.startswith(b"HTTP/1.1 413"), got[:200]
    assert b"max_body_bytes" in got
    assert stored_runs(db) == []


@pytest.mark.parametrize("depth", [1_000, 200_000])
def test_deeply_nested_json_gets_400_not_500(tmp_path: Path, depth: int) -> None:
    db = tmp_path / "runs.db"
    deep = "[" * depth + "]" * depth
    bodies = [
        '{"input": "hi", "agent": ' + deep + "}",
        deep,
        '{"decisions": [{"call_id": "c", "action": "value", "value": ' + deep + "}]}",
    ]
    asgi = app([support], store=f"sqlite:///{db}", max_body_bytes=2**20)
    with serving(asgi) as url, httpx.Client(base_url=url, timeout=20) as c:
        for path in ("/runs", "/agents/support/agui", "/runs/r1/decisions"):
            for body in bodies:
                _error(c.post(path, content=body, headers=JSON), 400, "nested")
    assert stored_runs(db) == []


def test_invalid_utf8_and_lone_surrogates_get_400(base: str, db: Path) -> None:
    bad: list[bytes] = [
        b'{"input": "caf\xe9"}',  # latin-1, not UTF-8
        b'{"input": "\xff\xfe"}',
        b'{"input": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 (no valid UTF-8 has it)
        b'{"input": "\\ud800 alone"}',  # a lone surrogate as a JSON escape
        b'{"input": NaN}',
    ]
    with httpx.Client(base_url=base, timeout=20) as c:
        for body in bad:
            got = c.post("/runs", content=body, headers=JSON)
            _error(got, 400)
            assert "UTF-8" in got.json()["error"] or "JSON" in got.json()["error"], got.json()
        assert c.get("/runs").status_code == 200  # the server still answers
    assert stored_runs(db) == []


def test_the_defaults_are_documented_and_the_factory_checks_its_options(db: Path) -> None:
    from loopwright.serve.http import MAX_BODY_BYTES

    assert MAX_BODY_BYTES == 2**20
    for bad in ({"max_body_bytes": 0}, {"allowed_hosts": [""]}, {"allowed_hosts": "localhost"}):
        with pytest.raises(ValueError, match=r"serve\.app"):
            app([support], store=f"sqlite:///{db}", **bad)  # type: ignore[arg-type]
