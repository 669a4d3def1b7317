"""The core loop's stages: the states of the core machine, and which of them end a run.

Features add states of their own (``transfer``, ``suspended``, a user's ``review``); they are
plain strings, named by the feature that adds them.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """A named state of the core loop. The value is the state's name in the machine."""

    START = "start"
    PREPROCESS = "preprocess"
    REASON = "reason"
    POSTPROCESS = "postprocess"
    ACT = "act"
    DECIDE = "decide"
    SALVAGE = "salvage"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINALS: frozenset[str] = frozenset({Stage.DONE, Stage.FAILED, Stage.CANCELLED})
"""A run that enters one of these has ended; they have no outgoing rows."""
