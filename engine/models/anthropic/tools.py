"""Tool definitions for Claude: an agent's :class:`ToolSpec` as the Messages API's tool, and the
names of the tools Anthropic defines (for :func:`loopwright.runtime.claude_tools.claude_tool`,
which makes one the user's code runs: bash, the text editor, memory).

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

from ...data.events import ToolSpec

__all__ = ["CLAUDE_TOOL_NAMES", "Definitions", "claude_tool_name"]

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


def claude_tool_name(kind: str) -> str | None:
    """The API's name for the Anthropic-defined tool of type ``kind`` (None: not known here)."""
    head, _, tail = kind.rpartition("_")
    return CLAUDE_TOOL_NAMES.get(kind) or CLAUDE_TOOL_NAMES.get(head if tail.isdigit() else kind)


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
