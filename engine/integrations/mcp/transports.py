"""How :class:`~loopwright.integrations.mcp.McpToolset` reaches an MCP server: the SDK's stdio
transport (a subprocess, its stderr kept for the error message) or its streamable HTTP
transport, each as a function that opens the transport on an ``AsyncExitStack``; and the record
of one live connection. The ``mcp`` SDK is imported only when a transport opens.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from typing import IO, Any

from ...data.errors import ConfigurationError

Connect = Callable[[AsyncExitStack, "Connection"], Coroutine[Any, Any, Any]]
"""Opens a transport on the stack; returns its (read, write) streams."""


def require_mcp() -> None:
    """Refuse, naming the extra, when the ``mcp`` SDK is not installed (without importing it)."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigurationError("McpToolset needs the MCP SDK: pip install 'loopwright[mcp]'")


class Connection:
    """One live connection: the task that holds the SDK's contexts open, and its session."""

    __slots__ = ("broken", "closing", "errlog", "loop", "session", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.session: Any = None
        self.closing = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.broken = False
        self.errlog: IO[str] | None = None


def stdio_connect(command: str, args: Sequence[str], env: dict[str, str] | None, cwd: str | None) -> Connect:
    """The stdio transport: ``command args`` as a subprocess, its stderr kept in ``conn.errlog``."""

    async def connect(stack: AsyncExitStack, conn: Connection) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog = conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
        return await stack.enter_async_context(stdio_client(params, errlog=errlog))

    return connect


def http_connect(url: str, headers: dict[str, str]) -> Connect:
    """The streamable HTTP transport to ``url``, each request with ``headers``."""

    async def connect(stack: AsyncExitStack, conn: Connection) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return await stack.enter_async_context(streamable_http_client(url, http_client=client))

    return connect
