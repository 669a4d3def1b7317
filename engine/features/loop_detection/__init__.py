"""loop_detection: the same tool call over and over, caught without a model (on by default).

An agent with tools runs on the core composed with this feature unless its limits say
``Limits(max_repeated_calls=None)``. With ``max_repeated_calls=N`` (default 3):

- act's gate counts replies in a row that ask for the very same tool calls (same tools, same
  arguments, same order; failing or not; identical calls side by side in one reply are the
  model's choice, not a loop). The ``N``-th such reply in a row is not run: the result of each
  of its calls is the *nudge*, an error result telling the model it is repeating itself and
  what to do instead (an ``error_occurred`` event of kind ``repeated_calls`` says so too);
- the guard ``not_repeating_calls`` (the budget ``max_repeated_calls``) is required in front of
  ``decide -> preprocess``: one more such reply after the nudge and the run can no longer go
  round, so it takes ``decide -> salvage`` with ``RunResult.limit == "max_repeated_calls"``
  (or ends with outcome ``"limit"`` when salvage is off).

So a model that calls the same tool for ever makes at most ``N + 1`` such replies, and the tool
runs at most ``N - 1`` times. Its slice, :class:`Repeats`, is saved with the run. After a
compaction (which rewrites the history) the streak starts again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from loopwright.data.events import ErrorInfo, ErrorOccurred, Message, ToolCall, ToolResult
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.calls import result
from loopwright.runtime.context import RunContext
from loopwright.table.budgets import Budget
from loopwright.table.machine import ACT, DECIDE, PRE, Extension

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

    at: int = -1
    """Where in the history the latest counted reply is (-1: none yet)."""
    streak: int = 0
    """How many replies in a row, up to that one, asked for the very same tool calls."""


def repeats(rs: RunState) -> Repeats:
    return rs.features[NAME]  # type: ignore[no-any-return]


def repeated_calls(rs: RunState) -> int:
    """Replies in a row with the same tool calls, at the end of the run so far (0 for a run
    state without this feature's slice)."""
    r = rs.features.get(NAME)
    return r.streak if r is not None else 0


def same_calls(a: Message, b: Message) -> bool:
    """Two replies ask for the same tool calls (same tools, same arguments, same order)."""
    pa, pb = a.parts, b.parts
    if len(pa) == 1 and len(pb) == 1:  # the usual reply: one part (no zip for it)
        x, y = pa[0], pb[0]
        if type(x) is ToolCall and type(y) is ToolCall:
            return x.name == y.name and x.args == y.args
    if len(pa) == len(pb):  # the usual shape: compare in place, stop at the first difference
        for x, y in zip(pa, pb, strict=True):
            if type(x) is not type(y):
                break
            if type(x) is ToolCall and (x.name != y.name or x.args != y.args):  # type: ignore[union-attr]
                return False
        else:
            return True
    calls_a = [p for p in pa if type(p) is ToolCall]
    calls_b = [p for p in pb if type(p) is ToolCall]
    return len(calls_a) == len(calls_b) and all(
        x.name == y.name and x.args == y.args for x, y in zip(calls_a, calls_b, strict=True)
    )


def _streak_within_cap(rs: RunState) -> bool:
    """Room while the streak is at most the cap (the budget's test, in one function: it runs
    at every pass through decide)."""
    cap = rs.limits.max_repeated_calls
    r = rs.features.get(NAME)
    return cap is None or r is None or r.streak <= cap


REPEATED_CALLS = Budget(
    "max_repeated_calls",
    "repeats of the same tool call (max_repeated_calls={value})",
    "not_repeating_calls",
    used=repeated_calls,
    room=_streak_within_cap,
    inclusive=True,
)
"""Room while the streak is at most the cap: the call that reaches it is the nudge, the one
after it ends the loop."""
not_repeating_calls = REPEATED_CALLS.guard


def count_repeats(call: ToolCall, rs: RunState, ctx: RunContext) -> ToolResult | None:
    """act's gate: at a reply's first call, count the reply into the streak (it asks for the
    same calls as the previous reply, or starts a new streak); at the cap, answer every call of
    the reply with the nudge instead of running it (past the cap, with a note that the run stops)."""
    if rs.stage != ACT:
        return None  # a call that waited, run now (approved): counted, and let through, in act already
    r = rs.features[NAME]
    here = len(rs.messages) - 1  # act runs right after postprocess appended the reply
    if r.at != here:
        previous = rs.messages[r.at] if 0 <= r.at < here else None
        r.streak = r.streak + 1 if previous is not None and same_calls(previous, rs.messages[here]) else 1
        r.at = here
    cap = rs.limits.max_repeated_calls
    if cap is None or r.streak < cap:
        return None
    shown = f"{call.name}({json.dumps(call.args, sort_keys=True, default=str)})"
    text = (NUDGE if r.streak == cap else STOPPED).format(call=shown, count=r.streak)
    ctx.emit(ErrorOccurred, error=ErrorInfo(kind="repeated_calls", message=f"{shown}: {text}"))
    return result(call, text, True)


def watches_repeats(agent: Agent) -> bool:
    """Some agent of the tree has tools, and the agent's limits cap repeats (``max_repeated_calls``
    is not None)."""
    return agent.limits.max_repeated_calls is not None and any(a.tools or a.toolsets for a in agent.walk())


LOOP_DETECTION = Extension(
    name=NAME,
    applies_to=watches_repeats,
    require={(DECIDE, PRE): (not_repeating_calls,)},
    budgets=[REPEATED_CALLS],
    guards={"not_repeating_calls": not_repeating_calls},
    slice=Repeats,
    gate=count_repeats,
)
"""Loop detection without a model: a gate that nudges and a guard that stops, as one feature."""
