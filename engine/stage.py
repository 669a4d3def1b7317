"""The loop's stages: the states of the machine, and which of them end a run."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """A named state of the agent loop. The value is the state's name in the machine."""

    START = "start"
    PREPROCESS = "preprocess"
    REASON = "reason"
    POSTPROCESS = "postprocess"
    ACT = "act"
    DECIDE = "decide"
    SALVAGE = "salvage"
    TRANSFER = "transfer"
    SUSPENDED = "suspended"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINALS: frozenset[Stage] = frozenset({Stage.DONE, Stage.FAILED, Stage.CANCELLED})
"""A run that enters one of these has ended; they have no outgoing rows."""
WAITING: frozenset[Stage] = frozenset({Stage.SUSPENDED})
"""A run that enters one of these pauses (the runner returns) until it is resumed."""
