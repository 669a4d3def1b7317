"""Temporal runs' shared names: the workflow's, activities', update's, signal's and query's
names, and this process's agents by name (a worker's workflow finds its agent here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.errors import ConfigurationError
from ..recorded import ReplayDivergence as ReplayDivergence  # (one class: DBOS and Temporal replays)
from ..recorded import agent_in

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
RESULT = "loopwright:result"
"""The query: the run's RunResult as it stands (its events so far), as JSON (the trace page's)."""
QUEUE = "loopwright"
"""The default task queue."""

HOSTS: dict[tuple[str, str], Host] = {}
"""This process's agents by task queue and name (a :class:`~loopwright.integrations.temporal.TemporalRunner`'s
worker puts its own here): the workflow and the activities find the agent, its machine and its
deps here. Keyed by the queue too, so two workers of one process may run two agents of one name
(an old machine and a new one, on two queues)."""


def host_for(queue: str, name: str) -> Host:
    """The agent ``name`` of this process's worker on ``queue`` (ConfigurationError naming those it has)."""
    on_queue = {agent: host for (q, agent), host in HOSTS.items() if q == queue}
    return agent_in(
        on_queue,
        name,
        where=f"has a worker on task queue {queue!r} in this process",
        fix="make TemporalRunner(agent, ...) for it in the worker's module and run its worker()",
    )


def hold(queue: str, name: str, host: Host) -> None:
    """``host`` serves agent ``name`` on ``queue`` in this process; another host there already is
    a clash (ConfigurationError naming it): one process, one agent of a name on a queue."""
    there = HOSTS.get((queue, name))
    if there is not None and there is not host:
        raise ConfigurationError(
            f"two TemporalRunners for agent {name!r} on task queue {queue!r} in one process: a worker of the "
            "first one is running (or was made and never run). Run one worker per agent and queue (both "
            "TemporalRunners would take the same workflows), or give the second its own task_queue="
        )
    HOSTS[(queue, name)] = host


def let_go(queue: str, name: str, host: Host) -> None:
    """``host``'s worker on ``queue`` has stopped: the name is free there again."""
    if HOSTS.get((queue, name)) is host:
        del HOSTS[(queue, name)]


def activity_name(stage: str) -> str:
    return ACTIVITY.format(stage=stage)
