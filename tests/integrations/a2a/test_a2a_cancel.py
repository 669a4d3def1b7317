"""CancelTask checked at the door: another user's cancel is "task not found" before anything of
the SDK's cancelling runs, and the pieces behind the door (the executor's cancel, a CANCELED
written to the task store) cancel a run only for the user whose run it is."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from a2a.utils.errors import A2AError

from loopwright.integrations.a2a.tasks import RunTaskStore, task_of
from loopwright.serve.service import Service
from loopwright.stores import SQLiteStore
from tests.integrations.a2a.conftest import serving_at
from tests.integrations.a2a.test_a2a_auth import app_on, client_as
from tests.integrations.a2a.test_a2a_server import RAN, pending, send, stored, support, text_message


def test_bobs_cancel_of_adas_task_is_refused_at_the_door(tmp_path: Path, monkeypatch: Any) -> None:
    """Over HTTP with the SDK's client: bob's CancelTask on ada's waiting task is "task not
    found", the SDK never reads the task for him (the door refused first), the store is
    unchanged; ada's own cancel then ends it."""
    read_for: list[str] = []
    real_get = RunTaskStore.get

    async def get(self: RunTaskStore, task_id: str, context: ServerCallContext) -> Any:
        read_for.append(context.user.user_name if context.user.is_authenticated else "")
        return await real_get(self, task_id, context)

    monkeypatch.setattr(RunTaskStore, "get", get)
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def start() -> Any:
            async with client_as(url, {"x-user": "ada"}) as ada:
                return await send(ada, text_message("refund Q1"))

        task = asyncio.run(start())
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        before = stored(db, task.id)
        read_for.clear()

        async def as_bob() -> str:
            async with client_as(url, {"x-user": "bob"}) as bob:
                with pytest.raises(A2AError) as refused:
                    await bob.cancel_task(CancelTaskRequest(id=task.id))
            return str(refused.value)

        refusal = asyncio.run(as_bob())
        assert "not found" in refusal.lower(), refusal
        assert read_for == [], "bob's cancel got past the door: the SDK read the task for him"
        assert stored(db, task.id) == before

        async def as_ada() -> tuple[Any, Any]:
            async with client_as(url, {"x-user": "ada"}) as ada:
                still = await ada.get_task(GetTaskRequest(id=task.id))
                return still, await ada.cancel_task(CancelTaskRequest(id=task.id))

        still, cancelled = asyncio.run(as_ada())
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and pending(still) == pending(task)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored(db, task.id)[1] == "cancelled" and RAN == []


class Named(User):
    """A signed-in user of the SDK's call context (what the door puts there for a request)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.name


def test_a_canceled_task_written_for_another_user_cancels_nothing(tmp_path: Path) -> None:
    """Behind the door: the task store cancels a run for a CANCELED the SDK writes only when the
    writer is the run's user (ada's run stays suspended when bob's context writes it, and is
    cancelled when ada's does)."""

    async def go() -> tuple[Any, Any]:
        store = SQLiteStore(tmp_path / "runs.db")
        service = Service([support], store)

        async def started() -> Service:
            return service

        try:
            run_id = await service.start("support", "refund R1", "ada")
            await service.leg_over(run_id)
            tasks = RunTaskStore(started, "support")
            saved = await store.load(run_id)
            assert saved is not None and saved.outcome == "suspended"
            cancelled = task_of(saved)
            cancelled.status.state = TaskState.TASK_STATE_CANCELED
            await tasks.save(cancelled, ServerCallContext(user=Named("bob")))
            after_bob = await store.load(run_id)
            tasks.tasks.clear()  # (what a restart leaves: nothing in memory)
            await tasks.save(cancelled, ServerCallContext(user=Named("ada")))
            await service.leg_over(run_id)
            return after_bob, await store.load(run_id)
        finally:
            await service.close()
            await store.close()

    RAN.clear()
    after_bob, after_ada = asyncio.run(go())
    assert after_bob is not None and after_bob.outcome == "suspended"
    assert after_ada is not None and after_ada.outcome == "cancelled" and RAN == []
