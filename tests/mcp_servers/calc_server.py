"""A small MCP server for the tests, written with the SDK's MCPServer: ``python calc_server.py``
serves over stdio, ``python calc_server.py http PORT`` over streamable HTTP on 127.0.0.1:PORT,
``--fail-start`` writes a line to stderr and exits before it serves, ``--fail-list`` serves but
answers every tools/list with an error."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent
from pydantic import BaseModel

# a 1x1 PNG
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

server = MCPServer("calc", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Weather(BaseModel):
    city: str
    temp_c: float


@server.tool()
def weather(city: str) -> Weather:
    """The weather in a city (structured)."""
    return Weather(city=city, temp_c=21.5)


@server.tool()
def pixel() -> list[TextContent | ImageContent]:
    """A one-pixel image with a caption."""
    return [
        TextContent(type="text", text="one red pixel"),
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
    ]


@server.tool()
def fail(why: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"refused: {why}")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def nap(seconds: float) -> str:
    """Sleeps, then says so."""
    import anyio

    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """Kills the server process in the middle of the call."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header the request came with (HTTP only)."""
    headers = ctx.headers or {}
    return str(headers.get("authorization", "none"))


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra` and tells the client its tool list changed."""
    if server._tool_manager.get_tool("extra") is None:

        @server.tool()
        def extra(text: str) -> str:
            """Echoes its text (added by grow)."""
            return f"extra: {text}"

    await ctx.session.send_tool_list_changed()
    return "grown"


def main() -> None:
    if "--fail-start" in sys.argv:
        print("calc_server: cannot open /nonexistent/calc.db: no such file", file=sys.stderr, flush=True)
        sys.exit(3)
    if "--fail-list" in sys.argv:

        async def broken_list() -> list[Any]:
            raise RuntimeError("the tool catalog is locked by another process")

        server.list_tools = broken_list  # type: ignore[method-assign]
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
