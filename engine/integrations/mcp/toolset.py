"""MCP toolsets: the tools of a Model Context Protocol server as loopwright tools.

::

    from loopwright.integrations.mcp import McpToolset

    files = McpToolset.stdio("python", ["files_server.py"], prefix="files_")
    search = McpToolset.http("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."})
    agent = Agent(name="a", model=model, tools=[files, search, my_function])

Needs the ``mcp`` extra (``pip install 'loopwright[mcp]'``, the official ``mcp`` SDK), imported
only when a toolset connects. The connection is opened once per runner (or per ``async with
toolset:``), its tools listed when a run starts and cached until the server says the list changed
(``notifications/tools/list_changed``), and closed with the runner (``async with runner:``,
``runner.aclose()``; ``run_sync`` closes it when its event loop ends). A connection that drops
fails the call in progress (an error result the model reads) and is opened again on the next call,
at most ``max_reconnects`` times in a row. A server that cannot start, or whose tool list fails, is
a :class:`ToolsetError` naming it, raised out of the run's start. Each tool is a
:class:`~loopwright.runtime.toolsets.SchemaTool`: its JSON schema goes to the model as the server
wrote it; its call is bounded by the tool timeout; its text, images and structured content become
the result; ``isError`` an error result.
(Transports: :mod:`.mcp_transports`; what answers become: :mod:`.mcp_parts`.)
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from ...data.errors import ConfigurationError
from ...data.events import ToolSpec
from ...runtime.tools import Tool
from ...runtime.toolsets import SchemaTool, ToolsetError, tool_name
from . import parts
from .parts import McpToolError
from .transports import Connection, http_connect, require_mcp, stdio_connect

ToolFilter = Collection[str] | Callable[[ToolSpec], bool]
"""Which of the server's tools the agent gets: their names (as the server gives them), or a
function of each tool's spec (its server name, description and schema) returning True to keep it."""

_SESSION_GONE = re.compile(r"^session (not found|terminated)", re.IGNORECASE)
_LIST_PAGES = 100


class McpToolset:
    """The tools of one MCP server, for ``Agent(tools=[...])``. Make one with :meth:`stdio` or
    :meth:`http`.

    - ``tool_filter``: the server's tool names to keep, or a function of a :class:`ToolSpec`;
    - ``prefix``: put before every tool name (``prefix="files_"``) against clashes;
    - ``timeout_s``: each call's bound (else the run's ``Limits.tool_timeout_s``);
    - ``requires_confirmation``: True (every tool), or the server names of the tools whose calls
      wait for a person's approval (the run suspends; ``Runner.resume`` with ``approve()``);
    - ``max_reconnects``: how many times in a row a dropped connection is opened again;
    - ``start_timeout_s``: how long the server has to answer the handshake."""

    def __init__(
        self,
        connect: Callable[[AsyncExitStack, Connection], Any],
        *,
        name: str,
        where: str,
        tool_filter: ToolFilter | None = None,
        prefix: str = "",
        timeout_s: float | None = None,
        requires_confirmation: bool | Collection[str] = False,
        max_reconnects: int = 3,
        start_timeout_s: float = 30.0,
    ) -> None:
        require_mcp()
        if isinstance(tool_filter, str):
            raise ConfigurationError(
                f"MCP toolset {name!r}: tool_filter takes a list of names, got the str {tool_filter!r}"
            )
        if isinstance(requires_confirmation, str):
            raise ConfigurationError(
                f"MCP toolset {name!r}: requires_confirmation takes True or a list of tool names, "
                f"got the str {requires_confirmation!r}"
            )
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigurationError(f"MCP toolset {name!r}: timeout_s must be positive, got {timeout_s}")
        if max_reconnects < 0:
            raise ConfigurationError(f"MCP toolset {name!r}: max_reconnects must be 0 or more, got {max_reconnects}")
        self._connect_with = connect
        self.name = name
        self.where = where
        """The server as messages name it: its command line, or its URL."""
        self.tool_filter = tool_filter
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.requires_confirmation = requires_confirmation
        self.can_wait = bool(requires_confirmation)
        self.max_reconnects = max_reconnects
        self.start_timeout_s = start_timeout_s
        self._users = 0
        self._conn: Connection | None = None
        self._tools: tuple[Tool, ...] = ()
        self._version = -1
        self._stale = True
        self._failures = 0
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._refreshing: set[asyncio.Task[Any]] = set()
        self.connections = 0
        """How many times this toolset has connected (reconnections included)."""
        self._who = where if name in where else f"{where} ({name!r})"
        self._cannot = "could not start"

    # ------------------------------------------------------------------ making one

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str = "",
        timeout_s: float | None = None,
        requires_confirmation: bool | Collection[str] = False,
        max_reconnects: int = 3,
        start_timeout_s: float = 30.0,
    ) -> McpToolset:
        """A server run as a subprocess (``command args``), spoken to over its stdin and stdout.
        ``env`` adds to the few variables the SDK passes on (PATH, HOME, ...). Its stderr is kept:
        a server that cannot start is named with the end of what it wrote there."""
        if not isinstance(command, str) or not command:
            raise ConfigurationError(f"McpToolset.stdio: command must be a program name or path, got {command!r}")
        if isinstance(args, str):
            raise ConfigurationError(f"McpToolset.stdio: args must be a list of strings, got the str {args!r}")
        argv = [command, *args]
        env_ = dict(env) if env is not None else None

        return cls(
            stdio_connect(command, args, env_, cwd),
            name=name or parts.stdio_name(argv),
            where=f"`{shlex.join(argv)}`",
            tool_filter=tool_filter,
            prefix=prefix,
            timeout_s=timeout_s,
            requires_confirmation=requires_confirmation,
            max_reconnects=max_reconnects,
            start_timeout_s=start_timeout_s,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str = "",
        timeout_s: float | None = None,
        requires_confirmation: bool | Collection[str] = False,
        max_reconnects: int = 3,
        start_timeout_s: float = 30.0,
    ) -> McpToolset:
        """A server reached over streamable HTTP at ``url`` (``http://host:port/mcp``), each
        request with ``headers`` (an ``Authorization`` header, say)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"McpToolset.http: url must start with http:// or https://, got {url!r}")
        headers_ = dict(headers or {})

        made = cls(
            http_connect(url, headers_),
            name=name or url,
            where=f"at {url}",
            tool_filter=tool_filter,
            prefix=prefix,
            timeout_s=timeout_s,
            requires_confirmation=requires_confirmation,
            max_reconnects=max_reconnects,
            start_timeout_s=start_timeout_s,
        )
        made._cannot = "could not be reached"
        return made

    # ------------------------------------------------------------------ the Toolset protocol

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools as last listed (empty before the first listing)."""
        return self._tools

    @property
    def version(self) -> int:
        """-1 before the first listing; one more each time the tools are listed again."""
        return self._version

    async def open(self) -> None:
        """Connect (the first open; later ones count): ``ToolsetError`` if the server cannot start."""
        self._users += 1
        if self._users == 1:
            self._failures = 0
            try:
                await self._live()
            except BaseException:
                self._users -= 1
                raise

    async def close(self) -> None:
        """Disconnect (the last close)."""
        if self._users == 0:
            return
        self._users -= 1
        if self._users == 0:
            conn, self._conn = self._conn, None
            if conn is not None:
                await self._drop(conn)

    async def __aenter__(self) -> McpToolset:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def list_tools(self) -> tuple[Tool, ...]:
        """The server's tools (listed on first use and after a list-changed notification); a
        listing that fails is a ``ToolsetError`` naming the server (tried again on the next use)."""
        session = await self._live()
        if self._stale or self._version < 0:
            try:
                await self._refresh(session)
            except Exception as exc:
                failed = parts.list_failed(exc, self._who)
                if failed is None:
                    raise
                self._stale = True
                if failed[1]:
                    self._lost()
                raise ToolsetError(failed[0]) from None
        return self._tools

    # ------------------------------------------------------------------ the connection

    async def _live(self) -> Any:
        """The live session: connected again if the connection dropped or belongs to an event
        loop that has ended (at most ``max_reconnects`` failures in a row)."""
        conn = self._conn
        loop = asyncio.get_running_loop()
        if conn is not None and conn.session is not None and not conn.broken and conn.loop is loop:
            return conn.session
        if self._users == 0:
            raise ToolsetError(
                f"MCP toolset {self.name!r} is not open: put it in Agent(tools=[...]) and run it with a Runner, "
                "or use `async with toolset:`"
            )
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {loop: (lock := asyncio.Lock())}  # (the locks of ended loops go)
        async with lock:
            conn = self._conn
            if conn is not None and conn.session is not None and not conn.broken and conn.loop is loop:
                return conn.session
            if conn is not None:
                self._conn = None
                if conn.loop is loop:
                    await self._drop(conn)
            if self.connections and self._failures >= self.max_reconnects:
                raise ToolsetError(
                    f"MCP server {self._who} could not be reached {self._failures} times in a row; "
                    "loopwright stopped trying (close and open the toolset to try again)"
                )
            try:
                self._conn = await self._connect(loop)
            except ToolsetError:
                self._failures += 1
                raise
            self._failures = 0
            self._stale = True  # a new connection: its tools are listed again
            return self._conn.session

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> Connection:
        conn = Connection(loop)
        ready: asyncio.Future[None] = loop.create_future()
        conn.task = loop.create_task(self._serve(conn, ready), name=f"mcp {self.name}")
        try:
            await ready
        except asyncio.CancelledError:
            conn.closing.set()
            raise
        except Exception as exc:
            await asyncio.gather(conn.task, return_exceptions=True)
            said = self._cannot_start(exc, conn)
            parts.close_log(conn.errlog)
            raise ToolsetError(said) from None
        self.connections += 1
        return conn

    async def _serve(self, conn: Connection, ready: asyncio.Future[None]) -> None:
        """Holds the SDK's transport and session open (they must be left in the task that
        entered them) until the toolset closes this connection."""
        import anyio
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await self._connect_with(stack, conn)
                session = await stack.enter_async_context(ClientSession(read, write, message_handler=self._on_message))
                with anyio.fail_after(self.start_timeout_s):
                    await session.initialize()
                conn.session = session
                ready.set_result(None)
                await conn.closing.wait()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(parts.leaf(exc) if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            conn.session, conn.broken = None, True
            if ready.done() and not ready.cancelled() and ready.exception() is None:
                parts.close_log(conn.errlog)  # (a connection that failed to start: _connect reads it first)

    async def _drop(self, conn: Connection) -> None:
        conn.closing.set()
        conn.broken = True
        if conn.task is not None and not conn.task.done():
            await asyncio.gather(conn.task, return_exceptions=True)
        parts.close_log(conn.errlog)

    def _cannot_start(self, exc: BaseException, conn: Connection) -> str:
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(exc, TimeoutError):
            what = f"it did not answer the handshake within {self.start_timeout_s:g} s"
        tail = parts.tail(conn.errlog)
        said = f"; its stderr ends: {tail}" if tail else ""
        return f"MCP server {self._who} {self._cannot}: {what}{said}"

    async def _on_message(self, message: Any) -> None:
        """The server's notifications: a changed tool list is listed again (in the background;
        a call that ends meanwhile waits for it)."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True
            conn = self._conn
            if conn is not None and conn.session is not None:
                task = asyncio.get_running_loop().create_task(self._refresh_quietly(conn.session))
                self._refreshing.add(task)
                task.add_done_callback(self._refreshing.discard)

    async def _refresh_quietly(self, session: Any) -> None:
        if self._stale:
            try:
                await self._refresh(session)
            except Exception:  # the next run start (or call) lists again
                self._stale = True

    async def _refresh(self, session: Any) -> None:
        self._stale = False  # (a notification during the listing marks it stale again)
        listed: list[Any] = []
        cursor = None
        for _ in range(_LIST_PAGES):
            page = await session.list_tools(params=parts.page(cursor))
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        self._tools = tuple(self._tool(t) for t in listed if self._keeps(t))
        self._version += 1

    def _keeps(self, listed: Any) -> bool:
        wanted = self.tool_filter
        if wanted is None:
            return True
        if callable(wanted):
            spec = ToolSpec(name=listed.name, description=listed.description or "", input_schema=listed.input_schema)
            return bool(wanted(spec))
        return listed.name in wanted

    def _tool(self, listed: Any) -> Tool:
        remote: str = listed.name
        rule = self.requires_confirmation
        confirm = rule if isinstance(rule, bool) else remote in rule

        async def call(**arguments: Any) -> Any:
            return await self.call(remote, arguments)

        return SchemaTool(
            tool_name(remote, self.prefix),
            listed.description or "",
            listed.input_schema,
            call,
            source=f"MCP server {self.name!r}",
            timeout_s=self.timeout_s,
            requires_confirmation=confirm,
        )

    # ------------------------------------------------------------------ calls

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``tool`` (its own name): what the model is shown. Raises
        :class:`McpToolError` for an ``isError`` answer, :class:`ToolsetError` for a lost connection."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        session = await self._live()
        try:
            try:
                answer = await session.call_tool(tool, arguments)
            except MCPError as exc:
                if not _SESSION_GONE.search(exc.error.message or ""):
                    raise
                # the server does not know this session (it restarted): the call did not run there;
                # a new session, and the call once more (the spec's way back)
                self._lost()
                session = await self._live()
                answer = await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.error.code != CONNECTION_CLOSED:
                raise McpToolError(f"the MCP server answered with an error: {exc.error.message}") from None
            self._lost()
            raise ToolsetError(
                f"the connection to MCP server {self.where} was lost during the call ({exc.error.message}); "
                "the next call connects again"
            ) from None
        except (OSError, EOFError) as exc:
            self._lost()
            raise ToolsetError(
                f"the connection to MCP server {self.where} failed during the call ({type(exc).__name__}: {exc}); "
                "the next call connects again"
            ) from None
        await asyncio.sleep(0)  # (a list-changed notice sent before the answer is handled by now)
        if self._refreshing:  # the call changed the tool list: the next request offers the new one
            await asyncio.gather(*self._refreshing, return_exceptions=True)
        return parts.content(answer)

    def _lost(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.broken = True

    def __repr__(self) -> str:
        return f"McpToolset({self.name!r}, {self.where})"


__all__ = ["McpToolError", "McpToolset", "ToolFilter"]
