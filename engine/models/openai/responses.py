"""loopwright's requests as Responses API arguments (``input`` items, tools, text format), and
its replies and stream events (as JSON or the SDK's objects) as loopwright's (rules:
:mod:`.openai_mapping`). No ``openai`` import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...data.events import (
    DocumentPart,
    ImagePart,
    Message,
    ModelResponse,
    ProviderPart,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from .. import from_wire
from .client_tools import CLIENT_TOOLS, MARK, call_parts, client_calls, client_output, definition
from .shared import (
    PROVIDER,
    data_url,
    field_of,
    function,
    history_turns,
    media_in,
    not_a_reply,
    parse_args,
    response_of,
    result_text,
    schema_format,
    strict_function,
    tool_params,
)

HOSTED = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
"""Hosted tools' items: sent back with their ``status`` (the API's input types require it)."""
MARKS = frozenset({"reply", "phase", "namespace", MARK})
"""Kinds of ``ProviderPart`` that are marks on a neighbour, never sent as items themselves:
``phase`` (of the assistant message whose text follows), ``namespace`` (of a function call),
``client_call`` (a call of a client-executed tool: its item is sent back, :mod:`.client_tools`)."""


def responses_input(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    client = client_calls(history)
    for role, parts in history_turns(history):
        if role == "user":
            results = [p for p in parts if type(p) is ToolResult]
            for result in results:
                item = client.get(result.call_id)
                items.append(_function_output(result) if item is None else client_output(item, result))
            content = [block for p in parts if type(p) is not ToolResult and (block := _input_block(p)) is not None]
            if content:
                items.append({"role": "user", "content": content})
            continue
        items += _assistant_items(parts)
    return items


def _assistant_items(parts: list[Any]) -> list[dict[str, Any]]:
    """An assistant turn as items: its text runs as messages (with their ``phase``), its calls
    (with their ``namespace``) and its own items in order."""
    items: list[dict[str, Any]] = []
    text: list[str] = []
    phase: Any = None
    spaces = {
        p.block.get("call_id"): p.block.get("namespace")
        for p in parts
        if type(p) is ProviderPart and p.provider == PROVIDER and p.kind == "namespace"
    }
    client = {
        p.block.get("call_id"): p.block.get("item")
        for p in parts
        if type(p) is ProviderPart and p.provider == PROVIDER and p.kind == MARK
    }

    def flush() -> None:
        nonlocal phase
        if text:
            message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
            if phase is not None:
                message["phase"] = phase
            items.append(message)
            text.clear()
        phase = None

    for part in parts:
        kind = type(part)
        if kind is TextPart:
            if part.text.strip():
                text.append(part.text)
            continue
        if kind is ProviderPart and part.provider == PROVIDER and part.kind == "phase":
            flush()
            phase = part.block.get("phase")
            continue
        flush()
        item = _call_item(part, spaces, client) if kind is ToolCall else _own_item(part)
        if item is not None:
            items.append(item)
    flush()
    return items


def _call_item(part: ToolCall, spaces: dict[Any, Any], client: dict[Any, Any]) -> dict[str, Any]:
    if isinstance(client.get(part.id), dict):
        return dict(client[part.id])  # a client-executed tool's call: its item as it came
    call = {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": json.dumps(part.args)}
    if spaces.get(part.id):
        call["namespace"] = spaces[part.id]
    return call


def _own_item(part: Any) -> dict[str, Any] | None:
    """An OpenAI item kept in the history, as it is sent back (None: not sent)."""
    if type(part) is not ProviderPart or part.provider != PROVIDER or part.kind in MARKS:
        return None
    if part.kind == "reasoning" and not part.block.get("encrypted_content"):
        return None  # a reasoning item without its content cannot be sent back statelessly (store=False)
    return dict(part.block)


def _function_output(result: ToolResult) -> dict[str, Any]:
    media = media_in(result.content)
    if not media:
        return {"type": "function_call_output", "call_id": result.call_id, "output": result_text(result.content)}
    items = result.content if isinstance(result.content, list) else [result.content]
    output = [
        _input_block(ImagePart.model_validate(i) if i.get("type") == "image" else DocumentPart.model_validate(i))
        if isinstance(i, dict) and i in media
        else {"type": "input_text", "text": result_text(i)}
        for i in items
    ]
    return {"type": "function_call_output", "call_id": result.call_id, "output": output}


def _input_block(part: Any) -> dict[str, Any] | None:
    kind = type(part)
    if kind is TextPart:
        return {"type": "input_text", "text": part.text} if part.text.strip() else None
    if kind is ImagePart:
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    if kind is DocumentPart:
        if part.data or part.url:
            block: dict[str, Any] = {"type": "input_file", "filename": part.title or "document.pdf"}
            if part.url:
                block["file_url"] = part.url
            else:
                block["file_data"] = data_url(part)
            return block
        return {"type": "input_text", "text": part.text or ""}
    return None


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools as Responses functions; a strict tool's with ``strict: true`` and its schema
    closed; ``ToolSpec.provider["openai"]`` merged in (with a ``type``: a tool OpenAI defines,
    sent as :func:`.client_tools.definition` makes it)."""
    out: list[dict[str, Any]] = []
    for t in tools:
        extra = t.provider.get(PROVIDER) or {}
        if "type" in extra:
            out.append(definition(t, extra))
            continue
        declared = strict_function(t) if t.strict else {**function(t), "strict": False}
        out.append({"type": "function", **declared, **extra})
    return out


def responses_params(request: Any) -> dict[str, Any]:
    """The request-dependent ``responses.create`` arguments (instructions, input, tools, format)."""
    params: dict[str, Any] = {"input": responses_input(request.messages)}
    instructions = "\n\n".join(i.text for i in request.instructions if i.text)
    if instructions:
        params["instructions"] = instructions
    params.update(tool_params(request, responses_tools))
    schema = schema_format(request.instructions)
    if schema is not None:
        params["text"] = {"format": {"type": "json_schema", **schema}}
    return params


def _summary(item: dict[str, Any]) -> str:
    return "\n\n".join(s.get("text", "") for s in item.get("summary") or () if isinstance(s, dict))


def from_responses(reply: dict[str, Any], handled: dict[str, str] | None = None) -> ModelResponse:
    """A Responses API reply (as JSON) as a ModelResponse. A built-in tool the client executes
    is a call of the agent tool that ``handled`` names for it (:func:`.client_tools.handlers`),
    else the call ends with an error naming it."""
    if not isinstance(reply, dict) or "output" not in reply:
        raise not_a_reply("Responses API", reply)
    reason = (reply.get("incomplete_details") or {}).get("reason")
    cut = reply.get("status") == "incomplete" and reason != "content_filter"
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart] = []
    refused = reason == "content_filter"
    calls = False
    for item in reply["output"]:
        kind = item.get("type")
        if kind == "message":
            refused = _message(item, parts) or refused
        elif kind == "function_call" or kind in CLIENT_TOOLS:
            made = _call_parts(item, cut=cut) if kind == "function_call" else call_parts(item, handled or {})
            parts += made
            calls = calls or bool(made)
        else:  # reasoning items, server tools' items: kept and sent back as they are
            block = {k: v for k, v in item.items() if v is not None and (k != "status" or kind in HOSTED)}
            parts.append(ProviderPart(provider=PROVIDER, kind=str(kind), block=block, text=_summary(item)))
    stop: StopReason = "max_tokens" if cut else "refusal" if refused else "tool_use" if calls else "end_turn"
    details: dict[str, Any] = {"id": reply.get("id")}
    if reason:
        details["incomplete"] = reason
    usage = reply.get("usage") or {}
    thinking = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    if thinking:
        details["reasoning_tokens"] = thinking
    return response_of(reply, parts, stop, details, tokens=("input", "output"))


def _call_parts(item: dict[str, Any], *, cut: bool) -> list[ToolCall | ProviderPart]:
    """A function call (with its ``namespace`` mark); none for a call cut mid-arguments."""
    call_id = item["call_id"]
    args = parse_args(item.get("arguments"), item.get("name", ""), cut=cut)
    if args is None:
        return []
    made: list[ToolCall | ProviderPart] = [from_wire.call(call_id, item["name"], args)]
    if item.get("namespace"):
        block = {"call_id": call_id, "namespace": item["namespace"]}
        made.append(ProviderPart(provider=PROVIDER, kind="namespace", block=block))
    return made


def _message(item: dict[str, Any], parts: list[Any]) -> bool:
    """A message item's text (after its ``phase``, kept to be sent back) added to ``parts``;
    whether it refused."""
    refused = False
    if item.get("phase"):
        parts.append(ProviderPart(provider=PROVIDER, kind="phase", block={"phase": item["phase"]}))
    for block in item.get("content") or ():
        if block.get("type") == "output_text":
            parts.append(from_wire.text(block.get("text") or ""))
        elif block.get("type") == "refusal":
            parts.append(from_wire.text(block.get("refusal") or ""))
            refused = True
    return refused


def responses_delta(event: Any) -> tuple[str, bool] | None:
    """The text a Responses stream event (JSON or the SDK's object) adds (and whether it is
    reasoning), if any."""
    kind = field_of(event, "type")
    if kind == "response.output_text.delta":
        return field_of(event, "delta") or "", False
    if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        return field_of(event, "delta") or "", True
    return None
