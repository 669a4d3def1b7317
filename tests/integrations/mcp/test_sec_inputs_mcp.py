"""An MCP server whose tool list fails (issue 42, S10): the SDK's raw ``MCPError`` came out of
``run()``; it is a :class:`ToolsetError` naming the server and what to do. Against the real test
server (tests/mcp_servers/calc_server.py ``--fail-list``), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")

from loopwright import Agent, Runner, ScriptedModel
from loopwright.integrations.mcp import McpToolset
from loopwright.runtime.toolsets import ToolsetError
from tests import TESTS

SERVER = str(TESTS / "mcp_servers" / "calc_server.py")
pytestmark = pytest.mark.slow  # each test starts a server process


def _refused(toolset: McpToolset) -> str:
    with pytest.raises(ToolsetError) as caught:
        Runner(Agent(name="a", model=ScriptedModel(["x"]), tools=[toolset])).run_sync("go")
    said = str(caught.value)
    assert "\n" not in said
    assert "could not list its tools" in said and "the tool catalog is locked by another process" in said, said
    assert "tools/list" in said and "Agent(tools=" in said, said  # what to do
    return said


def test_a_stdio_server_whose_tool_list_fails_is_a_toolset_error_naming_it() -> None:
    said = _refused(McpToolset.stdio(sys.executable, [SERVER, "--fail-list"]))
    assert "calc_server.py --fail-list" in said


def test_the_toolset_lists_again_on_the_next_open() -> None:
    toolset = McpToolset.stdio(sys.executable, [SERVER, "--fail-list"])

    async def main() -> None:
        async with toolset:
            for _ in range(2):  # still stale after a failure: listed (and refused) again
                with pytest.raises(ToolsetError, match="could not list its tools"):
                    await toolset.list_tools()

    asyncio.run(main())


@pytest.fixture
def failing_http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port), "--fail-list"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the MCP HTTP server did not start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_an_http_server_whose_tool_list_fails_is_a_toolset_error_naming_it(failing_http_server: str) -> None:
    said = _refused(McpToolset.http(failing_http_server))
    assert failing_http_server in said
