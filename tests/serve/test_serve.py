"""The HTTP app for real: uvicorn on 127.0.0.1 started here, httpx as the client, a SQLite store
read back to check that a refused request changed nothing and that runs outlive their clients."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.serve import app
from loopwright.serve.decisions import approve_takes_args
from loopwright.stores import SQLiteStore
from tests.serve_agents import serving, slow_agent, support

Event = tuple[int | None, str, dict[str, Any]]
JSON = {"Content-Type": "application/json"}


def sse(
    client: httpx.Client, path: str, *, last: int | None = None, stop: str | None = None, n: int | None = None
) -> list[Event]:
    """The events of an SSE stream: (id, event, data), until the stream ends, an event of type
    ``stop`` arrives, or ``n`` events have arrived."""
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    out: list[Event] = []
    with client.stream("GET", path, headers=headers, timeout=20) as response:
        assert response.status_code == 200, response.read()
        block: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(": ")
                block[key] = value
                continue
            if "data" in block:
                event = (
                    int(block["id"]) if "id" in block else None,
                    block.get("event", "message"),
                    json.loads(block["data"]),
                )
                out.append(event)
                if event[1] == stop or (n is not None and len(out) >= n):
                    return out
            block = {}
    return out


def stored(path: Path, run_id: str) -> tuple[Any, ...]:
    """What the store holds of a run: its version, stage, outcome and events."""

    async def read() -> tuple[Any, ...]:
        store = SQLiteStore(path)
        try:
            saved = await store.load(run_id)
            events = await store.events(run_id)
            return (saved.version, saved.stage, saved.outcome, len(events)) if saved else (None,)
        finally:
            await store.close()

    return asyncio.run(read())


def wait_for(client: httpx.Client, run_id: str, *outcomes: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = client.get(f"/runs/{run_id}")
        if got.status_code == 200 and got.json()["outcome"] in outcomes and not got.json()["running"]:
            return dict(got.json())
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not reach {outcomes}: {client.get(f'/runs/{run_id}').json()}")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def client(db: Path) -> Iterator[httpx.Client]:
    asgi = app([support, slow_agent()], store=f"sqlite:///{db}")
    with serving(asgi) as base, httpx.Client(base_url=base, timeout=20) as c:
        yield c


def test_a_run_started_over_http_streams_its_events_waits_for_approval_and_finishes(client: httpx.Client) -> None:
    started = client.post("/runs", json={"agent": "support", "input": "refund A1"})
    assert started.status_code == 202
    run_id = started.json()["run_id"]
    assert client.get(f"/runs/{run_id}").status_code == 200  # at once, checkpointed or not yet
    first = sse(client, f"/runs/{run_id}/events", stop="suspended")
    assert first[0][1] == "run_started" and first[-1][1] == "suspended"
    pending = wait_for(client, run_id, "suspended")["pending"]
    assert [(p["tool"], p["args"], p["kind"]) for p in pending] == [("refund", {"order": "A1"}, "confirmation")]
    decided = client.post(
        f"/runs/{run_id}/decisions", json={"decisions": [{"call_id": pending[0]["call_id"], "action": "approve"}]}
    )
    assert decided.status_code == 202, decided.text
    assert wait_for(client, run_id, "final")["output"] == "done: refunded A1"
    whole = sse(client, f"/runs/{run_id}/events")
    seqs = [e[0] for e in whole if e[0] is not None]
    assert seqs == list(range(1, len(seqs) + 1))  # every event, once, in order, across both legs
    assert [e[1] for e in whole][-2:] == ["run_finished", "end"]
    assert [e[2]["content"] for e in whole if e[1] == "tool_answered"] == ["refunded A1"]


def test_a_denied_call_does_not_run(client: httpx.Client) -> None:
    run_id = client.post("/runs", json={"agent": "support", "input": "refund B2"}).json()["run_id"]
    call = wait_for(client, run_id, "suspended")["pending"][0]["call_id"]
    body = {"decisions": [{"call_id": call, "action": "deny", "reason": "not today"}]}
    assert client.post(f"/runs/{run_id}/decisions", json=body).status_code == 202
    assert "not today" in wait_for(client, run_id, "final")["output"]


def test_last_event_id_resumes_the_stream_after_that_event(client: httpx.Client) -> None:
    run_id = client.post("/runs", json={"agent": "slow", "input": "go"}).json()["run_id"]
    head = sse(client, f"/runs/{run_id}/events", n=4)  # leave mid-run
    rest = sse(client, f"/runs/{run_id}/events", last=head[-1][0])
    assert rest[-1][1] == "end"
    seqs = [e[0] for e in head + rest if e[0] is not None]
    assert seqs == list(range(1, len(seqs) + 1))
    again = sse(client, f"/runs/{run_id}/events", last=seqs[-3])  # the run has ended: from the store
    assert [e[0] for e in again if e[0] is not None] == seqs[-2:]


def test_a_run_outlives_the_client_that_started_it(client: httpx.Client, db: Path) -> None:
    run_id = client.post("/runs", json={"agent": "slow", "input": "go"}).json()["run_id"]
    sse(client, f"/runs/{run_id}/events", n=2)  # the client reads two events and hangs up
    client.close()
    with httpx.Client(base_url=str(client.base_url), timeout=20) as other:
        done = wait_for(other, run_id, "final")
        assert done["output"] == "looked up 3"
    assert stored(db, run_id)[1:3] == ("done", "final")


@pytest.mark.slow
def test_a_run_left_by_a_server_that_stopped_is_resumed_by_the_next_one(db: Path) -> None:
    """Stopping the server pauses its runs at their next transition; the next server on the same
    store resumes them (POST /runs/{id}/resume) and the events go on, none lost or repeated."""
    with (
        serving(app([slow_agent(delay=0.2, rounds=4)], store=f"sqlite:///{db}")) as base,
        httpx.Client(base_url=base) as c,
    ):
        run_id = c.post("/runs", json={"input": "go"}).json()["run_id"]
        head = sse(c, f"/runs/{run_id}/events", n=6)
    assert stored(db, run_id)[2] is None  # stopped mid-run: not ended, not failed
    with (
        serving(app([slow_agent(delay=0.2, rounds=4)], store=f"sqlite:///{db}")) as base,
        httpx.Client(base_url=base) as c,
    ):
        assert c.get(f"/runs/{run_id}").json()["outcome"] is None
        resumed = c.post(f"/runs/{run_id}/resume")
        assert resumed.status_code == 202, resumed.text
        assert wait_for(c, run_id, "final")["output"] == "looked up 4"
        whole = sse(c, f"/runs/{run_id}/events")
    seqs = [e[0] for e in whole if e[0] is not None]
    assert seqs == list(range(1, len(seqs) + 1)) and seqs[: len(head)] == [e[0] for e in head]


def test_runs_are_listed_and_searched_by_agent_outcome_and_date(client: httpx.Client) -> None:
    a = client.post("/runs", json={"agent": "support", "input": "hello"}).json()["run_id"]
    b = client.post("/runs", json={"agent": "support", "input": "refund C3"}).json()["run_id"]
    wait_for(client, a, "final")
    wait_for(client, b, "suspended")
    ids = lambda **q: {r["run_id"] for r in client.get("/runs", params=q).json()["runs"]}  # noqa: E731
    assert {a, b} <= ids()
    assert a in ids(outcome="final") and b not in ids(outcome="final")
    assert b in ids(outcome="suspended", agent="support")
    assert not ids(agent="slow") & {a, b}
    assert not ids(since=time.time() + 3600) and {a, b} <= ids(since=time.time() - 3600, until=time.time() + 1)


def test_cancel_ends_a_waiting_run_and_pause_then_resume_continues_a_running_one(client: httpx.Client) -> None:
    waiting = client.post("/runs", json={"agent": "support", "input": "refund D4"}).json()["run_id"]
    wait_for(client, waiting, "suspended")
    assert client.post(f"/runs/{waiting}/cancel").status_code == 202
    assert wait_for(client, waiting, "cancelled")["outcome"] == "cancelled"
    assert client.post(f"/runs/{waiting}/cancel").status_code == 409  # it has ended

    running = client.post("/runs", json={"agent": "slow", "input": "go"}).json()["run_id"]
    sse(client, f"/runs/{running}/events", n=3)
    assert client.post(f"/runs/{running}/pause").status_code == 202
    wait_for(client, running, "paused")
    assert client.post(f"/runs/{running}/resume").status_code == 202
    assert wait_for(client, running, "final")["output"] == "looked up 3"


# ------------------------------------------------------------------ bad input: 4xx, a message, nothing changed


def test_bad_requests_get_4xx_with_a_message_and_change_nothing(client: httpx.Client, db: Path) -> None:
    run_id = client.post("/runs", json={"agent": "support", "input": "refund E5"}).json()["run_id"]
    call = wait_for(client, run_id, "suspended")["pending"][0]["call_id"]
    before = stored(db, run_id)
    runs_before = len(client.get("/runs").json()["runs"])
    bad = [
        ("POST", "/runs", b"{not json", 400, "not JSON"),
        ("POST", "/runs", json.dumps({"agent": "support"}).encode(), 422, "input"),
        ("POST", "/runs", json.dumps({"agent": "support", "input": "x", "extra": 1}).encode(), 422, "extra"),
        ("POST", "/runs", json.dumps({"agent": "nobody", "input": "x"}).encode(), 404, "no agent named 'nobody'"),
        ("POST", "/runs", json.dumps({"input": "x"}).encode(), 422, "name the agent"),
        ("GET", "/runs/no-such-run", b"", 404, "no run 'no-such-run'"),
        ("GET", "/runs/no-such-run/events", b"", 404, "no run"),
        ("POST", f"/runs/{run_id}/decisions", b"[", 400, "not JSON"),
        ("POST", f"/runs/{run_id}/decisions", json.dumps({"decisions": []}).encode(), 422, "decisions"),
        ("POST", f"/runs/{run_id}/decisions", _one("call_nope", "approve"), 409, "is not pending"),
        ("POST", f"/runs/{run_id}/decisions", _one(call, "maybe"), 422, "action"),
        ("POST", f"/runs/{run_id}/decisions", _one(call, "value"), 422, "waits for a confirmation"),
        ("POST", "/runs/no-such-run/decisions", _one(call, "approve"), 404, "no run"),
        ("GET", f"/runs/{run_id}/events", b"", 422, "Last-Event-ID"),
        ("POST", f"/runs/{run_id}/pause", b"", 409, "not running"),
        ("DELETE", f"/runs/{run_id}", b"", 405, "not allowed"),
    ]
    for method, path, body, status, words in bad:
        headers = {"Last-Event-ID": "soon"} if path.endswith("/events") and status == 422 else {}
        if body:
            headers["Content-Type"] = "application/json"
        got = client.request(method, path, content=body, headers=headers)
        assert got.status_code == status, (method, path, got.text)
        assert words in got.json()["error"], (method, path, got.json())
    two = {"decisions": [{"call_id": call, "action": "approve"}, {"call_id": call, "action": "deny"}]}
    assert client.post(f"/runs/{run_id}/decisions", json=two).status_code == 422
    if not approve_takes_args():
        edited = {"decisions": [{"call_id": call, "action": "approve", "args": {"order": "E6"}}]}
        got = client.post(f"/runs/{run_id}/decisions", json=edited)
        assert got.status_code == 422 and "edited arguments" in got.json()["error"]
    assert stored(db, run_id) == before
    assert len(client.get("/runs").json()["runs"]) == runs_before

    assert client.post(f"/runs/{run_id}/decisions", content=_one(call, "approve"), headers=JSON).status_code == 202
    wait_for(client, run_id, "final")
    after = stored(db, run_id)
    again = client.post(f"/runs/{run_id}/decisions", content=_one(call, "approve"), headers=JSON)
    assert again.status_code == 409 and "waits for no decision" in again.json()["error"]
    assert stored(db, run_id) == after
    answers = [e[2]["content"] for e in sse(client, f"/runs/{run_id}/events") if e[1] == "tool_answered"]
    assert answers == ["refunded E5"]  # the call ran once


def test_two_decisions_at_once_for_the_same_call_run_it_once(client: httpx.Client) -> None:
    run_id = client.post("/runs", json={"agent": "support", "input": "refund F6"}).json()["run_id"]
    call = wait_for(client, run_id, "suspended")["pending"][0]["call_id"]
    base = str(client.base_url)

    async def both() -> list[int]:
        async with httpx.AsyncClient(base_url=base, timeout=20) as c:
            sent = [c.post(f"/runs/{run_id}/decisions", content=_one(call, "approve"), headers=JSON) for _ in range(2)]
            return sorted(r.status_code for r in await asyncio.gather(*sent))

    assert asyncio.run(both()) == [202, 409]
    wait_for(client, run_id, "final")
    answers = [e for e in sse(client, f"/runs/{run_id}/events") if e[1] == "tool_answered"]
    assert len(answers) == 1


def _one(call: str, action: str) -> bytes:
    return json.dumps({"decisions": [{"call_id": call, "action": action}]}).encode()


# ------------------------------------------------------------------ users, CORS, mounting


def test_the_auth_hook_gives_401_and_each_user_sees_only_their_runs(db: Path) -> None:
    def user(request: Any) -> str | None:
        return request.headers.get("x-user")

    with serving(app([support], store=f"sqlite:///{db}", auth=user)) as base, httpx.Client(base_url=base) as c:
        got = c.get("/runs")
        assert got.status_code == 401 and "not signed in" in got.json()["error"]
        alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
        mine = c.post("/runs", json={"input": "refund G7"}, headers=alice).json()["run_id"]
        theirs = c.post("/runs", json={"input": "hello"}, headers=bob).json()["run_id"]
        deadline = time.monotonic() + 10
        while (
            c.get(f"/runs/{mine}", headers=alice).json().get("outcome") != "suspended" and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert [r["run_id"] for r in c.get("/runs", headers=alice).json()["runs"]] == [mine]
        assert c.get(f"/runs/{theirs}", headers=alice).status_code == 404
        assert c.get(f"/runs/{mine}/events", headers=bob).status_code == 404
        before = stored(db, mine)
        call = c.get(f"/runs/{mine}", headers=alice).json()["pending"][0]["call_id"]
        from_bob = c.post(f"/runs/{mine}/decisions", content=_one(call, "approve"), headers={**bob, **JSON})
        assert from_bob.status_code == 404 and "no run" in from_bob.json()["error"]
        assert c.post(f"/runs/{mine}/cancel", headers=bob).status_code == 404
        assert stored(db, mine) == before
        assert (
            c.post(f"/runs/{mine}/decisions", content=_one(call, "approve"), headers={**alice, **JSON}).status_code
            == 202
        )


@pytest.mark.slow
def test_cors_is_off_unless_origins_are_given(db: Path) -> None:
    preflight = {"Origin": "http://elsewhere.test", "Access-Control-Request-Method": "POST"}
    with serving(app([support], store=f"sqlite:///{db}")) as base:
        got = httpx.options(f"{base}/runs", headers=preflight)
        assert "access-control-allow-origin" not in got.headers
    with serving(app([support], store=f"sqlite:///{db}", cors_origins=["http://elsewhere.test"])) as base:
        got = httpx.options(f"{base}/runs", headers=preflight)
        assert got.headers["access-control-allow-origin"] == "http://elsewhere.test"


def test_the_app_mounted_in_a_users_starlette_app(db: Path) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    async def home(request: Any) -> PlainTextResponse:
        return PlainTextResponse("the user's own app")

    outer = Starlette(routes=[Route("/", home), Mount("/agents-api", app=app([support], store=f"sqlite:///{db}"))])
    with serving(outer) as base, httpx.Client(base_url=base) as c:
        assert c.get("/").text == "the user's own app"
        run_id = c.post("/agents-api/runs", json={"input": "hello"}).json()["run_id"]
        events = sse(c, f"/agents-api/runs/{run_id}/events")
        assert events[-2][2]["output"] == "you said: hello"


# ------------------------------------------------------------------ AG-UI


def test_the_agui_stream_maps_steps_text_tool_calls_and_approvals_as_interrupts(client: httpx.Client) -> None:
    run_id = client.post("/runs", json={"agent": "support", "input": "refund H8"}).json()["run_id"]
    call = wait_for(client, run_id, "suspended")["pending"][0]["call_id"]
    leg1 = _agui_until(client, f"/runs/{run_id}/agui", lambda e: e["type"] == "RUN_FINISHED")
    types = [e["type"] for e in leg1]
    assert types[0] == "RUN_STARTED" and "STEP_STARTED" in types
    assert types.index("TOOL_CALL_START") < types.index("TOOL_CALL_ARGS") < types.index("TOOL_CALL_END")
    interrupt = leg1[-1]["outcome"]
    assert interrupt["type"] == "interrupt"
    assert interrupt["interrupts"][0]["toolCallId"] == call and interrupt["interrupts"][0]["reason"] == "tool_approval"
    assert client.post(f"/runs/{run_id}/decisions", content=_one(call, "approve"), headers=JSON).status_code == 202
    wait_for(client, run_id, "final")
    whole = _agui_until(client, f"/runs/{run_id}/agui", lambda e: False)
    starts = [e for e in whole if e["type"] == "RUN_STARTED"]
    assert len(starts) == 2 and starts[1]["runId"] != starts[0]["runId"] and starts[1]["threadId"] == run_id
    assert [e["content"] for e in whole if e["type"] == "TOOL_CALL_RESULT"] == ["refunded H8"]
    assert "done: refunded H8" in [e.get("delta") for e in whole if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert whole[-1] == {
        **whole[-1],
        "type": "RUN_FINISHED",
        "outcome": {"type": "success"},
        "result": "done: refunded H8",
    }


def test_an_agui_client_starts_a_run_and_answers_its_interrupt(client: httpx.Client) -> None:
    """What an AG-UI front end sends: a run input with the user's message, then one whose
    ``resume`` entries answer the interrupts; each answer is that leg's events, to its end."""
    thread = "thread-j9"
    first = {"threadId": thread, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "refund J9"}]}
    leg1 = _agui_post(client, "/agents/support/agui", {**first, "tools": [], "context": [], "state": {}})
    assert leg1[0]["type"] == "RUN_STARTED" and leg1[0]["threadId"] == thread
    interrupts = leg1[-1]["outcome"]["interrupts"]
    assert leg1[-1]["type"] == "RUN_FINISHED" and interrupts[0]["metadata"]["args"] == {"order": "J9"}
    answer = {"threadId": thread, "runId": "r2", "messages": [], "resume": [{"interruptId": interrupts[0]["id"]}]}
    leg2 = _agui_post(client, "/agents/support/agui", answer)
    assert leg2[0]["type"] == "RUN_STARTED" and leg2[0]["runId"] != leg1[0]["runId"]
    assert [e["content"] for e in leg2 if e["type"] == "TOOL_CALL_RESULT"] == ["refunded J9"]
    assert leg2[-1]["outcome"] == {"type": "success"} and leg2[-1]["result"] == "done: refunded J9"
    again = client.post("/agents/support/agui", json=answer)
    assert again.status_code == 409 and "waits for no decision" in again.json()["error"]
    empty = client.post(
        "/agents/support/agui", json={"threadId": "t2", "messages": [{"role": "assistant", "content": "x"}]}
    )
    assert empty.status_code == 422 and "no user message" in empty.json()["error"]


def _agui_post(client: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", path, json=body, timeout=20) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def _agui_until(client: httpx.Client, path: str, stop: Any) -> list[dict[str, Any]]:
    out = []
    with client.stream("GET", path, timeout=20) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                out.append(event)
                if stop(event):
                    return out
    return out


# ------------------------------------------------------------------ the extra stays optional


def test_import_loopwright_does_not_import_starlette_or_uvicorn() -> None:
    code = (
        "import sys, loopwright, loopwright.serve; "
        "print(sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
