"""A2A tasks as loopwright runs: a task's id is its run's id, its state follows the run's outcome,
its artifact is the run's answer, and :class:`RunTaskStore` (the SDK's ``TaskStore``) reads
tasks from the run store, so a task outlives the server that started it.

==============================  =====================================================
the run                         the task
==============================  =====================================================
running (or paused, or its      ``TASK_STATE_WORKING``
server stopped mid-way)
suspended (calls wait)          ``TASK_STATE_INPUT_REQUIRED``: the status message has a text
                                part and a data part ``{"pending": [{call_id, tool,
                                arguments, kind}]}``
final, salvaged                 ``TASK_STATE_COMPLETED``, the answer as artifact ``answer``
limit, failed                   ``TASK_STATE_FAILED``, the error as the status message
cancelled                       ``TASK_STATE_CANCELED``
==============================  =====================================================

The SDK writes each task it serves here as events reach it (:meth:`RunTaskStore.save` keeps the
latest few thousand in memory); a task not in memory is made from the run as the store keeps it.
A task is found only for the user whose run it is (:func:`~.door.user_of` the request): another
user's task is "not found", so the SDK refuses GetTask, CancelTask and messages to it.
A ``CANCELED`` written by the SDK for a task whose run has not ended cancels the run.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Artifact, ListTasksRequest, ListTasksResponse, Message, Role, Task, TaskState, TaskStatus

from ...durable.codec import rebuild
from ...serve.decisions import DecisionIn, ServeError, pending_of
from ...serve.service import Service
from ...stores.base import SavedRun
from .door import user_of

CONTEXT_KEY = "a2a.context_id"
"""Where a run started over A2A keeps its task's ``context_id`` (its state; with sessions the
session keeps it too: it is the session's id)."""

ANSWER = "answer"
"""The id and name of the artifact holding the run's answer."""

_STATES = {
    None: TaskState.TASK_STATE_WORKING,
    "paused": TaskState.TASK_STATE_WORKING,
    "suspended": TaskState.TASK_STATE_INPUT_REQUIRED,
    "final": TaskState.TASK_STATE_COMPLETED,
    "salvaged": TaskState.TASK_STATE_COMPLETED,
    "limit": TaskState.TASK_STATE_FAILED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def agent_message(run_id: str, context_id: str, parts: list[Any], key: str) -> Message:
    """A message of the agent in task ``run_id`` (its id made of the run's and ``key``: the same each time)."""
    return Message(
        message_id=f"{run_id}-{key}", context_id=context_id, task_id=run_id, role=Role.ROLE_AGENT, parts=parts
    )


def pending_part(pending: list[Any]) -> tuple[str, Any]:
    """What a task in ``INPUT_REQUIRED`` says: a line of text and the data part of the pending calls."""
    calls = [{"call_id": p.call_id, "tool": p.tool, "arguments": p.args, "kind": p.kind} for p in pending]
    asks = "; ".join(f"{c['tool']}({json.dumps(c['arguments'])}) waits for a {c['kind']}" for c in calls)
    text = (
        f"{asks}. Answer in this task with a data part "
        '{"decisions": [{"call_id": ..., "action": "approve" | "deny" | "value"}]}'
    )
    return text, new_data_part({"pending": calls})


def task_of(saved: SavedRun) -> Task:
    """The A2A task of a run as the store keeps it."""
    rs = rebuild(saved)
    context_id = str(rs.state.get(CONTEXT_KEY) or saved.run_id)
    state = _STATES.get(saved.outcome, TaskState.TASK_STATE_WORKING)
    task = Task(id=saved.run_id, context_id=context_id, status=TaskStatus(state=state))
    text_in = rs.input if isinstance(rs.input, str) else " ".join(getattr(p, "text", "") for p in rs.input)
    task.history.append(
        Message(
            message_id=f"{saved.run_id}-input",
            context_id=context_id,
            task_id=saved.run_id,
            role=Role.ROLE_USER,
            parts=[new_text_part(text_in)],
        )
    )
    if saved.outcome == "suspended":
        text, data = pending_part(pending_of(rs))
        task.status.message.CopyFrom(agent_message(saved.run_id, context_id, [new_text_part(text), data], "pending"))
    elif state == TaskState.TASK_STATE_COMPLETED and rs.output is not None:
        task.artifacts.append(answer_artifact(str(rs.output)))
    elif state == TaskState.TASK_STATE_FAILED:
        why = rs.error.message if rs.error is not None else f"the run ended {saved.outcome}"
        if saved.outcome == "limit" and rs.limit:
            why = f"the run hit its limit {rs.limit!r}: {why}"
        task.status.message.CopyFrom(agent_message(saved.run_id, context_id, [new_text_part(why)], "error"))
    return task


def answer_artifact(text: str) -> Artifact:
    return Artifact(artifact_id=ANSWER, name=ANSWER, parts=[new_text_part(text)])


def decisions_in(message: Message) -> list[DecisionIn] | None:
    """The decisions a message's data parts carry (None: it carries none); ServeError 422 if malformed."""
    found = [d for d in get_data_parts(message.parts) if isinstance(d, dict) and "decisions" in d]
    if not found:
        return None
    raw = found[0]["decisions"]
    if not isinstance(raw, list) or not raw:
        raise ServeError(422, 'the data part\'s "decisions" must be a list of {"call_id", "action", ...} objects')
    out = []
    for d in raw:
        if not isinstance(d, dict) or not isinstance(d.get("call_id"), str) or not isinstance(d.get("action"), str):
            raise ServeError(422, f'each decision needs a "call_id" and an "action" (strings); got {d!r}')
        if d["action"] not in ("approve", "deny", "value"):
            raise ServeError(422, f"decision action {d['action']!r}: send 'approve', 'deny' or 'value'")
        args = d.get("args")
        if args is not None and not isinstance(args, dict):
            raise ServeError(422, f"decision for {d['call_id']!r}: args must be an object of the tool's arguments")
        out.append(DecisionIn(d["call_id"], d["action"], str(d.get("reason") or ""), args, d.get("value")))
    return out


class RunTaskStore(TaskStore):
    """The SDK's task store over loopwright's run store (see the module docstring). ``service``:
    gives the app's :class:`~loopwright.serve.service.Service` once it has started; ``keep``:
    how many tasks the SDK wrote stay in memory (the rest are read from the run store)."""

    def __init__(self, service: Callable[[], Awaitable[Service]], agent: str, keep: int = 4096) -> None:
        self._service = service
        self.agent = agent
        self.keep = keep
        self.tasks: OrderedDict[str, tuple[str, Task]] = OrderedDict()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        kept = Task()
        kept.CopyFrom(task)
        owner = self.tasks[task.id][0] if task.id in self.tasks else user_of(context)
        self.tasks[task.id] = (owner, kept)
        self.tasks.move_to_end(task.id)
        while len(self.tasks) > self.keep:
            self.tasks.popitem(last=False)
        if task.status.state == TaskState.TASK_STATE_CANCELED and owner == user_of(context):
            await cancel_run(await self._service(), task.id, owner)

    async def owns(self, task_id: str, context: ServerCallContext) -> bool:
        """Whether the task is the caller's (:func:`~.door.user_of` the request): it is kept here
        for them, or its run is this agent's and theirs in the run store."""
        user = user_of(context)
        if task_id in self.tasks:
            return self.tasks[task_id][0] == user
        saved = await (await self._service()).store.load(task_id)
        return saved is not None and saved.agent == self.agent and saved.user == user

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        user = user_of(context)
        if task_id in self.tasks:
            owner, kept = self.tasks[task_id]
            if owner != user:
                return None
            out = Task()
            out.CopyFrom(kept)
            return out
        service = await self._service()
        saved = await service.store.load(task_id)
        if saved is None or saved.agent != self.agent or saved.user != user:
            return None
        return task_of(saved)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        service = await self._service()
        size = params.page_size or 50
        tasks = []
        for summary in await service.store.runs(limit=max(size * 4, 200)):
            task = await self.get(summary.run_id, context) if summary.agent == self.agent else None
            if task is None or (params.context_id and task.context_id != params.context_id):
                continue
            tasks.append(task)
            if len(tasks) >= size:
                break
        return ListTasksResponse(tasks=tasks, page_size=size, total_size=len(tasks))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self.tasks.pop(task_id, None)  # (the run stays in the run store: runs are never deleted here)


async def cancel_run(service: Service, run_id: str, user: str) -> None:
    """Cancel the run of a task the SDK cancelled for ``user`` (nothing if it has ended, does
    not exist, or is not theirs: the service checks whose it is)."""
    saved = await service.store.load(run_id)
    if run_id not in service.live and (saved is None or saved.outcome not in (None, "paused", "suspended")):
        return
    with contextlib.suppress(ServeError):  # (ended meanwhile, or not theirs: nothing to cancel)
        await service.cancel(run_id, user, everyone=False)
