"""What OpenAI's two wire formats share (see :mod:`.openai_mapping` for the history rules): the
history as turns with :data:`CONTINUE` after a cut reply, tool results and media as data, the
request's tool and ``tool_choice`` arguments, the ``output_type`` schema the structured-output
instruction carries (and its JSON-schema format), tool call arguments, and a reply's
ModelResponse with its usage. No ``openai`` import.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...data.errors import ModelError
from ...data.events import (
    Instruction,
    Message,
    ModelResponse,
    ProviderPart,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolSpec,
    Usage,
)

PROVIDER = "openai"
CONTINUE = (
    "Your previous reply was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating or summarising what you already wrote."
)
SCHEMA_MARKER = "validates against this JSON schema:\n"
"""The words before the schema in the instruction ``structured_output`` adds for an ``output_type``
(tests/models/openai/test_openai_model.py pins that the feature still says them)."""
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


def schema_format(instructions: Sequence[Instruction]) -> dict[str, Any] | None:
    """The ``output_type``'s schema as both APIs' JSON-schema format (``name``, ``schema``,
    ``strict``), when the request asks for one; each API wraps it its own way."""
    schema = output_schema(instructions)
    if schema is None:
        return None
    return {"name": schema_name(schema), "schema": schema, "strict": False}


def function(tool: ToolSpec) -> dict[str, Any]:
    """A tool as a function declaration (``name``, ``description``, ``parameters``)."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}


def tool_params(request: Any, tools: Callable[[Sequence[ToolSpec]], list[dict[str, Any]]]) -> dict[str, Any]:
    """The ``tools`` (the request's tools as ``tools`` writes them) and ``tool_choice``
    arguments; none for a request without tools."""
    if not request.tools:
        return {}
    params: dict[str, Any] = {"tools": tools(request.tools)}
    if request.tool_choice is not None:
        params["tool_choice"] = TOOL_CHOICE[request.tool_choice]
    return params


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


def not_a_reply(api: str, reply: Any) -> ModelError:
    """A body that is not an ``api`` reply (a proxy's or gateway's answer, most likely)."""
    return ModelError(
        f"the server answered with something that is not a {api} reply ({str(reply)[:200]!r}); "
        "a proxy or gateway in between may have answered instead",
        retryable=True,
    )


def response_of(
    reply: dict[str, Any],
    parts: Sequence[TextPart | ThoughtPart | ToolCall | ProviderPart],
    stop: StopReason,
    details: dict[str, Any],
    *,
    tokens: tuple[str, str],
) -> ModelResponse:
    """A reply (as JSON) as a ModelResponse: its ``parts``, ``stop`` and ``details``, its model, and
    its usage, read by the names of its input and output token counts (``tokens``: ``("input",
    "output")`` in the Responses API, ``("prompt", "completion")`` in Chat; the cached part of
    the input is ``<input>_tokens_details.cached_tokens`` in both)."""
    usage = reply.get("usage") or {}
    prompt, output = tokens
    cached = (usage.get(f"{prompt}_tokens_details") or {}).get("cached_tokens") or 0
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        model=reply.get("model"),
        usage=Usage(
            input_tokens=max((usage.get(f"{prompt}_tokens") or 0) - cached, 0),
            output_tokens=usage.get(f"{output}_tokens") or 0,
            cache_read_tokens=cached,
            requests=1,
        ),
        details=details,
    )


def usable(response: ModelResponse) -> bool:
    """The reply has something to keep: visible text or a tool call."""
    return any((type(p) is TextPart and p.text.strip()) or type(p) is ToolCall for p in response.parts)


def field_of(value: Any, name: str) -> Any:
    """A field of a reply piece given as JSON or as the SDK's object."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)
