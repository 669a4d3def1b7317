"""A workflow agent's children on DBOS: checkpointed within the parent's step, in a run store
on the DBOS system database.

DBOS does not let a step start workflows (a step's work is one recorded function), and each
stage of a workflow agent is a step, so its children cannot be DBOS child workflows. They run
inside the step as nested runs (:mod:`loopwright.workflows.children`) and are checkpointed at
every transition in loopwright's run store on the same database as DBOS's tables (the SQLite
file or the PostgreSQL database given to :func:`~loopwright.integrations.dbos.workflow.launch`;
the store's tables are ``lw_``-prefixed, beside DBOS's), under ``run_id.key``. A step that runs
again after its worker died finds them there: a child that ended is read back, not run again,
a child that was running goes on from its last checkpoint (its calls that completed are kept
as they complete), a child that waits for a person is resumed with the decisions the workflow
received. DBOS decides which worker holds a run; a recovered step's children follow it
(:class:`Followed`: their stored owner, the dead worker, is not waited for).
"""

from __future__ import annotations

import asyncio
import weakref

from ...loop.runner import Runner
from ...stores.base import RunStore, SavedRun, StoreWrapper
from ...workflows.base import Workflow

DB: list[str] = []
"""The DBOS system database of this launched process (``launch`` sets it)."""
_SQLITE: dict[str, RunStore] = {}
_POSTGRES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RunStore] = weakref.WeakKeyDictionary()
"""A PostgreSQL store's pool belongs to an event loop: one store per loop."""


class Followed(StoreWrapper):
    """The children's store: a child is taken over from the worker that checkpointed it
    whenever the workflow that holds it runs here, since DBOS gave this worker that workflow
    (a step runs again only when the worker that ran it is gone): its saved ``updated`` time
    is read as long ago, so a lease on another host is not waited for."""

    async def load(self, run_id: str) -> SavedRun | None:
        saved = await self.inner.load(run_id)
        if saved is not None:
            saved.updated = 0.0
        return saved


def has_children(runner: Runner) -> bool:
    """Whether ``runner``'s agents include a workflow agent (its runs have children)."""
    return any(isinstance(agent, Workflow) for agent in runner.tree)


async def children_store() -> RunStore | None:
    """The store of this process's workflow children (None before ``launch``)."""
    if not DB:
        return None
    url = DB[0]
    if url.startswith("sqlite:"):
        found = _SQLITE.get(url)
        if found is None:
            found = _SQLITE[url] = Followed(await _open(url))
        return found
    loop = asyncio.get_running_loop()
    found = _POSTGRES.get(loop)
    if found is None:
        found = _POSTGRES[loop] = Followed(await _open(url))
    return found


async def _open(url: str) -> RunStore:
    from ...stores import open_store

    return await open_store(url)
