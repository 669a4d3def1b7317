"""The options of a new run (``Runner.run``, ``run_sync``, ``stream``, ``start``, ``new_run``) and
its default id."""

from __future__ import annotations

import os
from typing import Any, TypedDict

from pydantic import JsonValue

from ..data.result import RunResult


def new_run_id() -> str:
    """A new run id: 32 random hex digits (``uuid4().hex``'s form, at a fifth of its cost)."""
    return os.urandom(16).hex()


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
