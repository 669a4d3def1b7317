"""The options of a new run (``Runner.run``, ``run_sync``, ``stream``, ``start``, ``new_run``) and
its default id."""

from __future__ import annotations

import os
from typing import Any, TypedDict

from pydantic import JsonValue

from ..data.result import RunResult

_IDS: list[str] = []
"""Run ids drawn ahead, 64 at a time (one ``getrandom`` system call for 64 runs); a child
process starts without them (``os.register_at_fork``), so no two processes share one."""
_AHEAD = 64


def new_run_id() -> str:
    """A new run id: 32 random hex digits (``uuid4().hex``'s form), from ``os.urandom`` as
    ``uuid4`` is, drawn 64 at a time (``list.pop`` hands each out once, whatever the thread)."""
    try:
        return _IDS.pop()
    except IndexError:
        drawn = os.urandom(16 * _AHEAD).hex()
        _IDS.extend([drawn[i : i + 32] for i in range(32, 32 * _AHEAD, 32)])
        return drawn[:32]


if hasattr(os, "register_at_fork"):  # (not on Windows, which does not fork)
    os.register_at_fork(after_in_child=_IDS.clear)


class RunOptions(TypedDict, total=False):
    """Options of a new run (``run``, ``run_sync``, ``stream``, ``start``, ``new_run``)."""

    run_id: str | None
    """The run's id (default: 32 new random hex digits); ``runner.cancel(run_id)`` uses it."""
    state: dict[str, JsonValue] | None
    """Session state: instruction placeholders read it, tools read and write it."""
    after: RunResult | None
    """A finished run of this conversation: continue its history and state, with the agent
    that answered last."""
    agent: str | None
    """Which agent of the tree takes this message (default: as ``after`` says, else the root)."""
    session: tuple[str, str, str] | None
    """``(app, user, session_id)``: the run starts from that session's conversation and state and
    saves its end there (``run``/``run_sync`` of a Runner with ``sessions=``; :mod:`loopwright.loop.sessions`)."""
    deps: Any
    """The run's dependencies, any object: ``ctx.deps`` in tools, instructions and callbacks.
    Never saved with the run (like credentials): hand them again to ``resume(..., deps=...)``."""


OPTIONS = frozenset(RunOptions.__annotations__)
"""The names :class:`RunOptions` takes."""
OPTION_NAMES = ", ".join(RunOptions.__annotations__)
