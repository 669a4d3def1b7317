"""Temporal runs' shared names: the workflow's, activities', update's, signal's and query's
names, and this process's agents by name (a worker's workflow finds its agent here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.errors import ConfigurationError
from ..recorded import ReplayDivergence as ReplayDivergence  # (one class: DBOS and Temporal replays)

try:  # every Temporal module takes temporalio through here: one helpful error without the extra
    import temporalio as temporalio
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwright.integrations.temporal needs the temporalio package: pip install 'loopwright[temporal]'"
    ) from _missing

if TYPE_CHECKING:
    from .host import Host

WORKFLOW = "loopwright:run"
"""The workflow type of every run (its input names the agent)."""
ACTIVITY = "loopwright:{stage}"
"""Each stage's work is an activity of this type (``loopwright:reason``: a model call,
``loopwright:act``: the turn's tool calls)."""
WAIT = "loopwright:wait"
"""The update that returns the run's result once it stops (suspended, paused or ended)."""
DECIDE = "loopwright:decide"
"""The update that hands a suspended run its decisions (or a paused run its go-ahead)."""
PAUSE = "loopwright:pause"
"""The signal that pauses a run at its next transition."""
STATE = "loopwright:state"
"""The query: the run's state and its place in the machine."""
QUEUE = "loopwright"
"""The default task queue."""

HOSTS: dict[str, Host] = {}
"""This process's agents by name (a :class:`~loopwright.integrations.temporal.TemporalRunner` puts
its own here): the workflow and the activities find the agent, its machine and its deps here."""


def host_for(name: str) -> Host:
    host = HOSTS.get(name)
    if host is None:
        known = ", ".join(sorted(HOSTS)) or "none"
        raise ConfigurationError(
            f"no agent named {name!r} has a TemporalRunner in this worker (known: {known}); make "
            "TemporalRunner(agent, ...) for it in the worker's module"
        )
    return host


def activity_name(stage: str) -> str:
    return ACTIVITY.format(stage=stage)
