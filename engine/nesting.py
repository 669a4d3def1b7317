"""Runs nested in tools: a run started while a tool of another run is executing is that run's
child.

A child charges its parent: it starts with the parent's remaining room in ``max_iterations``
(model passes), ``max_tool_calls`` and ``max_total_tokens`` as its own caps (where those are
smaller than its agent's), ends by the parent's deadline at the latest, and when it ends its
passes, tool calls and tokens are added to the parent's counters. Runs nest at most
``Limits.max_depth`` deep (the root's); a run past it is refused with a
:class:`ConfigurationError`, which the calling tool's result reports to the model.

The link is a context variable set while a run's tools run (:func:`enter_tools`), so it reaches
runs started in a tool's own task, in tasks it creates, and in a sync tool's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, NamedTuple

from .errors import ConfigurationError
from .run_state import RunState

_charging = threading.Lock()


class Parent(NamedTuple):
    """The run whose tool is running, and how deep it is (a top-level run is 0)."""

    state: RunState
    depth: int


_PARENT: ContextVar[Parent | None] = ContextVar("loopwright_parent_run", default=None)
_DEPTHS: dict[int, int] = {}
"""How deep each child run in progress is (by ``id`` of its RunState; top-level runs are not here)."""


def link(rs: RunState) -> Parent:
    """What runs started in the tools of the run ``rs`` see as their parent (the same for the
    whole run: its context keeps it)."""
    return Parent(rs, _DEPTHS.get(id(rs), 0))


enter_tools: Callable[[Parent], Token[Parent | None]] = _PARENT.set
"""``enter_tools(link(rs))``: tools of the run ``rs`` are about to run; runs started from them
are its children (until ``leave_tools(token)``). The context variable's own methods: no frame."""
leave_tools: Callable[[Token[Parent | None]], None] = _PARENT.reset


def parent() -> Parent | None:
    return _PARENT.get()


def adopt(rs: RunState, up: Parent) -> None:
    """Make the new run ``rs`` a child of ``up``: check the depth, cap its budgets by the
    parent's room, bound it by the parent's deadline."""
    top = up.state.limits
    depth = up.depth + 1
    if depth > top.max_depth:
        raise ConfigurationError(
            f"run {rs.run_id!r} would nest {depth} deep in tools of run {up.state.run_id!r}, past its "
            f"max_depth={top.max_depth}; answer without starting another run (or raise Limits.max_depth)"
        )
    room: dict[str, Any] = {}
    iterations = top.max_iterations - up.state.iteration
    if iterations <= 0:
        raise ConfigurationError(
            f"run {up.state.run_id!r} has spent its max_iterations={top.max_iterations}; a run started in its tool "
            "would have no model calls left"
        )
    room["max_iterations"] = min(rs.limits.max_iterations, iterations)
    for name, used in (("max_tool_calls", up.state.tool_calls_made), ("max_total_tokens", up.state.usage.total_tokens)):
        cap = getattr(top, name)
        if cap is not None:
            left = cap - used
            if left <= 0:
                raise ConfigurationError(
                    f"run {up.state.run_id!r} has spent its {name}={cap}; no run can start in its tool"
                )
            own = getattr(rs.limits, name)
            room[name] = left if own is None else min(own, left)
    rs.limits = rs.limits.model_copy(update=room)
    if up.state.deadline is not None and (rs.deadline is None or up.state.deadline < rs.deadline):
        rs.deadline = up.state.deadline
    _DEPTHS[id(rs)] = depth


def charge(rs: RunState) -> None:
    """The child run ``rs`` has ended: add its passes, tool calls and tokens to its parent's."""
    up = _PARENT.get()
    if up is None:
        return
    _DEPTHS.pop(id(rs), None)
    with _charging:
        parent_state = up.state
        parent_state.iteration += rs.iteration
        parent_state.tool_calls_made += rs.tool_calls_made
        parent_state.usage = parent_state.usage + rs.usage
