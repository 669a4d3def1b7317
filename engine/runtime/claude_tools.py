"""Tools Anthropic defines (bash, the text editor, memory, computer use) that the user's code runs:
Claude knows their schema and how to use them; the request names them by type (the adapter sends
the definition kept in ``ToolSpec.provider["anthropic"]``, see :mod:`loopwright.models.anthropic.tools`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..data.errors import ConfigurationError
from ..models.anthropic.tools import PROVIDER, claude_tool_name
from .tools import Tool

__all__ = ["claude_tool"]


def claude_tool(
    kind: str,
    handler: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Any,
) -> Tool:
    """A tool Anthropic defines (the model knows its schema) whose calls ``handler`` runs.

    ``claude_tool("bash_20250124", run_bash)``: the request carries ``{"type": "bash_20250124",
    "name": "bash"}``; each call's input comes to ``handler`` as keyword arguments, checked
    against its signature like any tool's (so ``def run_bash(command: str | None = None,
    restart: bool = False) -> str``). ``name`` is the API's fixed name for the type (given for
    types this table does not know); ``options`` are other fields of the definition
    (``display_width_px`` for the computer tool, ``cache_control``...) or of :func:`loopwright.tool`
    (``timeout_s``, ``requires_confirmation``...)."""
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(f"claude_tool needs the tool's type, e.g. 'bash_20250124', got {kind!r}")
    name = name or claude_tool_name(kind)
    if name is None:
        raise ConfigurationError(
            f"claude_tool: no known name for the tool type {kind!r}; pass the name the API gives it, "
            f"claude_tool({kind!r}, handler, name=...)"
        )
    tool_options = {k: options.pop(k) for k in list(options) if k in _TOOL_OPTIONS}
    definition = {"type": kind, "name": name, **options}
    return Tool(
        handler,
        name=name,
        description=description or f"Anthropic-defined tool {kind}",
        provider={PROVIDER: definition},
        **tool_options,
    )


_TOOL_OPTIONS = frozenset(
    {"timeout_s", "blocking", "requires_confirmation", "long_running", "credentials", "retries", "retry_on"}
)
