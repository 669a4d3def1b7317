"""MCP servers' tools as toolsets (public; the mcp extra). The modules inside are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "McpToolError": ".toolset",
    "McpToolset": ".toolset",
    "ToolFilter": ".toolset",
}

__all__ = [
    "McpToolError",
    "McpToolset",
    "ToolFilter",
]

if TYPE_CHECKING:
    from .toolset import McpToolError as McpToolError
    from .toolset import McpToolset as McpToolset
    from .toolset import ToolFilter as ToolFilter

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
