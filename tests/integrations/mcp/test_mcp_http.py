"""MCP toolsets against a real MCP server over streamable HTTP on 127.0.0.1 (a subprocess running
uvicorn): listing, prefix, headers, structured/image/isError results, a server that is not there,
a server restarted mid-run."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import TESTS

pytest.importorskip("mcp")

from loopwright import Agent, Runner, ScriptedModel, ToolCall
from loopwright.integrations.mcp import McpToolset
from loopwright.runtime.toolsets import ToolsetError

SERVER = str(TESTS / "mcp_servers" / "calc_server.py")
pytestmark = pytest.mark.slow  # starts a server process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the MCP HTTP server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the MCP HTTP server did not start listening within 60 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    proc = start_server(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def results(result: Any) -> dict[str, Any]:
    return {p.call_id: p for m in result.messages for p in m.parts if p.type == "tool_result"}


def test_tools_listed_and_called_over_http_with_headers(server: str) -> None:
    toolset = McpToolset.http(server, headers={"Authorization": "Bearer test-token-123"}, prefix="web_")
    model = ScriptedModel(
        [
            [
                ToolCall(id="c1", name="web_add", args={"a": 40, "b": 2}),
                ToolCall(id="c2", name="web_whoami", args={}),
                ToolCall(id="c3", name="web_pixel", args={}),
                ToolCall(id="c4", name="web_fail", args={"why": "over http"}),
                ToolCall(id="c5", name="web_weather", args={"city": "Lima"}),
            ],
            "done",
        ]
    )
    result = Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("go")
    assert result.outcome == "final"
    assert [t.name for t in model.requests[0].tools][:3] == ["web_add", "web_weather", "web_pixel"]
    got = results(result)
    assert got["c1"].content == {"result": 42}
    assert got["c2"].content == {"result": "Bearer test-token-123"}  # the header reached the server
    assert got["c3"].content[1]["type"] == "image"
    assert got["c4"].is_error and "refused: over http" in got["c4"].content
    assert got["c5"].content == {"city": "Lima", "temp_c": 21.5}


def test_a_server_that_is_not_there_is_one_line_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[McpToolset.http(url, start_timeout_s=10)])
    with pytest.raises(ToolsetError) as caught:
        Runner(agent).run_sync("go")
    said = str(caught.value)
    assert "\n" not in said and said.startswith(f"MCP server at {url} could not be reached: ")


def test_a_server_restarted_mid_run_costs_one_call() -> None:
    port = free_port()
    proc = start_server(port)
    state: dict[str, Any] = {}

    def replies(request: Any) -> Any:
        from loopwright.models.scripted import to_response

        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 1:  # the first call has run: the server goes away and comes back
            stop(proc)
            state["proc"] = start_server(port)
        if turn < 3:
            return to_response([ToolCall(id=f"c{turn}", name="add", args={"a": turn, "b": 1})])
        return to_response("done")

    toolset = McpToolset.http(f"http://127.0.0.1:{port}/mcp", timeout_s=20)
    try:
        result = Runner(Agent(name="a", model=ScriptedModel(replies), tools=[toolset])).run_sync("go")
    finally:
        stop(state.get("proc", proc))
    got = results(result)
    assert got["c0"].content == {"result": 1}
    # the new server does not know the old session: a new one, and the call runs once there
    assert got["c1"].content == {"result": 2}
    assert got["c2"].content == {"result": 3}
    assert toolset.connections == 2
