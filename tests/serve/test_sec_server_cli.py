"""`loopwright serve`'s front-door options as a user runs them (a subprocess): it refuses to listen
on a non-loopback address without auth unless told to, ``--token-env`` checks a bearer token,
``--auth module:function`` is the auth hook, ``--allowed-host`` and ``--max-body-bytes`` reach
the app."""

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

pytestmark = pytest.mark.slow


def header_user(request: Any) -> str | None:
    """The auth hook the ``--auth`` test names: the ``x-user`` header."""
    return request.headers.get("x-user")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "loopwright", "serve", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _served(server: subprocess.Popen[str], base: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/ui/app.js")
            return
        except httpx.ConnectError:
            assert time.monotonic() < deadline and server.poll() is None, server.stderr and server.stderr.read()
            time.sleep(0.1)


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    server.wait(timeout=20)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_non_loopback_address_without_auth_is_refused_with_what_to_do(host: str, tmp_path: Path) -> None:
    args = ["tests.serve_agents:support", "--host", host, "--port", str(free_port())]
    done = _cli(*args, "--store", f"sqlite:///{tmp_path / 'runs.db'}")
    _, err = done.communicate(timeout=60)
    assert done.returncode == 2, err
    for words in ("no auth", "--auth", "--token-env", "--insecure-no-auth"):
        assert words in err, err
    assert not (tmp_path / "runs.db").exists()


def test_bad_front_door_options_exit_2_in_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    for args, words in (
        (["--token-env", "LW_NO_SUCH_VARIABLE"], "LW_NO_SUCH_VARIABLE"),
        (["--auth", "tests.test_sec_server_cli:nothing_here"], "loopwright serve: "),
        (["--auth", "tests.test_sec_server_cli:header_user", "--token-env", "X"], "one of --auth and --token-env"),
        (["--max-body-bytes", "0"], "--max-body-bytes"),
    ):
        done = _cli("tests.serve_agents:support", "--store", store, "--port", str(free_port()), *args)
        _, err = done.communicate(timeout=60)
        assert done.returncode == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)


def test_token_env_checks_a_bearer_token(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["tests.serve_agents:support", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--port", str(port)]
    server = _cli(*args, "--token-env", "LW_TEST_TOKEN", env={"LW_TEST_TOKEN": "s3cret-token"})
    try:
        _served(server, base)
        assert httpx.get(f"{base}/runs").status_code == 401
        assert httpx.get(f"{base}/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{base}/runs", headers={"Authorization": "s3cret-token"}).status_code == 401
        good = {"Authorization": "Bearer s3cret-token"}
        assert httpx.get(f"{base}/runs", headers=good).status_code == 200
        assert httpx.post(f"{base}/runs", json={"input": "hi"}, headers=good).status_code == 202
    finally:
        _stop(server)


def test_auth_allowed_host_and_max_body_bytes_reach_the_app(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["tests.serve_agents:support", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--port", str(port)]
    more = ["--auth", "tests.test_sec_server_cli:header_user", "--allowed-host", "agents.test"]
    server = _cli(*args, *more, "--allowed-host", "*.corp.test", "--max-body-bytes", "200")
    try:
        _served(server, base)
        assert httpx.get(f"{base}/runs").status_code == 401
        ada = {"x-user": "ada"}
        assert httpx.get(f"{base}/runs", headers=ada).status_code == 200
        assert httpx.get(f"{base}/runs", headers={**ada, "Host": "agents.test"}).status_code == 200
        assert httpx.get(f"{base}/runs", headers={**ada, "Host": "a.corp.test"}).status_code == 200
        assert httpx.get(f"{base}/runs", headers={**ada, "Host": "evil.test"}).status_code == 421
        big = httpx.post(f"{base}/runs", json={"input": "x" * 300}, headers=ada)
        assert big.status_code == 413 and "200 bytes" in big.json()["error"]
    finally:
        _stop(server)


def test_insecure_no_auth_listens_on_every_address_when_told(tmp_path: Path) -> None:
    port = free_port()
    args = ["tests.serve_agents:support", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--port", str(port)]
    server = _cli(*args, "--host", "0.0.0.0", "--insecure-no-auth")
    try:
        assert server.stdout is not None
        assert "without auth" in server.stdout.readline()  # it says so when it starts
        _served(server, f"http://127.0.0.1:{port}")
        assert httpx.get(f"http://127.0.0.1:{port}/runs").status_code == 200
    finally:
        _stop(server)
