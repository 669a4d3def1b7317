"""a2a_app's streaming, for real (uvicorn, the SDK's client): the model's text reaches an A2A
client in chunks (artifact updates with ``append``/``last_chunk``) before the task's final
state, and the executor waits for a run's leg to stop on the service's word, never polling."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from a2a.types import GetTaskRequest, SendMessageRequest, TaskState

from loopwright import Agent, ModelRequest, ModelResponse, TextPart, Usage
from loopwright.integrations.a2a import a2a_app
from loopwright.models import StreamDelta
from loopwright.stores import Checkpoint, SQLiteStore, StoreWrapper
from tests.integrations.a2a.conftest import serving_at
from tests.integrations.a2a.test_a2a_server import answer, client_of, send, support, text_message

PIECES = ("Once ", "upon ", "a ", "time.")


class Storyteller:
    """A streaming model: its reply in :data:`PIECES` (then the whole reply, as ``complete`` gives)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text="".join(PIECES)),), stop_reason="end_turn", usage=Usage())

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        for piece in PIECES:
            yield StreamDelta(piece)
        yield StreamDelta("(thinking)", thought=True)
        yield await self.complete(request)


def test_streaming_sends_the_text_in_chunks_before_the_final_state(tmp_path: Path) -> None:
    teller = Agent(name="teller", model=Storyteller())
    with serving_at(lambda url: a2a_app(teller, store=f"sqlite:///{tmp_path / 'runs.db'}", url=url)) as url:

        async def go() -> tuple[list[Any], Any]:
            async with client_of(url, streaming=True) as client:
                got = [r async for r in client.send_message(SendMessageRequest(message=text_message("a story")))]
                task_id = next(r.status_update.task_id for r in got if r.HasField("status_update"))
                return got, await client.get_task(GetTaskRequest(id=task_id))

        got, task = asyncio.run(go())
    kinds = ["artifact" if r.HasField("artifact_update") else "status" for r in got if not r.HasField("task")]
    updates = [r.artifact_update for r in got if r.HasField("artifact_update")]
    chunks = [(u.artifact.parts[0].text, u.append, u.last_chunk) for u in updates]
    assert chunks == [
        ("Once ", False, False),
        ("upon ", True, False),
        ("a ", True, False),
        ("time.", True, False),
        ("Once upon a time.", False, True),  # the answer replaces what streamed
    ]
    assert {u.artifact.artifact_id for u in updates} == {"answer"}
    assert kinds[-1] == "status" and kinds.count("artifact") == 5 and kinds.index("artifact") < len(kinds) - 1
    states = [r.status_update.status.state for r in got if r.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "Once upon a time."  # the task keeps the answer once, not the chunks beside it


class HeldEnd(StoreWrapper):
    """A SQLite store whose checkpoint of a run's end waits for ``release`` (in another thread):
    the run's last event is out, but its leg is not over until the test says so."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.holding = threading.Event()
        self.release = threading.Event()

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        if checkpoint.outcome is not None and not self.release.is_set():
            self.holding.set()
            await asyncio.to_thread(self.release.wait, 30)
        return await super().save(checkpoint, version, owner)


def test_the_executor_waits_for_the_leg_to_stop_without_polling(tmp_path: Path, monkeypatch: Any) -> None:
    """While the run's end is being saved (its last event already out), the executor waits for
    the service to let the leg go: it is woken then, and never sleeps in a loop meanwhile (each
    ``asyncio.sleep`` called from the A2A package is counted)."""
    polls: list[float] = []
    waiting = threading.Event()
    real_sleep = asyncio.sleep

    async def counted(delay: float, *args: Any, **kw: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__", "").startswith("loopwright.integrations.a2a"):
            polls.append(delay)
            waiting.set()
        return await real_sleep(delay, *args, **kw)

    from loopwright.serve.service import Service

    real_leg_over = Service.leg_over

    async def leg_over(self: Service, run_id: str) -> None:
        waiting.set()
        await real_leg_over(self, run_id)

    monkeypatch.setattr(asyncio, "sleep", counted)
    monkeypatch.setattr(Service, "leg_over", leg_over)
    store = HeldEnd(SQLiteStore(tmp_path / "runs.db"))
    with serving_at(lambda url: a2a_app(support, store=store, url=url)) as url:

        async def go() -> Any:
            async with client_of(url) as client:
                return await send(client, text_message("look up P1"))

        def release_once_waiting() -> None:
            assert store.holding.wait(30), "the run never reached its last checkpoint"
            assert waiting.wait(30), "the executor never waited for the leg"
            store.release.set()

        releaser = threading.Thread(target=release_once_waiting)
        releaser.start()
        try:
            task = asyncio.run(go())
        finally:
            store.release.set()
            releaser.join(30)
    assert polls == [], f"the executor polled ({len(polls)} sleeps of {polls[:1]} s)"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and answer(task) == "done: order P1: shipped"
