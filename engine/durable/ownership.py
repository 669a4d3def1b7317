"""Who runs a run: worker tokens, and whether a token's worker may still be running.

A worker token is ``host|pid|token``. A run's worker is alive when it is this process and its
checkpointer runs the run, a live process (not a zombie) on this host, or, on another host, it
checkpointed less than ``lease_s`` seconds ago. Resumes (:class:`loopwright.durable.checkpoint.Durable`) and
the DBOS runner's recovery (:func:`loopwright.integrations.dbos.recover_dead`) ask it.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
import uuid
import weakref
from typing import Protocol


class Worker(Protocol):
    """A run's worker in this process (a :class:`~loopwright.durable.checkpoint.Checkpointer`)."""

    def running(self) -> bool: ...


_HOST = socket.gethostname()
LIVE: weakref.WeakValueDictionary[str, Worker] = weakref.WeakValueDictionary()
"""This process's checkpointers of runs in progress, by owner token."""


_OWNER_PREFIX = uuid.uuid4().hex[:8]
_owners = itertools.count(1)


def new_owner() -> str:
    """A worker token: host, process id, and a part unique in this process (a random prefix,
    drawn once, and a counter: no system call for randomness per run)."""
    return f"{_HOST}|{os.getpid()}|{_OWNER_PREFIX}{next(_owners):x}"


def owner_alive(owner: str, updated: float, lease_s: float) -> bool:
    """Whether the worker ``owner`` may still be running its run."""
    host, _, rest = owner.partition("|")
    pid_text, _, _token = rest.partition("|")
    if host != _HOST:
        return time.time() - updated < lease_s
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        cp = LIVE.get(owner)
        return cp is not None and cp.running()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_a_zombie(pid)


def _not_a_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
