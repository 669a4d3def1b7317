"""`loopwright serve --a2a` as a user runs it: a subprocess serving the HTTP API with the A2A agent
mounted at /a2a/, the SDK's client completing a task there, the run in the HTTP API and its trace page."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState

from tests.helpers import serving_cli
from tests.integrations.a2a.test_a2a_server import answer, client_of, decision, pending, send, text_message
from tests.serve_agents import free_port

pytestmark = pytest.mark.slow

AGENT = "tests.integrations.a2a.test_a2a_server:support"


def test_serve_mounts_the_a2a_agent_beside_the_http_api(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "runs.db"
    base = f"http://127.0.0.1:{port}"
    with serving_cli(
        AGENT, "--a2a", AGENT, "--store", f"sqlite:///{db}", port=port, ready="/a2a/.well-known/agent-card.json"
    ) as server:
        assert server.stdout is not None
        assert f"on http://127.0.0.1:{port}/" in server.stdout.readline()
        card = httpx.get(f"{base}/a2a/.well-known/agent-card.json")
        assert card.json()["supportedInterfaces"][0]["url"] == f"{base}/a2a/"

        async def go() -> str:
            async with client_of(f"{base}/a2a/") as client:
                task = await send(client, text_message("refund H8"))
                assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                task = await send(client, decision(task, pending(task)[0]["call_id"]))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert answer(task) == "done: refunded H8"
                return task.id

        task_id = asyncio.run(go())
        run = httpx.get(f"{base}/runs/{task_id}").json()  # the task is a run of the HTTP API too
        assert (run["outcome"], run["output"]) == ("final", "done: refunded H8")
        trace = httpx.get(f"{base}/runs/{task_id}/trace")
        assert trace.status_code == 200 and task_id[:12] in trace.text
        for shown in ("refund H8", "suspended", "resumed", "refunded H8"):  # what docs/guide/a2a.md says it shows
            assert shown in trace.text, shown


def test_serve_a2a_with_a_token_protects_both(tmp_path: Path) -> None:
    """``serve --a2a --token-env``: the card public and naming bearer, /a2a/ and the HTTP API 401
    without the token; with it the SDK's client completes a task, which the HTTP API shows."""
    token = "k" * 40
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    signed = {"Authorization": f"Bearer {token}"}
    with serving_cli(
        AGENT, "--a2a", AGENT, "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--token-env", "A2A_TOKEN",
        port=port, ready="/a2a/.well-known/agent-card.json", env={"A2A_TOKEN": token},
    ) as server:  # fmt: skip
        assert server.stdout is not None
        assert f"on http://127.0.0.1:{port}/" in server.stdout.readline()
        card = httpx.get(f"{base}/a2a/.well-known/agent-card.json")
        assert card.status_code == 200 and "bearer" in card.json()["securitySchemes"]
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        assert httpx.post(f"{base}/a2a/", json=body, headers={"A2A-Version": "1.0"}).status_code == 401
        assert httpx.get(f"{base}/runs").status_code == 401

        async def go() -> str:
            async with client_of(f"{base}/a2a/", headers=signed) as client:
                task = await send(client, text_message("look up Z9"))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                return task.id

        task_id = asyncio.run(go())
        run = httpx.get(f"{base}/runs/{task_id}", headers=signed).json()
        assert (run["outcome"], run["output"]) == ("final", "done: order Z9: shipped")
