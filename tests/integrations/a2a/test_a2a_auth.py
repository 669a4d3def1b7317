"""a2a_app(auth=): the hook of ``loopwright.serve.app`` on the A2A endpoint, over real sockets with
the SDK's client: no user -> 401, the card public and naming the scheme, a task seen only by the
user who started it (another gets "task not found", and nothing changes in the store)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import AgentCard, CancelTaskRequest, GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.errors import A2AError

from loopwright.integrations.a2a import a2a_app
from loopwright.serve.guard import bearer_token
from tests.integrations.a2a.conftest import serving_at
from tests.integrations.a2a.test_a2a_server import (
    RAN,
    answer,
    decision,
    pending,
    send,
    stored,
    support,
    text_message,
)


def by_header(request: Any) -> str | None:
    """The user the ``x-user`` header names (None: no header, so 401)."""
    return request.headers.get("x-user") or None


def app_on(db: Path, auth: Any = by_header, **kw: Any) -> Any:
    return lambda url: a2a_app(support, store=f"sqlite:///{db}", url=url, auth=auth, **kw)


@asynccontextmanager
async def client_as(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    """The SDK's client over an httpx client sending ``headers`` with each request (the card
    fetched without them: it is public)."""
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        yield await create_client(url, client_config=ClientConfig(httpx_client=http, streaming=False))


def rpc(url: str, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, headers={"A2A-Version": "1.0", **(headers or {})}, timeout=30)


def test_no_user_is_401_and_the_card_stays_public(tmp_path: Path) -> None:
    with serving_at(app_on(tmp_path / "runs.db")) as url:
        card = httpx.get(f"{url}.well-known/agent-card.json")
        message = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}
        refused = rpc(url, "SendMessage", message)
        allowed = rpc(url, "SendMessage", message, {"x-user": "ada"})
    assert card.status_code == 200 and card.json()["name"] == "support"
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].lower().startswith("bearer")
    error = refused.json()["error"]
    assert refused.json()["jsonrpc"] == "2.0" and "not signed in" in error["message"]
    assert allowed.status_code == 200 and allowed.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_card_names_the_bearer_scheme(tmp_path: Path) -> None:
    with serving_at(app_on(tmp_path / "runs.db", auth=bearer_token("s" * 40))) as url:
        card = httpx.get(f"{url}.well-known/agent-card.json").json()
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]


def test_a_card_without_auth_names_no_scheme(tmp_path: Path) -> None:
    with serving_at(lambda url: a2a_app(support, store=f"sqlite:///{tmp_path / 'runs.db'}", url=url)) as url:
        card = httpx.get(f"{url}.well-known/agent-card.json").json()
    assert "securitySchemes" not in card and "securityRequirements" not in card


def test_the_bearer_token_opens_the_endpoint(tmp_path: Path) -> None:
    token = "t" * 40
    with serving_at(app_on(tmp_path / "runs.db", auth=bearer_token(token))) as url:

        async def go() -> tuple[Any, str]:
            async with client_as(url, {"Authorization": "Bearer wrong"}) as client:
                with pytest.raises(A2AError):
                    await send(client, text_message("hello"))
            async with client_as(url, {"Authorization": f"Bearer {token}"}) as client:
                task = await send(client, text_message("hello"))
                return task.status.state, answer(task)

        state, text = asyncio.run(go())
    assert (state, text) == (TaskState.TASK_STATE_COMPLETED, "turn 1: hello")


def test_a_task_of_ada_is_invisible_to_bob(tmp_path: Path) -> None:
    """bob's GetTask, CancelTask, ListTasks and follow-up decision on ada's task: "task not
    found" (or an empty list), the run unchanged, the tool not run; ada then decides it."""
    db = tmp_path / "runs.db"
    RAN.clear()
    with serving_at(app_on(db)) as url:

        async def start() -> Any:
            async with client_as(url, {"x-user": "ada"}) as ada:
                task = await send(ada, text_message("refund A1"))
                assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                return task

        task = asyncio.run(start())
        before = stored(db, task.id)
        call_id = pending(task)[0]["call_id"]

        async def as_bob() -> list[str]:
            seen = []
            async with client_as(url, {"x-user": "bob"}) as bob:
                for attempt in (
                    bob.get_task(GetTaskRequest(id=task.id)),
                    bob.cancel_task(CancelTaskRequest(id=task.id)),
                    send(bob, decision(task, call_id)),
                ):
                    with pytest.raises(A2AError) as refused:
                        await attempt
                    seen.append(str(refused.value))
                listed = await bob.list_tasks(ListTasksRequest())
                assert [t.id for t in listed.tasks] == []
            return seen

        refusals = asyncio.run(as_bob())
        assert all("not found" in r.lower() for r in refusals), refusals
        assert stored(db, task.id) == before and RAN == []

        async def as_ada() -> Any:
            async with client_as(url, {"x-user": "ada"}) as ada:
                listed = await ada.list_tasks(ListTasksRequest())
                assert [t.id for t in listed.tasks] == [task.id]
                return await send(ada, decision(task, call_id))

        done = asyncio.run(as_ada())
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and RAN == ["A1"]
    assert stored(db, task.id)[1] == "final"


def test_a_context_is_the_session_of_its_user(tmp_path: Path) -> None:
    """Sessions are keyed by user: bob naming ada's context_id starts his own conversation."""
    from loopwright.stores.sessions import SQLiteSessions

    db = tmp_path / "runs.db"
    make = app_on(db, sessions=SQLiteSessions(tmp_path / "sessions.db"))
    with serving_at(make) as url:

        async def go() -> list[str]:
            async with client_as(url, {"x-user": "ada"}) as ada, client_as(url, {"x-user": "bob"}) as bob:
                first = await send(ada, text_message("one"))
                again = await send(ada, text_message("two", context_id=first.context_id))
                other = await send(bob, text_message("three", context_id=first.context_id))
                return [answer(first), answer(again), answer(other)]

        answers = asyncio.run(go())
    assert answers == ["turn 1: one", "turn 2: two", "turn 1: three"]


def test_the_hook_may_be_async_and_card_type_is_sdk(tmp_path: Path) -> None:
    async def hook(request: Any) -> str | None:
        await asyncio.sleep(0)
        return by_header(request)

    with serving_at(app_on(tmp_path / "runs.db", auth=hook)) as url:
        refused = rpc(url, "GetTask", {"id": "nope"})
        missing = rpc(url, "GetTask", {"id": "nope"}, {"x-user": "ada"})
    assert refused.status_code == 401
    assert missing.json()["error"]["code"] == -32001  # TaskNotFound
    assert AgentCard  # (the SDK's type the card parses into, in the tests above)


def test_a_hook_of_its_own_scheme_names_it_on_the_card(tmp_path: Path) -> None:
    from a2a.types import APIKeySecurityScheme, SecurityScheme

    scheme = SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(name="x-user", location="header"))
    with serving_at(app_on(tmp_path / "runs.db", security_scheme=scheme)) as url:
        card = httpx.get(f"{url}.well-known/agent-card.json").json()
    assert card["securitySchemes"] == {"auth": {"apiKeySecurityScheme": {"name": "x-user", "location": "header"}}}
    assert card["securityRequirements"] == [{"schemes": {"auth": {}}}]


def test_an_auth_that_is_not_a_function_is_refused(tmp_path: Path) -> None:
    from loopwright import ConfigurationError

    with pytest.raises(ConfigurationError, match="function of the request"):
        a2a_app(support, store=f"sqlite:///{tmp_path / 'runs.db'}", url="http://127.0.0.1:1/", auth="ada")  # type: ignore[arg-type]
