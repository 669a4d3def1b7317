"""A real PostgreSQL server for the tests (a pytest plugin, loaded by conftest.py).

``pg_dsn`` (session): ``LOOPWRIGHT_PG_DSN`` when set; else a throwaway server started with the
machine's ``initdb``/``pg_ctl`` on 127.0.0.1 and a free port, its data under /tmp, run as the
unprivileged user ``nobody`` when the tests run as root (PostgreSQL refuses to run as root),
stopped and removed at the end. ``pg_url`` (per test): a fresh database on that server.

Without the binaries (or psycopg) the PostgreSQL tests are skipped with a warning that says so
on a developer's machine, and FAIL under CI (``CI`` set): CI must run them (``.ci/run``
installs PostgreSQL).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

SKIP_MESSAGE = (
    "PostgreSQL tests SKIPPED: no PostgreSQL server binaries (initdb, pg_ctl) or no psycopg here; "
    "install them (apt-get install postgresql; pip install -e '.[dev]') or set LOOPWRIGHT_PG_DSN"
)


def _binaries() -> tuple[str, str] | None:
    found = shutil.which("initdb"), shutil.which("pg_ctl")
    if all(found):
        return found  # type: ignore[return-value]
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        initdb, pg_ctl = os.path.join(folder, "initdb"), os.path.join(folder, "pg_ctl")
        if os.access(initdb, os.X_OK) and os.access(pg_ctl, os.X_OK):
            return initdb, pg_ctl
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}; .ci/run installs PostgreSQL", pytrace=False)
    warnings.warn(SKIP_MESSAGE + f" ({reason})", pytest.PytestWarning, stacklevel=2)
    pytest.skip(SKIP_MESSAGE + f" ({reason})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    given = os.environ.get("LOOPWRIGHT_PG_DSN")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed")
    if given:
        yield given
        return
    found = _binaries()
    if found is None:
        _unavailable("initdb/pg_ctl were not found on PATH or in /usr/lib/postgresql/*/bin")
    assert found is not None
    initdb, pg_ctl = found
    as_user: dict[str, Any] = {}
    root = tempfile.mkdtemp(prefix="loopwright-pg-", dir="/tmp")
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as nobody
        nobody = pwd.getpwnam("nobody")
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
    data, port = os.path.join(root, "data"), _free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=root, **as_user)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    try:  # whatever fails, the server is stopped and its folder removed
        run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -h 127.0.0.1 -k {root} -F -c fsync=off -c full_page_writes=off"
        run(pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-o", options, "-w", "-t", "60", "start")
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60, cwd=root, **as_user
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:
    """A fresh, empty database on the test server (dropped afterwards)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    base, _, _db = pg_dsn.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
