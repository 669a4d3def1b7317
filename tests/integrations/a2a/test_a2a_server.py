"""a2a_app for real: uvicorn on 127.0.0.1, the official A2A SDK's client on the other side, a
SQLite run store read back to check what a refused request left (nothing) and that tasks
outlive the server."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, new_data_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

from loopwright import Agent, ModelError, ModelRequest, ModelResponse, ScriptedModel, TextPart, ToolCall, Usage, tool
from loopwright.integrations.a2a import a2a_app
from loopwright.stores import SQLiteStore
from loopwright.stores.sessions import SQLiteSessions
from tests.integrations.a2a.conftest import serving_at

RAN: list[str] = []
"""The orders the refund tool refunded (each call once)."""


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    RAN.append(order)
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


def reply(request: ModelRequest) -> ModelResponse:
    """refund X -> a refund call; look up X -> a lookup; after a tool -> "done: <answer>";
    else "turn N: <text>" (N: the user messages so far, so a session shows it goes on)."""
    last = request.messages[-1]
    answers = [p for p in last.parts if p.type == "tool_result"]
    if answers:
        return ModelResponse(parts=(TextPart(text=f"done: {answers[0].content}"),), stop_reason="end_turn")
    text = "".join(getattr(p, "text", "") for p in last.parts if p.type == "text")
    for word, name in (("refund", "refund"), ("look up", "lookup")):
        found = re.search(rf"{word} (\w+)", text)
        if found:
            return ModelResponse(parts=(ToolCall(name=name, args={"order": found.group(1)}),), stop_reason="tool_use")
    turns = sum(1 for m in request.messages if m.role == "user" and any(p.type == "text" for p in m.parts))
    return ModelResponse(parts=(TextPart(text=f"turn {turns}: {text}"),), stop_reason="end_turn", usage=Usage())


support = Agent(name="support", description="Answers about orders.", model=ScriptedModel(reply), tools=[refund, lookup])


def text_message(text: str, **ids: str) -> Message:
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], **ids)


def decision(task: Task, call_id: str, action: str = "approve") -> Message:
    data = new_data_part({"decisions": [{"call_id": call_id, "action": action}]})
    return Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task.id, context_id=task.context_id, parts=[data]
    )


@asynccontextmanager
async def client_of(url: str, streaming: bool = False, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        yield await create_client(url, client_config=ClientConfig(httpx_client=http, streaming=streaming))


async def send(client: Client, message: Message) -> Task:
    last: Any = None
    async for response in client.send_message(SendMessageRequest(message=message)):
        last = response
    assert last is not None and last.HasField("task"), last
    return last.task  # type: ignore[no-any-return]


def pending(task: Task) -> list[dict[str, Any]]:
    data = [d for d in get_data_parts(task.status.message.parts) if "pending" in d]
    return list(data[0]["pending"]) if data else []


def answer(task: Task) -> str:
    return " ".join(p.text for a in task.artifacts for p in a.parts)


def stored(db: Path, run_id: str) -> tuple[Any, ...]:
    """What the store holds of a run: its version, outcome and number of events."""

    async def read() -> tuple[Any, ...]:
        store = SQLiteStore(db)
        try:
            saved = await store.load(run_id)
            return (saved.version, saved.outcome, len(await store.events(run_id))) if saved else (None,)
        finally:
            await store.close()

    return asyncio.run(read())


def app_on(db: Path, **kw: Any) -> Any:
    return lambda url: a2a_app(support, store=f"sqlite:///{db}", url=url, **kw)


def test_the_sdk_reads_the_card(tmp_path: Path) -> None:
    """The card names the agent, its JSON-RPC interface at the URL, protocol 1.0, streaming, a skill per tool."""
    with serving_at(app_on(tmp_path / "runs.db")) as url:

        async def fetch() -> Any:
            async with httpx.AsyncClient() as http:
                return await A2ACardResolver(http, url).get_agent_card()

        card = asyncio.run(fetch())
    assert card.name == "support" and card.description == "Answers about orders."
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (url, "JSONRPC", "1.0")
    assert card.capabilities.streaming is True
    assert {s.id for s in card.skills} == {"refund", "lookup"}
    assert next(s for s in card.skills if s.id == "lookup").description == "Look an order up."


def test_a_message_completes_a_task_whose_artifact_is_the_answer(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serving_at(app_on(db)) as url:

        async def go() -> tuple[Task, Task]:
            async with client_of(url) as client:
                task = await send(client, text_message("look up A7"))
                return task, await client.get_task(GetTaskRequest(id=task.id))

        task, again = asyncio.run(go())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "done: order A7: shipped" == answer(again)
    assert stored(db, task.id)[1] == "final"  # the task is the run


def test_streaming_gives_working_then_the_answer(tmp_path: Path) -> None:
    with serving_at(app_on(tmp_path / "runs.db")) as url:

        async def go() -> list[Any]:
            async with client_of(url, streaming=True) as client:
                msg = SendMessageRequest(message=text_message("look up B2"))
                return [r async for r in client.send_message(msg)]

        got = asyncio.run(go())
    states = [r.status_update.status.state for r in got if r.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    artifacts = [r.artifact_update.artifact for r in got if r.HasField("artifact_update")]
    assert [p.text for a in artifacts for p in a.parts] == ["done: order B2: shipped"]


def test_an_approval_waits_in_input_required_and_one_decision_completes_it(tmp_path: Path) -> None:
    """INPUT_REQUIRED lists the pending call; a decision for another call is refused and changes
    nothing; the right one completes the task, the tool run once; a second is refused."""
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def go() -> None:
            async with client_of(url) as client:
                task = await send(client, text_message("refund C3"))
                assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                [call] = pending(task)
                assert (call["tool"], call["arguments"], call["kind"]) == ("refund", {"order": "C3"}, "confirmation")
                before = await asyncio.to_thread(stored, db, task.id)
                with pytest.raises(A2AError, match="not pending"):
                    await send(client, decision(task, "call_nobody"))
                assert await asyncio.to_thread(stored, db, task.id) == before
                done = await send(client, decision(task, call["call_id"]))
                assert done.status.state == TaskState.TASK_STATE_COMPLETED
                assert answer(done) == "done: refunded C3"
                after = await asyncio.to_thread(stored, db, task.id)
                with pytest.raises(A2AError, match="takes no more messages"):
                    await send(client, decision(task, call["call_id"]))
                assert await asyncio.to_thread(stored, db, task.id) == after
                again = await client.get_task(GetTaskRequest(id=task.id))
                assert again.status.state == TaskState.TASK_STATE_COMPLETED

        asyncio.run(go())
    assert RAN == ["C3"]


def test_two_decisions_at_once_run_the_call_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def go() -> list[Any]:
            async with client_of(url) as client, client_of(url) as other:
                task = await send(client, text_message("refund N1"))
                call = pending(task)[0]["call_id"]
                both = [send(client, decision(task, call)), send(other, decision(task, call))]
                return list(await asyncio.gather(*both, return_exceptions=True))

        got = asyncio.run(go())
    done = [g for g in got if isinstance(g, Task)]
    refused = [g for g in got if isinstance(g, A2AError)]
    assert len(done) == 1 and len(refused) == 1, got
    assert done[0].status.state == TaskState.TASK_STATE_COMPLETED and RAN == ["N1"]


def test_a_waiting_task_takes_decisions_only(tmp_path: Path) -> None:
    """A text message (or malformed decisions) in a waiting task is refused and changes nothing."""
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def go() -> None:
            async with client_of(url) as client:
                task = await send(client, text_message("refund K2"))
                before = await asyncio.to_thread(stored, db, task.id)
                with pytest.raises(A2AError, match="waits for decisions"):
                    await send(client, text_message("yes please", task_id=task.id, context_id=task.context_id))
                bad = Message(
                    message_id=uuid.uuid4().hex,
                    role=Role.ROLE_USER,
                    task_id=task.id,
                    context_id=task.context_id,
                    parts=[new_data_part({"decisions": [{"call_id": pending(task)[0]["call_id"], "action": "maybe"}]})],
                )
                with pytest.raises(A2AError, match="'approve', 'deny' or 'value'"):
                    await send(client, bad)
                assert await asyncio.to_thread(stored, db, task.id) == before
                still = await client.get_task(GetTaskRequest(id=task.id))
                assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        asyncio.run(go())
    assert RAN == []


def test_list_tasks_gives_the_agents_tasks(tmp_path: Path) -> None:
    with serving_at(app_on(tmp_path / "runs.db")) as url:

        async def go() -> tuple[Task, Task, set[str], set[str]]:
            async with client_of(url) as client:
                one = await send(client, text_message("look up L1"))
                two = await send(client, text_message("refund L2"))
                listed = await client.list_tasks(ListTasksRequest())
                in_context = await client.list_tasks(ListTasksRequest(context_id=one.context_id))
                return one, two, {t.id for t in listed.tasks}, {t.id for t in in_context.tasks}

        one, two, listed, in_context = asyncio.run(go())
    assert listed == {one.id, two.id} and in_context == {one.id}


def test_a_run_that_fails_is_a_failed_task_saying_why(tmp_path: Path) -> None:
    def down(request: ModelRequest) -> ModelResponse:
        raise ModelError("the model is down", retryable=False)

    broken = Agent(name="broken", model=ScriptedModel(down))
    with serving_at(lambda url: a2a_app(broken, store=f"sqlite:///{tmp_path / 'runs.db'}", url=url)) as url:

        async def go() -> Task:
            async with client_of(url) as client:
                return await send(client, text_message("anything"))

        task = asyncio.run(go())
    assert task.status.state == TaskState.TASK_STATE_FAILED and not task.artifacts
    assert "the model is down" in " ".join(p.text for p in task.status.message.parts)


def test_a_denied_call_does_not_run(tmp_path: Path) -> None:
    RAN.clear()
    with serving_at(app_on(tmp_path / "runs.db")) as url:

        async def go() -> Task:
            async with client_of(url) as client:
                task = await send(client, text_message("refund D4"))
                return await send(client, decision(task, pending(task)[0]["call_id"], "deny"))

        done = asyncio.run(go())
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and RAN == []


def test_a_task_outlives_the_server(tmp_path: Path) -> None:
    """Restart on the same SQLite store: GetTask still answers, and the waiting task is decided there."""
    db = tmp_path / "runs.db"
    RAN.clear()

    async def first(url: str) -> tuple[Task, Task]:
        async with client_of(url) as client:
            return await send(client, text_message("look up E5")), await send(client, text_message("refund E6"))

    with serving_at(app_on(db)) as url:
        completed, waiting = asyncio.run(first(url))

    async def second(url: str) -> tuple[Task, Task, Task]:
        async with client_of(url) as client:
            a = await client.get_task(GetTaskRequest(id=completed.id))
            b = await client.get_task(GetTaskRequest(id=waiting.id))
            return a, b, await send(client, decision(b, pending(b)[0]["call_id"]))

    with serving_at(app_on(db)) as url:
        done, still, decided = asyncio.run(second(url))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and answer(done) == "done: order E5: shipped"
    assert done.context_id == completed.context_id
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and pending(still) == pending(waiting)
    assert decided.status.state == TaskState.TASK_STATE_COMPLETED and RAN == ["E6"]


def test_cancel_ends_a_waiting_task_and_its_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def go() -> tuple[Task, Task]:
            async with client_of(url) as client:
                task = await send(client, text_message("refund F1"))
                cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
                return task, cancelled

        task, cancelled = asyncio.run(go())
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert stored(db, task.id)[1] == "cancelled"
    assert RAN == []


def test_cancel_after_a_restart_ends_the_run_too(tmp_path: Path) -> None:
    """On a new server the SDK writes CANCELED to the task store itself: the store cancels the run."""
    db = tmp_path / "runs.db"
    RAN.clear()

    async def wait(url: str) -> Task:
        async with client_of(url) as client:
            return await send(client, text_message("refund M1"))

    async def cancel(url: str, task: Task) -> Task:
        async with client_of(url) as client:
            return await client.cancel_task(CancelTaskRequest(id=task.id))

    with serving_at(app_on(db)) as url:
        task = asyncio.run(wait(url))
    with serving_at(app_on(db)) as url:
        cancelled = asyncio.run(cancel(url, task))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored(db, task.id)[1] == "cancelled" and RAN == []


def test_unknown_tasks_are_json_rpc_errors(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serving_at(app_on(db)) as url:

        async def go() -> None:
            async with client_of(url) as client:
                with pytest.raises(A2AError, match="not found"):
                    await client.get_task(GetTaskRequest(id="no-such-task"))
                with pytest.raises(A2AError):
                    await send(client, text_message("refund G1", task_id="no-such-task"))

        asyncio.run(go())

        async def runs() -> int:
            store = SQLiteStore(db)
            try:
                return len(await store.runs())
            finally:
                await store.close()

        assert asyncio.run(runs()) == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}', -32602),
        (b"[1, 2]", -32600),
    ],
)
def test_malformed_json_rpc_is_an_error_and_starts_nothing(tmp_path: Path, body: bytes, code: int) -> None:
    db = tmp_path / "runs.db"
    with serving_at(app_on(db)) as url:
        got = httpx.post(url, content=body, headers={"Content-Type": "application/json", "A2A-Version": "1.0"})
        error = got.json()["error"]
        assert error["code"] == code, got.json()

        async def runs() -> int:
            store = SQLiteStore(db)
            try:
                return len(await store.runs())
            finally:
                await store.close()

        assert asyncio.run(runs()) == 0


def test_a_context_is_a_session(tmp_path: Path) -> None:
    """With a session store, a second message in a context continues the conversation."""
    db = tmp_path / "runs.db"
    sessions = SQLiteSessions(tmp_path / "sessions.db")
    with serving_at(app_on(db, sessions=sessions)) as url:

        async def go() -> tuple[Task, Task, Task]:
            async with client_of(url) as client:
                one = await send(client, text_message("hello"))
                two = await send(client, text_message("again", context_id=one.context_id))
                other = await send(client, text_message("fresh"))
                return one, two, other

        one, two, other = asyncio.run(go())
    assert answer(one) == "turn 1: hello"
    assert answer(two) == "turn 2: again" and two.context_id == one.context_id and two.id != one.id
    assert answer(other) == "turn 1: fresh"


def test_a_url_that_is_not_absolute_is_refused() -> None:
    from loopwright import ConfigurationError

    with pytest.raises(ConfigurationError, match="absolute http"):
        a2a_app(support, store="sqlite:///:memory:", url="/refunds/")
