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

from ...data.errors import ModelError, TokenBudgetError
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
from .. import from_wire

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


NOT_JSON = "arguments_not_json"
"""The one argument of a call whose arguments were not JSON (their text as its value): no tool
takes it, so the tool's validation answers the call with an error the model reads and can
correct (a retry of ``@tool(retries=N)``, charged to ``Limits.max_tool_retries``), instead of the
same request being sent again."""


def parse_args(arguments: Any, name: str, *, cut: bool) -> dict[str, Any] | None:
    """A tool call's arguments (JSON text, or an object as some servers send them); None for a
    call cut mid-arguments (dropped); ``{NOT_JSON: text}`` for arguments that are not a JSON
    object (see :data:`NOT_JSON`)."""
    if isinstance(arguments, dict):
        return dict(arguments)
    try:
        args = json.loads(arguments or "{}")
    except (ValueError, TypeError):
        if cut:
            return None
        return {NOT_JSON: str(arguments)[:2000]}
    if not isinstance(args, dict):
        return {NOT_JSON: str(arguments)[:2000]}
    return args


def strict_schema(schema: Any) -> Any:
    """``schema`` as OpenAI's strict mode takes it: every object closed
    (``additionalProperties: false``) with every property required, those that were optional
    made nullable (their ``null`` is dropped again from the arguments, :func:`drop_nulls`)."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if not (k == "default" and v is None)}  # (as the SDK does)
    properties = out.get("properties")
    if out.get("type") == "object" or isinstance(properties, dict):
        out["additionalProperties"] = False
        if isinstance(properties, dict):
            required = set(schema.get("required") or ())
            out["properties"] = {
                k: v if k in required else {"anyOf": [v, {"type": "null"}]} for k, v in properties.items()
            }
            out["required"] = list(properties)
    return out


def strict_function(tool: ToolSpec) -> dict[str, Any]:
    """A strict tool as a function declaration: its schema closed, ``strict: true``."""
    return {**function(tool), "parameters": strict_schema(tool.input_schema), "strict": True}


def drop_nulls(response: ModelResponse, tools: Sequence[ToolSpec]) -> ModelResponse:
    """The nulls strict mode made the model send for a strict tool's optional arguments, dropped
    (the tool's defaults apply, as when the model leaves them out)."""
    optional = {
        t.name: set(t.input_schema.get("properties") or {}) - set(t.input_schema.get("required") or ())
        for t in tools
        if t.strict
    }
    if not optional or not any(type(p) is ToolCall and p.name in optional for p in response.parts):
        return response
    parts = tuple(
        p.model_copy(update={"args": {k: v for k, v in p.args.items() if v is not None or k not in optional[p.name]}})
        if type(p) is ToolCall and p.name in optional
        else p
        for p in response.parts
    )
    return response.model_copy(update={"parts": parts})


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
    the input is ``<input>_tokens_details.cached_tokens`` in both, the part written to the cache
    ``cache_write_tokens``)."""
    usage = reply.get("usage") or {}
    prompt, output = tokens
    split = usage.get(f"{prompt}_tokens_details") or {}
    cached = split.get("cached_tokens") or 0
    written = split.get("cache_write_tokens") or 0
    model = reply.get("model")
    counts = from_wire.usage(
        input_tokens=max((usage.get(f"{prompt}_tokens") or 0) - cached - written, 0),
        output_tokens=usage.get(f"{output}_tokens") or 0,
        cache_read_tokens=cached,
        cache_creation_tokens=written,
        requests=1,
    )
    return from_wire.reply(parts, stop, model, counts, details)


def usable(response: ModelResponse) -> bool:
    """The reply has something to keep: visible text or a tool call."""
    return any((type(p) is TextPart and p.text.strip()) or type(p) is ToolCall for p in response.parts)


def field_of(value: Any, name: str) -> Any:
    """A field of a reply piece given as JSON or as the SDK's object."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


IMAGE_TOKENS = 1600
"""What an image counts for in a local estimate (a large image at high detail is about this)."""
_MEDIA = ("image_url", "input_image", "file", "input_file")


def estimate_input(params: dict[str, Any]) -> int:
    """A local, deliberately generous estimate of a request's input tokens: about four characters
    of its JSON (instructions, messages or input, tools) a token, an image or file
    :data:`IMAGE_TOKENS`."""
    media = 0

    def strip(value: Any) -> Any:
        nonlocal media
        if isinstance(value, dict):
            if value.get("type") in _MEDIA:
                media += 1
                return None
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    body = strip({k: params.get(k) for k in ("instructions", "input", "messages", "tools")})
    return len(json.dumps(body, separators=(",", ":"), default=str)) // 4 + media * IMAGE_TOKENS


def check_budget(params: dict[str, Any], left: int) -> None:
    """Refuse, before sending, a request larger than what is left of ``max_total_tokens``."""
    estimate = estimate_input(params)
    if estimate > left:
        raise TokenBudgetError(
            f"the request holds about {estimate} input tokens (a local estimate: 4 characters a token), more than "
            f"the {max(left, 0)} left of max_total_tokens; it was not sent. Raise max_total_tokens, or keep tool "
            "results and history smaller"
        )


def estimated(response: ModelResponse, params: dict[str, Any]) -> ModelResponse:
    """A reply whose server sent no usage (it ignores ``stream_options``), with its usage
    estimated locally (the request's input, the reply's text, thoughts and arguments, four
    characters a token) so ``max_total_tokens`` and ``max_cost_usd`` still count it; its
    ``details["usage_estimated"]`` says so (in the ``model_responded`` event)."""
    said = 0
    for p in response.parts:
        if isinstance(p, TextPart | ThoughtPart):
            said += len(p.text)
        elif isinstance(p, ToolCall):
            said += len(json.dumps(p.args)) + len(p.name)
    usage = Usage(input_tokens=estimate_input(params), output_tokens=max(said // 4, 1), requests=1)
    return response.model_copy(update={"usage": usage, "details": {**response.details, "usage_estimated": True}})
