"""What :mod:`loopwright.integrations.mcp` makes of an MCP server's answers and processes: a
tool's answer as loopwright content, a failed tool listing as words, a server's stderr as one
line, a stdio server's short name.
Reads the SDK's objects by their attributes (the SDK is imported only to ask for a page of a listing)."""

from __future__ import annotations

from typing import IO, Any

from ...data.errors import LoopwrightError

_TAIL_CHARS = 400


class McpToolError(LoopwrightError, RuntimeError):
    """An MCP tool answered with ``isError``: the call's result is an error the model reads."""


def page(cursor: str | None) -> Any:
    if cursor is None:
        return None
    from mcp_types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)


def list_failed(exc: Exception, who: str) -> tuple[str, bool] | None:
    """What a failed ``tools/list`` of server ``who`` comes to: the ``ToolsetError``'s message and
    whether the connection is lost; None for an error that is neither the server's nor the
    connection's (it goes on up as it is)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        code = f" (MCP error {exc.error.code})" if exc.error.code else ""
        what, lost = f"{exc.error.message or type(exc).__name__}{code}", exc.error.code == CONNECTION_CLOSED
    elif isinstance(exc, OSError | EOFError):
        what, lost = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__), True
    else:
        return None
    return (
        f"MCP server {who} could not list its tools (tools/list failed: {what}); check the server and its log, "
        "or leave the toolset out of Agent(tools=[...])",
        lost,
    )


_RUNNERS = ("python", "node", "uv", "uvx", "npx", "deno", "bun", "java", "ruby")


def stdio_name(argv: list[str]) -> str:
    """A short name for a stdio server: its program, or the script a runner (python, node,
    npx, ...) is given, without folders."""
    base = [part.replace("\\", "/").rsplit("/", 1)[-1] for part in argv]
    if base[0].startswith(_RUNNERS):
        for part in base[1:]:
            if not part.startswith("-"):
                return part
    return base[0]


def leaf(exc: Exception) -> Exception:
    """The first exception inside (nested) exception groups: the one worth naming."""
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def close_log(errlog: IO[str] | None) -> None:
    if errlog is not None:
        errlog.close()


def tail(errlog: IO[str] | None) -> str:
    """The last lines of a server's stderr, on one line."""
    if errlog is None or errlog.closed:
        return ""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()[-4 * _TAIL_CHARS :]
    except (OSError, ValueError):
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-_TAIL_CHARS:]


def content(answer: Any) -> Any:
    """A tool's answer as loopwright content: its structured content (with any images after
    it), else its text and images (one text alone as a str); ``isError`` raises McpToolError."""
    parts = [_part(block) for block in answer.content]
    if answer.is_error:
        said = " ".join(p for p in parts if isinstance(p, str)) or "no message"
        raise McpToolError(said)
    media = [p for p in parts if isinstance(p, dict) and p.get("type") in ("image", "document")]
    structured = answer.structured_content
    if structured is not None:
        return [structured, *media] if media else structured
    if len(parts) == 1:
        return parts[0]
    return parts


def _part(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind == "image":
        return {"type": "image", "media_type": block.mime_type, "data": block.data}
    if kind == "resource":
        found = block.resource
        text = getattr(found, "text", None)
        if text is not None:
            return text
        mime = getattr(found, "mime_type", None) or ""
        if mime.startswith("image/"):
            return {"type": "image", "media_type": mime, "data": found.blob}
        if mime == "application/pdf":
            return {"type": "document", "media_type": mime, "data": found.blob}
        return f"[a {mime or 'binary'} resource: {found.uri}]"
    if kind == "resource_link":
        return f"[resource {block.name}: {block.uri}]"
    if kind == "audio":
        return f"[audio ({block.mime_type}) that loopwright does not pass to the model]"
    return str(block)


__all__ = ["McpToolError", "close_log", "content", "leaf", "list_failed", "page", "stdio_name", "tail"]
