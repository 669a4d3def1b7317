"""What OpenAI's two wire formats share (see :mod:`.openai_mapping` for the history rules): the
history as turns with :data:`CONTINUE` after a cut reply, tool results and media as data, tool
call arguments, usage, and the ``output_type`` schema the structured-output instruction carries.
No ``openai`` import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..data.errors import ModelError
from ..data.events import Instruction, Message, ModelResponse, TextPart, ToolCall, Usage

PROVIDER = "openai"
CONTINUE = (
    "Your previous reply was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating or summarising what you already wrote."
)
SCHEMA_MARKER = "validates against this JSON schema:\n"
"""The words before the schema in the instruction ``structured_output`` adds for an ``output_type``
(tests/test_openai_model.py pins that the feature still says them)."""
TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


# ------------------------------------------------------------------ shared


def output_schema(instructions: Sequence[Instruction]) -> dict[str, Any] | None:
    """The JSON schema of the agent's ``output_type``, when the request asks for one."""
    for instruction in instructions:
        at = instruction.text.find(SCHEMA_MARKER)
        if at >= 0:
            try:
                schema = json.loads(instruction.text[at + len(SCHEMA_MARKER) :])
            except ValueError:
                return None
            return schema if isinstance(schema, dict) else None
    return None


def schema_name(schema: dict[str, Any]) -> str:
    name = "".join(c for c in str(schema.get("title") or "answer") if c.isalnum() or c in "_-")
    return name[:64] or "answer"


def data_url(part: Any) -> str:
    if part.url:
        return str(part.url)
    return f"data:{part.media_type or 'application/octet-stream'};base64,{part.data or ''}"


def result_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def media_in(content: Any) -> list[dict[str, Any]]:
    """Images and documents in a tool's result (as data), in order."""
    items = content if isinstance(content, list) else [content]
    return [item for item in items if isinstance(item, dict) and item.get("type") in ("image", "document")]


def history_turns(history: Sequence[Message]) -> list[tuple[str, list[Any]]]:
    """The history as (role, parts) turns: same-role turns merged, a :data:`CONTINUE` user turn
    between two assistant turns and after a last assistant turn (a cut reply goes on)."""
    turns: list[tuple[str, list[Any]]] = []
    for message in history:
        if not message.parts:
            continue
        if turns and turns[-1][0] == message.role:
            if message.role == "assistant":
                turns += [("user", [TextPart(text=CONTINUE)]), ("assistant", list(message.parts))]
            else:
                turns[-1][1].extend(message.parts)
        else:
            turns.append((message.role, list(message.parts)))
    if turns and turns[-1][0] == "assistant":
        turns.append(("user", [TextPart(text=CONTINUE)]))
    return turns


def parse_args(arguments: str | None, name: str, *, cut: bool) -> dict[str, Any] | None:
    """A tool call's arguments; None for a call cut mid-arguments (dropped)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        if cut:
            return None
        raise ModelError(
            f"the model called {name!r} with arguments that are not JSON ({(arguments or '')[:120]!r}); "
            "the call was not run",
            retryable=True,
        ) from None
    if not isinstance(args, dict):
        raise ModelError(f"the model called {name!r} with arguments that are not a JSON object", retryable=True)
    return args


def usage_of(input_tokens: int | None, output_tokens: int | None, cached: int | None) -> Usage:
    cached = cached or 0
    return Usage(
        input_tokens=max((input_tokens or 0) - cached, 0),
        output_tokens=output_tokens or 0,
        cache_read_tokens=cached,
        requests=1,
    )


def usable(response: ModelResponse) -> bool:
    """The reply has something to keep: visible text or a tool call."""
    return any((type(p) is TextPart and p.text.strip()) or type(p) is ToolCall for p in response.parts)


def field_of(value: Any, name: str) -> Any:
    """A field of a reply piece given as JSON or as the SDK's object."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)
