"""DBOS runs' shared names: the workflow's, step's, queue's and events' names, this process's
agents (:func:`register`) and its runs in progress (:data:`LIVE`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ...data.errors import ConfigurationError
from ...loop.runner import Run, Runner
from ...runtime.agent import Agent
from ..recorded import ReplayDivergence as ReplayDivergence  # (one class: DBOS and Temporal replays)
from ..recorded import agent_in

try:  # every DBOS module takes DBOS from here: one helpful error without the extra
    from dbos import DBOS as DBOS
    from dbos import DBOSClient as DBOSClient
    from dbos import EnqueueOptions as EnqueueOptions
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwright.integrations.dbos needs the dbos package: pip install 'loopwright[dbos]'"
    ) from _missing

APP = "loopwright"
"""The DBOS application name of loopwright's workflows and queues."""
QUEUE = "loopwright"
"""The default queue."""
WORKFLOW = "loopwright.run"
STEP = "loopwright.stage"
TOPIC = "decisions"
"""The ``DBOS.send`` topic a suspended run receives its decisions on."""
STATUS = "status"
"""The DBOS event a run sets when it suspends, is refused decisions, or ends."""
CANCEL = "loopwright_cancel"
"""The workflow attribute (and decisions message key) ``Client.cancel`` sets; each worker looks
for it among its runs every ``cancel_poll_s`` and cancels them."""
RESULT = "loopwright.result"
"""Each completed tool call's result is kept, as it completes, in the DBOS event
``loopwright.data.result:<step id>:<call id>`` (set from inside the step)."""
RUNNERS: dict[str, Runner] = {}
"""This process's agents by name (:func:`register`)."""
LIVE: dict[str, Live] = {}
"""The runs whose workflow is in progress in this process, by run id."""


@dataclass(eq=False)
class Live:
    run: Run
    executed: bool = False
    """The latest step ran here (else DBOS returned its recorded output)."""
    first: bool = True
    """No step has run yet in this execution of the workflow: the next one to run may be the
    one in flight when a worker died, and finds the results its calls kept."""
    cancel: bool = False
    """``Client.cancel`` asked for this run: its next step (or the one in progress) cancels it."""
    in_stage: bool = False
    """A stage's handler is running (in ``task``, on ``loop``): a cancel interrupts it."""
    task: asyncio.Task[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None


def register(*agents: Agent, deps: Any = None, unverified: bool = False) -> None:
    """Make ``agents`` runnable by this process's workflows (by name). Call it in every worker
    before :func:`launch`; the same names everywhere. ``deps``: their runs' dependencies
    (``ctx.deps``) in this worker; they are never saved, so each worker hands its own.
    An agent whose machine :func:`~loopwright.machines.verify` rejects is refused (MachineError)
    unless ``unverified=True``, as :class:`~loopwright.Runner` refuses it."""
    for agent in agents:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"register() takes Agents, got {type(agent).__name__}")
        runner = RUNNERS[agent.name] = Runner(agent, unverified=unverified)
        runner.deps = deps


def runner_for(name: str) -> Runner:
    """The runner of the agent registered as ``name`` (ConfigurationError naming the registered ones)."""
    return agent_in(
        RUNNERS,
        name,
        where="is registered in this process",
        fix="call loopwright.integrations.dbos.register(agent) in the worker's app module",
    )
