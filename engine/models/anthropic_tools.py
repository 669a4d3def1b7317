"""Tool definitions for Claude: an agent's :class:`ToolSpec` as the Messages API's tool, and
:func:`claude_tool` for the tools Anthropic defines and the user's code runs (bash, the text
editor, memory).

No ``anthropic`` import here: the SDK's ``transform_schema`` is handed in by the model.

- ``strict`` (``@tool(strict=True)``, ``Agent(strict_tools=True)``): ``"strict": true`` and the
  schema shaped the way the API takes it for strict use (``transform_schema``: every object
  closed with ``additionalProperties: false``, constraints it cannot enforce moved into the
  descriptions), as the SDK does for structured output.
- ``ToolSpec.provider["anthropic"]``: fields merged into the definition as they are
  (``defer_loading``, ``input_examples``, ``eager_input_streaming``, ``cache_control``...); with a
  ``type`` it is a tool Anthropic defines, sent as it is instead of name, description and schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..data.errors import ConfigurationError
from ..data.events import ToolSpec
from ..runtime.tools import Tool

__all__ = ["CLAUDE_TOOL_NAMES", "Definitions", "claude_tool"]

PROVIDER = "anthropic"
CLAUDE_TOOL_NAMES: dict[str, str] = {
    "bash": "bash",
    "text_editor_20250728": "str_replace_based_edit_tool",
    "text_editor_20250429": "str_replace_based_edit_tool",
    "text_editor_20250124": "str_replace_editor",
    "text_editor_20241022": "str_replace_editor",
    "memory": "memory",
    "computer": "computer",
}
"""The name the API wants for each Anthropic-defined client tool (by its type, or its type's
family before the date)."""

Transform = Callable[[dict[str, Any]], dict[str, Any]]


def _family(kind: str) -> str:
    head, _, tail = kind.rpartition("_")
    return head if tail.isdigit() else kind


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
    known = CLAUDE_TOOL_NAMES.get(kind) or CLAUDE_TOOL_NAMES.get(_family(kind))
    name = name or known
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


class Definitions:
    """The API's tool definitions of an agent's specs, each made once (a spec is a frozen value;
    the cache holds it, so its id is not reused while it is here)."""

    __slots__ = ("_made", "_transform")

    def __init__(self, transform: Transform | None) -> None:
        self._transform = transform
        self._made: dict[int, tuple[ToolSpec, dict[str, Any]]] = {}

    def __call__(self, spec: ToolSpec) -> dict[str, Any]:
        found = self._made.get(id(spec))
        if found is not None and found[0] is spec:
            return found[1]
        if len(self._made) > 1024:  # specs edited each pass (prepare_tools): keep the cache bounded
            self._made.clear()
        made = self._made[id(spec)] = (spec, self._define(spec))
        return made[1]

    def _define(self, spec: ToolSpec) -> dict[str, Any]:
        extra = spec.provider.get(PROVIDER) or {}
        if "type" in extra:  # a tool Anthropic defines: its definition as it is
            return dict(extra)
        definition: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.input_schema,
        }
        if spec.strict:
            if self._transform is not None:
                definition["input_schema"] = self._transform(spec.input_schema)
            definition["strict"] = True
        definition.update(extra)
        return definition
