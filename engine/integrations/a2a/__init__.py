"""Agents over the Agent2Agent protocol (public; the ``a2a`` extra: ``pip install 'loopwright[a2a]'``).

- :func:`a2a_app`: an agent served over A2A (JSON-RPC, the SDK's own server pieces), its runs as
  tasks kept in the run store;
- :func:`a2a_tool`: a remote A2A agent as a tool (the SDK's client).

The modules inside are private. Guide: ``docs/guide/a2a.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "A2AToolError": ".tool",
    "a2a_app": ".server",
    "a2a_tool": ".tool",
}

__all__ = [
    "A2AToolError",
    "a2a_app",
    "a2a_tool",
]

if TYPE_CHECKING:
    from .server import a2a_app as a2a_app
    from .tool import A2AToolError as A2AToolError
    from .tool import a2a_tool as a2a_tool

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
