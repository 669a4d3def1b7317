"""No silent ends: a client following a run (``GET /runs/{id}/events`` and the AG-UI stream
``GET /runs/{id}/agui``) always gets a last event that says how the stream ended: the run
ended (``end``), the client fell behind (``dropped``, tests/serve/test_serve_slow_client.py),
the server is shutting down (``shutdown``, with where to resume), or no such run (404 JSON)."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from loopwright.serve import Server, app
from tests.helpers import serving_cli
from tests.serve_agents import free_port, serving, support

ROUTES = ["events", "agui"]


def frames(lines: Iterator[str]) -> list[tuple[str, Any]]:
    """The stream's events as (event name, data) pairs (``message``: an unnamed one)."""
    out: list[tuple[str, Any]] = []
    name, data = "message", None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and data is not None:
            out.append((name, data))
            name, data = "message", None
    return out


def _is_suspended(route: str, data: Any) -> bool:
    """The run waits for a person now: ``suspended`` (AG-UI: its leg's ``RUN_FINISHED``)."""
    return data.get("type") == ("RUN_FINISHED" if route == "agui" else "suspended")


def _last_seq(c: httpx.Client, run_id: str) -> int:
    with c.stream("GET", f"/runs/{run_id}/events") as response:
        return int(frames(response.iter_lines())[-1][1]["last_event_id"])


@pytest.mark.parametrize("route", ROUTES)
def test_a_client_reconnecting_after_the_last_event_of_an_ended_run_is_told_it_ended(
    tmp_path: Path, route: str
) -> None:
    with (
        serving(app(support, store=f"sqlite:///{tmp_path / 'runs.db'}")) as base,
        httpx.Client(base_url=base, timeout=20) as c,
    ):
        run_id = c.post("/runs", json={"input": "hello"}).json()["run_id"]
        with c.stream("GET", f"/runs/{run_id}/{route}") as response:
            first = frames(response.iter_lines())
        if route == "events":
            assert first[-1][0] == "end", first[-3:]
            last = int(first[-1][1]["last_event_id"])
        else:  # AG-UI: the run's RUN_FINISHED says it (its clients take no event after it)
            assert first[-1][1]["type"] == "RUN_FINISHED", first[-3:]
            last = _last_seq(c, run_id)
        with c.stream("GET", f"/runs/{run_id}/{route}", headers={"Last-Event-ID": str(last)}) as response:
            again = frames(response.iter_lines())
        told = {"run_id": run_id, "last_event_id": last}
        assert again == [("end", told if route == "events" else {"type": "CUSTOM", "name": "end", "value": told})]


@pytest.mark.parametrize("route", ROUTES)
def test_a_client_of_an_unknown_run_gets_a_json_404_naming_it(tmp_path: Path, route: str) -> None:
    with serving(app(support, store=f"sqlite:///{tmp_path / 'runs.db'}")) as base:
        answer = httpx.get(f"{base}/runs/no-such-run/{route}")
        assert answer.status_code == 404 and "no-such-run" in answer.json()["error"]


@contextmanager
def stoppable(asgi: Any) -> Iterator[tuple[str, Server, threading.Thread]]:
    """``asgi`` on :class:`loopwright.serve.Server` in a thread (the test shuts it down)."""
    port = free_port()
    server = Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", server, thread
    finally:
        server.force_exit = server.should_exit = True
        thread.join(timeout=20)


@pytest.mark.parametrize("route", ROUTES)
def test_a_client_following_a_waiting_run_is_told_the_server_is_shutting_down(tmp_path: Path, route: str) -> None:
    asgi = app(support, store=f"sqlite:///{tmp_path / 'runs.db'}")
    with stoppable(asgi) as (base, server, thread), httpx.Client(base_url=base, timeout=10) as c:
        run_id = c.post("/runs", json={"input": "refund 42"}).json()["run_id"]
        got: list[tuple[str, Any]] = []
        with c.stream("GET", f"/runs/{run_id}/{route}") as response:
            lines = response.iter_lines()
            pending: list[str] = []
            for line in lines:  # up to the run's suspension: the stream then waits for a decision
                pending.append(line)
                if line == "" and (seen := frames(iter(pending))) and _is_suspended(route, seen[-1][1]):
                    break
            server.should_exit = True  # shut the server down while the client follows the waiting run
            got = frames(iter([*pending, *lines]))
        thread.join(timeout=20)
        assert not thread.is_alive(), "the server did not stop"
    name, data = got[-1]
    assert name == "shutdown", got[-3:]
    data = data["value"] if route == "agui" else data
    assert "shutting down" in data["message"] and data["last_event_id"] >= 1
    assert f"Last-Event-ID: {data['last_event_id']}" in data["message"]


@pytest.mark.slow
def test_loopwright_serve_stopped_with_ctrl_c_tells_its_followers_and_exits(tmp_path: Path) -> None:
    """``loopwright serve`` (a subprocess) gets SIGINT while a client follows a waiting run: the
    client's stream ends with ``shutdown`` and the process exits (it is not held by the stream)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serving_cli("tests.serve_agents:support", "--store", f"sqlite:///{tmp_path / 'runs.db'}", port=port) as server:
        run_id = httpx.post(f"{base}/runs", json={"input": "refund 7"}).json()["run_id"]
        with httpx.stream("GET", f"{base}/runs/{run_id}/events", timeout=20) as response:
            lines = response.iter_lines()
            pending: list[str] = []
            for line in lines:
                pending.append(line)
                if line == "" and (seen := frames(iter(pending))) and _is_suspended("events", seen[-1][1]):
                    break
            server.send_signal(signal.SIGINT)
            stop = time.monotonic() + 40  # (a stream held open gets a ping every 15 s: bound the wait)
            for line in lines:
                pending.append(line)
                if time.monotonic() > stop:
                    break
            got = frames(iter(pending))
        assert got[-1][0] == "shutdown", got[-3:]
        assert server.wait(timeout=30) in (0, -signal.SIGINT)  # (uvicorn re-raises the SIGINT once it stopped)
