"""An AG-UI thread id is a user's own name for a conversation: another user who chose the same id
first never blocks it (each ``(user, threadId)`` is its own thread), with and without sessions,
over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright import Agent, ModelRequest, ModelResponse, ScriptedModel, TextPart, Usage
from loopwright.serve import app
from loopwright.stores.sessions import SQLiteSessions
from tests.serve_agents import serving


def _heard(request: ModelRequest) -> ModelResponse:
    said = []
    for message in request.messages:
        text = "".join(getattr(p, "text", "") for p in message.parts if p.type == "text")
        if message.role == "user" and text:
            said.append(text)
    return ModelResponse(parts=(TextPart(text="heard: " + "|".join(said)),), stop_reason="end_turn", usage=Usage())


chat = Agent(name="chat", model=ScriptedModel(_heard))


def turn(c: httpx.Client, thread: str, text: str, user: str) -> list[dict[str, Any]]:
    body = {"threadId": thread, "messages": [{"id": "m", "role": "user", "content": text}]}
    with c.stream("POST", "/agents/chat/agui", json=body, headers={"x-user": user}, timeout=20) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def result(events: list[dict[str, Any]]) -> Any:
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    return events[-1]["result"]


@pytest.mark.parametrize("sessions", [False, True])
def test_a_thread_id_taken_by_one_user_is_free_for_another(tmp_path: Path, sessions: bool) -> None:
    db = tmp_path / "runs.db"
    kept = SQLiteSessions(db) if sessions else None
    served = app([chat], store=f"sqlite:///{db}", auth=lambda r: r.headers.get("x-user"), sessions=kept)
    with serving(served) as base, httpx.Client(base_url=base, timeout=20) as c:
        assert result(turn(c, "shared", "bob first", "bob")) == "heard: bob first"
        ada = turn(c, "shared", "ada here", "ada")  # the same id, chosen later by another user
        assert result(ada) == "heard: ada here"
        assert {e["threadId"] for e in ada if "threadId" in e} == {"shared"}
        assert result(turn(c, "shared", "bob again", "bob")) == "heard: bob first|bob again"
        assert result(turn(c, "shared", "ada again", "ada")) == "heard: ada here|ada again"
        # each user's runs are their own: ada cannot follow bob's, nor bob ada's
        ada_run = next(e["runId"] for e in ada if e["type"] == "RUN_STARTED")
        assert c.get(f"/runs/{ada_run}", headers={"x-user": "bob"}).status_code == 404
        listed = c.get("/runs", headers={"x-user": "ada"}).json()["runs"]
        assert len(listed) == 2 and all(r["user"] == "ada" for r in listed)
        with c.stream("GET", f"/runs/{ada_run}/agui", headers={"x-user": "ada"}) as response:
            shown = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
        assert {e["threadId"] for e in shown if "threadId" in e} == {"shared"}


def test_a_thread_id_that_looks_like_a_users_thread_is_refused(tmp_path: Path) -> None:
    from loopwright.serve.agui import user_thread

    served = app([chat], store=f"sqlite:///{tmp_path / 'runs.db'}", auth=lambda r: r.headers.get("x-user"))
    with serving(served) as base, httpx.Client(base_url=base, timeout=20) as c:
        forged = user_thread("shared", "bob")  # ada naming bob's thread's run id as her threadId
        body = {"threadId": forged, "messages": [{"role": "user", "content": "hi"}]}
        got = c.post("/agents/chat/agui", json=body, headers={"x-user": "ada"})
        assert got.status_code == 422 and "choose a threadId without it" in got.json()["error"]
