"""The stage handlers: one module per state of the loop.

A handler is ``handler(rs: RunState, ctx: RunContext)``: it does the stage's work and writes its
results into the run state; the machine then chooses the next state. Stages that wait (for the
model, for tools) are ``async def``; stages that never wait are plain functions, which spares
the hot path a coroutine each (preprocess returns one only when an instruction must be awaited).
``HANDLERS`` maps every working state of the built-in table to its handler (checked at import).
"""

from __future__ import annotations

from loopwright.data.stage import TERMINALS, Stage
from loopwright.table.machine import Handler

from .act import act
from .decide import decide
from .postprocess import postprocess
from .preprocess import preprocess
from .reason import reason
from .salvage import salvage
from .start import start

HANDLERS: dict[str, Handler] = {
    Stage.START: start,
    Stage.PREPROCESS: preprocess,
    Stage.REASON: reason,
    Stage.POSTPROCESS: postprocess,
    Stage.ACT: act,
    Stage.DECIDE: decide,
    Stage.SALVAGE: salvage,
}

_missing = [s.value for s in Stage if s not in TERMINALS and s not in HANDLERS]
if _missing:  # pragma: no cover - a development-time check
    raise ImportError(f"loopwright.states: no handler for working stages {_missing}")

__all__ = [
    "HANDLERS",
    "Handler",
    "act",
    "decide",
    "postprocess",
    "preprocess",
    "reason",
    "salvage",
    "start",
]
