"""A nested run resumed: it rejoins the runs above (:mod:`loopwright.runtime.nesting`).

A child that suspends (waits for a person) or is paused sends what it spent and drops its
link. Resumed while a tool of another run is running (a workflow resuming its child after a
confirmation, or after a crash with a store), it is that run's child again: :func:`rejoin`
(``Run.run_to_end`` of every resume) links it at the next depth, with what it has spent plus
the room left above as its caps (``max_iterations``, ``max_tool_calls``, ``max_total_tokens``,
``max_cost_usd``, where lower than its own) and the parent's deadline. It never raises: with
no room left its caps are what it has spent, so its table stops it at its next decide.

What it sends up from there depends on what the runs above already hold of it (:class:`Had`):
all of it, sent when it stopped, unless the caller says otherwise with :data:`had` (a workflow
resumed from its own checkpoint after a crash: ``engine/workflows/children.py``); a child that
ended before such a crash is read back with :func:`absorb`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from decimal import Decimal
from typing import Any, NamedTuple

from ..data.events import ZERO_USAGE, Usage
from ..data.run_state import RunState
from .nesting import _PARENT, _UPS, CostUp, Up, _by_deadline, _charging, _link


class Had(NamedTuple):
    """What the runs above hold of a child's spend when it is resumed: its tool calls, usage and
    passes (a workflow resumed from its own checkpoint holds none of what its child spent after it)."""

    calls: int
    usage: Usage
    passes: int


NOTHING = Had(0, ZERO_USAGE, 0)
_HAD: ContextVar[Had | None] = ContextVar("loopwright_resumed_child_had", default=None)
had: Callable[[Had | None], Token[Had | None]] = _HAD.set
"""``token = had(NOTHING)`` around a resume of a child whose worker died: the runs above hold
none of its spend (else: all of it, sent when it suspended or was paused); ``_HAD.reset(token)``."""
had_reset: Callable[[Token[Had | None]], None] = _HAD.reset


def rejoin(rs: RunState) -> Up | None:
    """The run ``rs`` is resumed: started again inside a tool of another run (a workflow
    resuming its child), it is that run's child again, with the room left above (over what it
    has spent) as its caps and the parent's deadline; its link (None: a top-level run)."""
    up = _PARENT.get()
    found = _UPS.get(id(rs))
    if up is None or found is not None:
        return found
    link_ = _link(rs, up.state, up.depth + 1)
    _take_over(rs, link_, _HAD.get())
    own = rs.limits
    room = _room_over(rs, link_)
    if room:
        rs.limits = own.model_copy(update=room)
    _by_deadline(rs, up.state)
    _UPS[id(rs)] = link_
    return link_


def _take_over(rs: RunState, link_: Up, had: Had | None) -> None:
    """What the runs above hold of the resumed child ``rs``: all it spent (None: it suspended or
    was paused, and sent it then), or ``had`` (the rest, and its passes, go up now)."""
    if had is None:
        link_.sent_calls, link_.sent_usage = rs.tool_calls_made, rs.usage
        return
    link_.sent_calls, link_.sent_usage = had.calls, had.usage
    with _charging:
        for above in link_.above:
            above.iteration += max(rs.iteration - had.passes, 0)
    link_.send(rs)


def _room_over(rs: RunState, link_: Up) -> dict[str, Any]:
    """The resumed child's caps the room left above lowers: what it has spent plus that room."""
    own = rs.limits
    room: dict[str, Any] = {}
    passes = rs.iteration + max(link_.passes_left(), 0)
    if passes < own.max_iterations:
        room["max_iterations"] = passes
    calls = link_.tool_call_room()
    if calls is not None and (own.max_tool_calls is None or rs.tool_calls_made + max(calls[0], 0) < own.max_tool_calls):
        room["max_tool_calls"] = rs.tool_calls_made + max(calls[0], 0)
    tokens, spent = link_.token_room(), rs.usage.total_tokens
    if tokens is not None and (own.max_total_tokens is None or spent + max(tokens, 0) < own.max_total_tokens):
        room["max_total_tokens"] = spent + max(tokens, 0)
    cost = link_.cost_room() if isinstance(link_, CostUp) else None
    if cost is not None and rs.usage.cost_usd is not None:
        mine = rs.usage.cost_usd + max(cost, Decimal(0))
        if own.max_cost_usd is None or mine < Decimal(str(own.max_cost_usd)):
            room["max_cost_usd"] = float(mine)
    return room


def absorb(parent: RunState, child: RunState) -> None:
    """The child ``child`` of the run ``parent`` ended before the worker running them died; the
    parent, resumed from its own checkpoint, reads it back and takes its spend (its tool calls,
    usage and passes) with the runs above."""
    link_ = _link(child, parent, 0)
    with _charging:
        for above in link_.above:
            above.iteration += child.iteration
    link_.send(child)
