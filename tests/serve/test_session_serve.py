"""The HTTP app continues a user's session: POST /runs with "session" (uvicorn for real, httpx as the client)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright import Agent, ScriptedModel
from loopwright.data.events import ModelRequest, ModelResponse, TextPart
from loopwright.serve import app
from loopwright.stores.sessions import SQLiteSessions
from tests.serve_agents import serving

released = threading.Event()  # the "slow" run answers only once the test has seen its session busy


async def reply(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].text == "slow":
        await asyncio.to_thread(released.wait, 15)
    return ModelResponse(parts=(TextPart(text=f"seen {len(request.messages)}"),))


chat = Agent(name="chat", model=ScriptedModel(reply))


def user(request: Any) -> str | None:
    return request.headers.get("x-user")


def ended(c: httpx.Client, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        shown: dict[str, Any] = c.get(f"/runs/{run_id}", headers=headers).json()
        if shown.get("outcome") in ("final", "failed", "cancelled"):
            return shown
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end")


@pytest.mark.slow
def test_a_request_names_the_users_session(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    served = app([chat], store=f"sqlite:///{db}", auth=user, sessions=SQLiteSessions(db))
    ada, bob = {"x-user": "ada"}, {"x-user": "bob"}
    released.clear()
    with serving(served) as base, httpx.Client(base_url=base) as c:
        first = c.post("/runs", json={"input": "hello", "session": "s1"}, headers=ada)
        assert first.status_code == 202, first.text
        assert ended(c, first.json()["run_id"], ada)["output"] == "seen 1"
        second = c.post("/runs", json={"input": "again", "session": "s1"}, headers=ada).json()["run_id"]
        assert ended(c, second, ada)["output"] == "seen 3"
        theirs = c.post("/runs", json={"input": "hi", "session": "s1"}, headers=bob).json()["run_id"]
        assert ended(c, theirs, bob)["output"] == "seen 1"  # bob's s1 is not ada's
        slow = c.post("/runs", json={"input": "slow", "session": "s2"}, headers=ada).json()["run_id"]
        busy = c.post("/runs", json={"input": "meanwhile", "session": "s2"}, headers=ada)
        assert busy.status_code == 409 and "is held by run" in busy.json()["error"]
        released.set()
        assert ended(c, slow, ada)["outcome"] == "final"
    saved = asyncio.run(SQLiteSessions(db).load(("chat", "ada", "s1")))
    assert saved is not None and len(saved.messages) == 4


@pytest.mark.slow
def test_a_session_needs_a_session_store_and_a_user(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with serving(app([chat], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        got = c.post("/runs", json={"input": "hello", "session": "s1"})
        assert got.status_code == 422 and "keeps no sessions" in got.json()["error"]
    with (
        serving(app([chat], store=f"sqlite:///{db}", sessions=SQLiteSessions(db))) as base,
        httpx.Client(base_url=base) as c,
    ):
        got = c.post("/runs", json={"input": "hello", "session": "s1"})
        assert got.status_code == 422 and "belongs to a user" in got.json()["error"]
