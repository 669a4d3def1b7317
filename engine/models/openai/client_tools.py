"""Built-in tools of the Responses API that the client executes (custom tools, shell, local
shell, apply_patch, computer use): run by the agent's own tool that is defined as one, or the
call ends with an error naming the tool. No ``openai`` import.

An agent tool whose ``provider={"openai": {"type": ...}}`` names one of :data:`TOOL_TYPES` is
sent as that tool (a custom tool with its name and description; the others as their definition
alone, e.g. ``{"type": "shell"}``). A call of it comes back as a :class:`ToolCall` of that tool
(a custom tool's free-form text as ``input``; the others' fields, ``action``, ``operation``...,
as arguments) with a ``client_call`` mark holding the item, which is what is replayed; the
tool's result goes back as the item's ``*_output`` (:func:`client_output`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...data.errors import ModelError
from ...data.events import ImagePart, Message, ProviderPart, ToolCall, ToolResult, ToolSpec
from .. import from_wire
from .shared import PROVIDER, data_url, media_in, result_text

CLIENT_TOOLS = {
    "computer_call": "computer use (computer_call)",
    "local_shell_call": "the local shell tool (local_shell_call)",
    "shell_call": "the shell tool (shell_call)",
    "apply_patch_call": "apply_patch (apply_patch_call)",
    "custom_tool_call": "a custom tool (custom_tool_call)",
    "mcp_approval_request": "a remote MCP server's approval request (mcp_approval_request)",
}
"""Output items of built-in tools the client must execute, and how an error names them."""
TOOL_TYPES = {
    "custom": "custom_tool_call",
    "shell": "shell_call",
    "local_shell": "local_shell_call",
    "apply_patch": "apply_patch_call",
    "computer_use_preview": "computer_call",
    "computer": "computer_call",
}
"""The tool types an agent tool may be defined as, and the item a call of each comes in."""
MARK = "client_call"
_NOT_ARGS = frozenset({"type", "id", "call_id", "status"})


def definition(spec: ToolSpec, extra: dict[str, Any]) -> dict[str, Any]:
    """A tool OpenAI defines, as it is sent: a custom tool with its name and description."""
    if extra.get("type") == "custom":
        return {"name": spec.name, "description": spec.description, **extra}
    return dict(extra)


def handlers(tools: Sequence[ToolSpec]) -> dict[str, str]:
    """Which agent tool runs which item: ``custom_tool_call:<name>`` or the item's type, to the
    tool's name."""
    out: dict[str, str] = {}
    for tool in tools:
        kind = TOOL_TYPES.get(str((tool.provider.get(PROVIDER) or {}).get("type")))
        if kind == "custom_tool_call":
            out[f"{kind}:{tool.name}"] = tool.name
        elif kind is not None:
            out.setdefault(kind, tool.name)
    return out


def call_parts(item: dict[str, Any], handled: dict[str, str]) -> list[ToolCall | ProviderPart]:
    """A client-executed item as a call of the agent tool that runs it (and its mark); an error
    naming the tool when the agent has none."""
    kind = item["type"]
    name = handled.get(f"{kind}:{item.get('name')}" if kind == "custom_tool_call" else kind)
    if name is None or not item.get("call_id"):
        raise client_error(item)
    if kind == "custom_tool_call":
        args: dict[str, Any] = {"input": item.get("input") or ""}
    else:
        args = {k: v for k, v in item.items() if k not in _NOT_ARGS and v is not None}
    mark = ProviderPart(provider=PROVIDER, kind=MARK, block={"call_id": item["call_id"], "item": item})
    return [from_wire.call(item["call_id"], name, args), mark]


def client_error(item: dict[str, Any]) -> ModelError:
    """The error for a built-in tool the client must execute and the agent has no tool for."""
    name = item.get("name") or item.get("server_label") or (item.get("action") or {}).get("type") or ""
    shown = f"{CLIENT_TOOLS[item['type']]}{f' {name!r}' if name else ''}"
    return ModelError(
        f"the model asked to run {shown}, a built-in tool the client executes, and the agent has no tool "
        "defined as it; the run cannot go on. Give the agent one (@tool(provider={'openai': {'type': "
        "'shell'}}), 'apply_patch', 'computer_use_preview', 'local_shell', or 'custom' taking input: str), "
        "or leave that tool out of OpenAIModel(..., tools=[...])",
        retryable=False,
    )


def client_calls(history: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """The client-executed calls in the history (their marks' items), by call id."""
    return {
        str(p.block.get("call_id")): p.block["item"]  # type: ignore[misc]
        for m in history
        if m.role == "assistant"
        for p in m.parts
        if type(p) is ProviderPart
        and p.provider == PROVIDER
        and p.kind == MARK
        and isinstance(p.block.get("item"), dict)
    }


def client_output(item: dict[str, Any], result: ToolResult) -> dict[str, Any]:
    """The agent tool's result as the ``*_output`` item of the call it answers."""
    kind, call_id, failed = item["type"], result.call_id, result.is_error
    text = result_text(result.content)
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": text}
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    if kind == "apply_patch_call":
        return {"type": "apply_patch_call_output", "call_id": call_id, "status": "failed" if failed else "completed",
                "output": text}  # fmt: skip
    if kind == "shell_call":
        if isinstance(result.content, list) and all(isinstance(o, dict) and "outcome" in o for o in result.content):
            output: Any = result.content  # the tool gave the API's own shape
        else:
            exit_code = 1 if failed else 0
            output = [{"stdout": "" if failed else text, "stderr": text if failed else "",
                       "outcome": {"type": "exit", "exit_code": exit_code}}]  # fmt: skip
        return {"type": "shell_call_output", "call_id": call_id, "output": output}
    images = [m for m in media_in(result.content) if m.get("type") == "image"]
    if not images:
        raise ModelError(
            f"the computer tool answered call {call_id!r} without a screenshot: return an ImagePart of the screen "
            "(ImagePart.from_bytes(png)) from the tool defined as {'openai': {'type': 'computer_use_preview'}}",
            retryable=False,
        )
    screenshot = {"type": "computer_screenshot", "image_url": data_url(ImagePart.model_validate(images[-1]))}
    return {"type": "computer_call_output", "call_id": call_id, "output": screenshot}
