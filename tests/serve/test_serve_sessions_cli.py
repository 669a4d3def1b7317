"""`loopwright serve --sessions URL` as a user runs it: a subprocess whose app keeps sessions in
the store the URL names (a request naming a session reaches the session store, which asks for a
user: sessions over HTTP are a user's), where without the option it keeps none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import ROOT
from tests.serve_agents import free_port


def user(request: Any) -> str | None:
    """The ``--auth`` hook of the test below: the user is the ``x-user`` header."""
    return request.headers.get("x-user")


def _serve(*args: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "loopwright", "serve", "tests.serve_agents:support", "--no-ui", f"--port={port}", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/agents")
            return server, base
        except httpx.ConnectError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                _, err = server.communicate(timeout=10)
                pytest.fail(f"loopwright serve did not start: {err}")
            time.sleep(0.1)


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def test_serve_sessions_gives_the_app_a_session_store(tmp_path: Path) -> None:
    """With ``--sessions`` a request naming a session gets past "this server keeps no sessions"
    (to the next rule: a session is a user's); without it, it does not; the file is made."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    sessions = tmp_path / "sessions.db"
    plain, base = _serve("--store", store)
    try:
        refused = httpx.post(f"{base}/runs", json={"input": "hi", "session": "s1"})
        assert refused.status_code == 422 and "keeps no sessions" in refused.json()["error"]
    finally:
        _stop(plain)
    server, base = _serve("--store", store, "--sessions", f"sqlite:///{sessions}")
    try:
        answer = httpx.post(f"{base}/runs", json={"input": "hi", "session": "s1"})
        assert answer.status_code == 422, answer.text
        assert "belongs to a user" in answer.json()["error"]  # the sessions are there; the user is not
    finally:
        _stop(server)
    assert sessions.exists()


def test_serve_sessions_with_auth_continues_a_users_session(tmp_path: Path) -> None:
    """With ``--auth`` too (where the command has it), a user's second run continues their session."""
    help_text = subprocess.run(
        [sys.executable, "-m", "loopwright", "serve", "--help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    if "--auth" not in help_text:
        pytest.skip("this loopwright serve has no --auth option")
    sessions = tmp_path / "sessions.db"
    server, base = _serve(
        "--store",
        f"sqlite:///{tmp_path / 'runs.db'}",
        "--sessions",
        f"sqlite:///{sessions}",
        "--auth",
        "tests.serve.test_serve_sessions_cli:user",
    )
    ada = {"x-user": "ada"}
    try:
        for text in ("hello", "again"):
            started = httpx.post(f"{base}/runs", json={"input": text, "session": "s1"}, headers=ada)
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            deadline = time.monotonic() + 15
            while httpx.get(f"{base}/runs/{run_id}", headers=ada).json().get("outcome") != "final":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        shown = httpx.get(f"{base}/runs/{run_id}", headers=ada).json()
        assert shown["outcome"] == "final"
    finally:
        _stop(server)
    import asyncio

    from loopwright.stores.sessions import SQLiteSessions

    saved = asyncio.run(SQLiteSessions(sessions).load(("support", "ada", "s1")))
    assert saved is not None and len(saved.messages) >= 4  # both runs' turns are in the session
