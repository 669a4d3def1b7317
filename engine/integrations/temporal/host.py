"""One agent's home in a process that runs Temporal workflows and activities: its
:class:`~loopwright.Runner` (the machine, the handlers), the deps its runs get, the store of a
workflow agent's children, and the activities' timing."""

from __future__ import annotations

from dataclasses import dataclass

from ...loop.runner import Runner
from ...stores.base import RunStore, SavedRun, StoreWrapper
from ...workflows.base import Workflow


class DrivenRunner(Runner):
    """The Runner of an agent whose runs Temporal drives: the workflow takes the transitions, the
    activities do the stages, each on a Run of its own. Observers that trace runs leg by leg
    (OpenTelemetry's ``Tracing``) get each leg from the workflow when it stops (``trace_leg``),
    not from these Runs (which the workflow makes again on every replay)."""

    legs_traced_by_engine = True


@dataclass(eq=False)
class Host:
    runner: Runner
    heartbeat_s: float = 10.0
    """An activity's worker is taken for dead when it sends no heartbeat for this long (the
    stage is then scheduled again, on any worker: its calls that completed are kept)."""
    activity_timeout_s: float = 3600.0
    """The longest a stage's activity may take when the run has no ``timeout_s``."""
    store: RunStore | None = None
    """Where a workflow agent's children are checkpointed (without: a lost stage runs its children again)."""

    local: frozenset[str] = frozenset()
    """The stages run as local activities (on the workflow's worker, recorded without a round
    trip to the server): the core's bookkeeping stages, which call no model and no tool."""

    @property
    def has_children(self) -> bool:
        """The agent's tree holds a workflow agent (its stages run nested runs)."""
        return any(isinstance(agent, Workflow) for agent in self.runner.tree)


class Followed(StoreWrapper):
    """The children's store as a re-run stage reads it: Temporal gave this worker the stage (its
    first worker is gone), so a child checkpointed there is taken over at once, its lease not
    waited for (its saved ``updated`` time is read as long ago)."""

    async def load(self, run_id: str) -> SavedRun | None:
        saved = await self.inner.load(run_id)
        if saved is not None:
            saved.updated = 0.0
        return saved


__all__ = ["DrivenRunner", "Followed", "Host"]
