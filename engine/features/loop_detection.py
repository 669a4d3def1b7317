"""loop_detection: the same tool call over and over, caught without a model (on by default).

An agent with tools runs on the core composed with this feature unless its limits say
``Limits(max_repeated_calls=None)``. With ``max_repeated_calls=N`` (default 3):

- act's gate counts identical calls in a row (same tool, same arguments; a call in the same
  reply or in the next one, failing or not). The ``N``-th identical call in a row is not run:
  its result is the *nudge*, an error result telling the model it is repeating itself and what
  to do instead (an ``error_occurred`` event of kind ``repeated_calls`` says so too);
- the guard ``not_repeating_calls`` (the budget ``max_repeated_calls``) is required in front of
  ``decide -> preprocess``: one more identical call after the nudge and the run can no longer go
  round, so it takes ``decide -> salvage`` with ``RunResult.limit == "max_repeated_calls"``
  (or ends with outcome ``"limit"`` when salvage is off).

So a model that calls the same tool for ever makes at most ``N + 1`` such replies, and the tool
runs at most ``N - 1`` times. Its slice, :class:`Repeats`, is saved with the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from loopwright.budgets import Budget
from loopwright.calls import result
from loopwright.context import RunContext
from loopwright.events import ErrorInfo, ErrorOccurred, ToolCall, ToolResult
from loopwright.machine import ACT, DECIDE, PRE, Extension
from loopwright.run_state import RunState

NAME = "loop_detection"

NUDGE = (
    "not run: this is call {count} in a row of {call} with the same arguments, and its result is already "
    "above. Repeating it will not change the result. Use what you have, try other arguments or another "
    "tool, or give your final answer. The same call once more ends the run."
)
STOPPED = "not run: {call} was called {count} times in a row with the same arguments; the run stops here."


@dataclass(slots=True)
class Repeats:
    """The loop-detection slice of a run's state (``RunState.features["loop_detection"]``)."""

    ids: list[str] = field(default_factory=list)
    """The ids of the calls in the streak (a call that waited passes the gate again when it is
    run after the wait: it is counted once)."""
    name: str = ""
    """The latest tool call's tool."""
    args: dict[str, Any] = field(default_factory=dict)
    """The latest tool call's arguments."""
    streak: int = 0
    """How many calls in a row, up to the latest, were that same call."""


def repeats(rs: RunState) -> Repeats:
    return rs.features[NAME]  # type: ignore[no-any-return]


def repeated_calls(rs: RunState) -> int:
    """Identical tool calls in a row at the end of the run so far (0 for a run state without
    this feature's slice)."""
    r = rs.features.get(NAME)
    return r.streak if r is not None else 0


REPEATED_CALLS = Budget(
    "max_repeated_calls",
    "repeats of the same tool call (max_repeated_calls={value})",
    "not_repeating_calls",
    used=repeated_calls,
    inclusive=True,
)
"""Room while the streak is at most the cap: the call that reaches it is the nudge, the one
after it ends the loop."""
not_repeating_calls = REPEATED_CALLS.guard


def count_repeats(call: ToolCall, rs: RunState, ctx: RunContext) -> ToolResult | None:
    """act's gate: count ``call`` into the streak; at the cap, answer it with the nudge instead
    of running it (past the cap, with a note that the run stops)."""
    r = repeats(rs)
    if call.id in r.ids and rs.stage != ACT:
        return None  # a call that waited, run now (approved): counted, and let through, in act already
    if call.name == r.name and call.args == r.args:
        r.streak += 1
        r.ids.append(call.id)
    else:
        r.name, r.args, r.streak, r.ids = call.name, dict(call.args), 1, [call.id]
    cap = rs.limits.max_repeated_calls
    if cap is None or r.streak < cap:
        return None
    shown = f"{call.name}({json.dumps(call.args, sort_keys=True, default=str)})"
    text = (NUDGE if r.streak == cap else STOPPED).format(call=shown, count=r.streak)
    ctx.emit(ErrorOccurred, error=ErrorInfo(kind="repeated_calls", message=f"{shown}: {text}"))
    return result(call, text, True)


LOOP_DETECTION = Extension(
    name=NAME,
    require={(DECIDE, PRE): (not_repeating_calls,)},
    budgets=[REPEATED_CALLS],
    guards={"not_repeating_calls": not_repeating_calls},
    slice=Repeats,
    gate=count_repeats,
)
"""Loop detection without a model: a gate that nudges and a guard that stops, as one feature."""
