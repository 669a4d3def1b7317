"""What the durable engines' integrations (DBOS, Temporal) share: a stage's work is recorded once
(a DBOS step, a Temporal activity) and the run state after it is folded from its output, on the
first execution and on every replay alike. Private: the public names are in each integration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from ..data.errors import ConfigurationError, LoopwrightError
from ..data.events import ErrorInfo, Message
from ..data.run_state import RunState
from ..durable.codec import load_message
from ..loop.runner import Run
from ..table.machine import Row, abort_row

T = TypeVar("T")


class ReplayDivergence(LoopwrightError, RuntimeError):
    """A run's recorded history does not follow the agent's current machine: replaying it chose
    another transition than the run took (DBOS's recorded steps, Temporal's replayer)."""


def messages_kept(before: list[Message], after: list[Message]) -> int:
    """How many messages of ``before`` begin ``after`` (all of them, unless the stage rewrote
    the history: compaction)."""
    n = len(before)
    if len(after) >= n and after[:n] == before:
        return n
    kept = 0
    for old, new in zip(before, after, strict=False):
        if old is not new and old != new:
            break
        kept += 1
    return kept


def fold(rs: RunState, out: Mapping[str, Any]) -> RunState:
    """The run state after a recorded stage, from the state before it (``rs``): the stage's
    head, the messages it kept and those it added; the trace is the workflow's own (transitions
    are taken outside the recorded work)."""
    keep = out["keep"]
    if keep > len(rs.messages):
        raise ReplayDivergence(
            f"the recorded stage {out['stage']!r} kept {keep} messages of a history of {len(rs.messages)}: the "
            "recorded stages do not follow one another (replay them all, in order, from the run's first)"
        )
    new = RunState.from_json(out["head"])
    new.messages = [*rs.messages[:keep], *(load_message(m) for m in out["messages"])]
    new.trace = rs.trace
    return new


def row_after(run: Run, stage: str, out: Mapping[str, Any]) -> Row:
    """The row out of ``stage`` given the recorded output (pure: the machine's guards)."""
    if out.get("raised") is not None:
        run.state.error = ErrorInfo(kind="stage", message=f"stage {stage!r} raised {out['raised']}")
        return abort_row(stage)
    return run.choose()


async def within_deadline(waits: Awaitable[Any], rs: RunState) -> None:
    """Await a stage's work, cut short by the run's deadline (``rs.deadline``, wall-clock
    seconds: the workflow set it from its own clock): past it, ``rs.deadline_hit``."""
    if rs.deadline is None:
        await waits
        return
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + (rs.deadline - time.time())):
            await waits
    except TimeoutError:
        rs.deadline_hit = True


def agent_in(table: Mapping[str, T], name: str, *, where: str, fix: str) -> T:
    """This process's entry for agent ``name`` in ``table`` (the agents a worker runs, by name);
    a ConfigurationError naming the agents it has and ``fix`` when there is none."""
    found = table.get(name)
    if found is None:
        known = ", ".join(sorted(table)) or "none"
        raise ConfigurationError(f"no agent named {name!r} {where} (known: {known}); {fix}")
    return found
