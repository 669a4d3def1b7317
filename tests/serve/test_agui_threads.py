"""An AG-UI thread is a conversation: each message continues it (a chain of runs, or a session), over real HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright import Agent, ModelRequest, ModelResponse, ScriptedModel, TextPart, ToolCall, Usage, tool
from loopwright.serve import app
from loopwright.serve.agui import Threads, thread_of, thread_run, user_thread
from loopwright.stores import SQLiteStore
from loopwright.stores.sessions import SQLiteSessions
from tests.serve_agents import serving

ONE = Usage(requests=1)
RELEASE = threading.Event()
"""Set to let a "wait" message's reply go (a turn held running for the busy-thread test)."""


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


def _said(request: ModelRequest) -> list[str]:
    """Every user message's text in the request, in order (what the model was given of the conversation)."""
    out = []
    for message in request.messages:
        text = "".join(getattr(p, "text", "") for p in message.parts if p.type == "text")
        if message.role == "user" and text:
            out.append(text)
    return out


async def reply(request: ModelRequest) -> ModelResponse:
    """After a tool's answer: "done: <answer>"; "refund X": a refund call (it waits for approval);
    "wait": holds until RELEASE; else "heard: <every user message so far, joined by |>"."""
    answers = [p for p in request.messages[-1].parts if p.type == "tool_result"]
    if answers:
        return ModelResponse(parts=(TextPart(text=f"done: {answers[0].content}"),), stop_reason="end_turn", usage=ONE)
    said = _said(request)
    found = re.search(r"refund (\w+)", said[-1])
    if found:
        return ModelResponse(parts=(ToolCall(name="refund", args={"order": found.group(1)}),), usage=ONE)
    if said[-1] == "wait":
        await asyncio.to_thread(RELEASE.wait, 20)
    return ModelResponse(parts=(TextPart(text="heard: " + "|".join(said)),), stop_reason="end_turn", usage=ONE)


chat = Agent(name="chat", model=ScriptedModel(reply), tools=[refund])
other = Agent(name="other", model=ScriptedModel(reply))


def turn(c: httpx.Client, thread: str, text: str, agent: str = "chat", **headers: str) -> list[dict[str, Any]]:
    """One message on the thread, as an AG-UI front end sends it; the events of the run it started."""
    return _post(c, f"/agents/{agent}/agui", {**message(thread, text), "runId": f"client-{text}"}, headers)


def message(thread: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "messages": [{"id": "m", "role": "user", "content": text}]}


def _post(c: httpx.Client, path: str, body: dict[str, Any], headers: dict[str, str]) -> list[dict[str, Any]]:
    with c.stream("POST", path, json=body, headers=headers, timeout=20) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def result_of(events: list[dict[str, Any]]) -> Any:
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    return events[-1].get("result")


def threads_of(events: list[dict[str, Any]]) -> set[str]:
    return {e["threadId"] for e in events if "threadId" in e}


def stored_ids(db: Path) -> list[str]:
    async def read() -> list[str]:
        store = SQLiteStore(db)
        try:
            return sorted(s.run_id for s in await store.runs(limit=100))
        finally:
            await store.close()

    return asyncio.run(read())


def test_two_turns_on_one_thread_are_one_conversation(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serving(app([chat], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        first = turn(c, "t1", "hello")
        assert result_of(first) == "heard: hello"
        second = turn(c, "t1", "again")
        assert result_of(second) == "heard: hello|again"  # the second turn's request held the first's
        assert threads_of(first) == threads_of(second) == {"t1"}
        starts = [e["runId"] for e in first + second if e["type"] == "RUN_STARTED"]
        assert starts == ["t1", "t1~2"]
        third = turn(c, "t1", "and again")
        assert result_of(third) == "heard: hello|again|and again"
        # a run of the thread followed by its id streams under the thread too
        whole = _get(c, "/runs/t1~2/agui")
        assert threads_of(whole) == {"t1"} and whole[-1]["result"] == "heard: hello|again"
    assert stored_ids(db) == ["t1", "t1~2", "t1~3"]


def _get(c: httpx.Client, path: str) -> list[dict[str, Any]]:
    with c.stream("GET", path, timeout=20) as response:
        assert response.status_code == 200, response.read()
        out = []
        for line in response.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
                if out[-1]["type"] == "RUN_FINISHED" and out[-1]["outcome"]["type"] != "interrupt":
                    return out
    return out


@pytest.mark.slow
def test_a_thread_goes_on_after_the_server_restarts(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serving(app([chat], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        assert result_of(turn(c, "t2", "one")) == "heard: one"
        assert result_of(turn(c, "t2", "two")) == "heard: one|two"
    with serving(app([chat], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        third = turn(c, "t2", "three")
        assert result_of(third) == "heard: one|two|three"
        assert threads_of(third) == {"t2"} and third[0]["runId"] == "t2~3"
    assert stored_ids(db) == ["t2", "t2~2", "t2~3"]


def test_resume_on_a_thread_answers_its_latest_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serving(app([chat], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        assert result_of(turn(c, "t3", "hello")) == "heard: hello"
        asked = turn(c, "t3", "refund K1")
        assert asked[-1]["outcome"]["type"] == "interrupt" and threads_of(asked) == {"t3"}
        interrupt = asked[-1]["outcome"]["interrupts"][0]["id"]
        answer = {"threadId": "t3", "runId": "client-r", "messages": [], "resume": [{"interruptId": interrupt}]}
        done = _post(c, "/agents/chat/agui", answer, {})
        assert done[0]["type"] == "RUN_STARTED" and done[0]["runId"].startswith("t3~2:")
        assert result_of(done) == "done: refunded K1" and threads_of(done) == {"t3"}
        assert result_of(turn(c, "t3", "thanks")) == "heard: hello|refund K1|thanks"


def test_with_sessions_the_thread_is_the_users_session(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    served = app([chat], store=f"sqlite:///{db}", auth=lambda r: r.headers.get("x-user"), sessions=SQLiteSessions(db))
    with serving(served) as base, httpx.Client(base_url=base) as c:
        first = turn(c, "t4", "hello", **{"x-user": "ada"})
        second = turn(c, "t4", "again", **{"x-user": "ada"})
        assert result_of(second) == "heard: hello|again" and threads_of(first + second) == {"t4"}
        stem = user_thread("t4", "ada")  # a thread is its user's (issue 42, S12)
        assert [e["runId"] for e in first + second if e["type"] == "RUN_STARTED"] == [stem, f"{stem}~2"]
        theirs = turn(c, "t4", "hi", **{"x-user": "bob"})  # bob's own thread t4: ada's is not in his way
        assert result_of(theirs) == "heard: hi"
    saved = asyncio.run(SQLiteSessions(db).load(("chat", "ada", "t4")))
    assert saved is not None and len(saved.messages) == 4


def test_a_message_on_a_busy_thread_is_refused_and_starts_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RELEASE.clear()
    with serving(app([chat, other], store=f"sqlite:///{db}")) as base, httpx.Client(base_url=base) as c:
        with c.stream("POST", "/agents/chat/agui", json=message("t5", "wait"), timeout=20) as running:
            lines = running.iter_lines()
            assert '"RUN_STARTED"' in next(line for line in lines if line.startswith("data: "))
            busy = c.post("/agents/chat/agui", json=message("t5", "hello?"))
            assert busy.status_code == 409 and "is running" in busy.json()["error"]
            RELEASE.set()
            rest = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
        assert rest[-1]["result"] == "heard: wait"
        asked = turn(c, "t5", "refund K2")
        assert asked[-1]["outcome"]["type"] == "interrupt"
        waiting = c.post("/agents/chat/agui", json=message("t5", "hi"))
        assert waiting.status_code == 409 and "waits for" in waiting.json()["error"]
        assert "resume" in waiting.json()["error"]
        elsewhere = c.post("/agents/other/agui", json=message("t1", "x"))
        assert elsewhere.status_code == 200  # a new thread for agent other
        crossed = c.post("/agents/other/agui", json=message("t5", "x"))
        assert crossed.status_code == 409 and "/agents/chat/agui" in crossed.json()["error"]
    assert stored_ids(db) == ["t1", "t5", "t5~2"]


@given(st.text(min_size=1, max_size=12), st.integers(min_value=1, max_value=10_000))
def test_a_threads_run_ids_name_the_thread(thread: str, n: int) -> None:
    if thread_of(thread) == thread:  # (a threadId that ends in ~<number> is refused: 422)
        assert thread_of(thread_run(thread, n)) == thread
        assert thread_run(thread, n) == thread_run(thread, n) and (n == 1) == (thread_run(thread, n) == thread)


@given(st.integers(min_value=0, max_value=3000), st.integers(min_value=0, max_value=3000))
def test_the_latest_run_of_a_thread_is_found_in_few_probes(length: int, known: int) -> None:
    """Whatever the cache remembers (nothing, or an earlier run of the chain), the store's last run is found."""
    probes: list[str] = []
    ids = {thread_run("t", n) for n in range(1, length + 1)}

    async def exists(run_id: str) -> bool:
        probes.append(run_id)
        return run_id in ids

    threads = Threads()
    if 0 < known <= length:
        threads.started("t", known)
    assert asyncio.run(threads.latest_of("t", exists)) == length
    assert len(probes) <= 2 * max(length, 1).bit_length() + 2
    probes.clear()
    assert asyncio.run(threads.latest_of("t", exists)) == length and len(probes) == 1  # warm: one probe


def test_a_thread_id_that_looks_like_a_later_run_is_refused(tmp_path: Path) -> None:
    with serving(app([chat], store=f"sqlite:///{tmp_path / 'runs.db'}")) as base, httpx.Client(base_url=base) as c:
        got = c.post("/agents/chat/agui", json=message("t~2", "hi"))
        assert got.status_code == 422 and "choose a threadId without it" in got.json()["error"]
    assert stored_ids(tmp_path / "runs.db") == []
