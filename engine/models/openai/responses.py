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
    tool_params,
)


def responses_input(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for role, parts in history_turns(history):
        if role == "user":
            results = [p for p in parts if type(p) is ToolResult]
            for result in results:
                items.append(_function_output(result))
            content = [block for p in parts if type(p) is not ToolResult and (block := _input_block(p)) is not None]
            if content:
                items.append({"role": "user", "content": content})
            continue
        items += _assistant_items(parts)
    return items


def _assistant_items(parts: list[Any]) -> list[dict[str, Any]]:
    """An assistant turn as items: its text runs as messages, its calls and its own items in order."""
    items: list[dict[str, Any]] = []
    text: list[str] = []
    for part in parts:
        kind = type(part)
        if kind is TextPart:
            if part.text.strip():
                text.append(part.text)
            continue
        if text:
            items.append({"role": "assistant", "content": "".join(text)})
            text = []
        if kind is ToolCall:
            items.append(
                {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": json.dumps(part.args)}
            )
        elif kind is ProviderPart and part.provider == PROVIDER and part.kind != "reply":
            items.append(dict(part.block))
    if text:
        items.append({"role": "assistant", "content": "".join(text)})
    return items


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
    return [{"type": "function", **function(t), "strict": False} for t in tools]


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


def from_responses(reply: dict[str, Any]) -> ModelResponse:
    """A Responses API reply (as JSON) as a ModelResponse."""
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
            for block in item.get("content") or ():
                if block.get("type") == "output_text":
                    parts.append(TextPart(text=block.get("text") or ""))
                elif block.get("type") == "refusal":
                    parts.append(TextPart(text=block.get("refusal") or ""))
                    refused = True
        elif kind == "function_call":
            args = parse_args(item.get("arguments"), item.get("name", ""), cut=cut)
            if args is not None:
                parts.append(ToolCall(id=item["call_id"], name=item["name"], args=args))
                calls = True
        else:  # reasoning items, server tools' items: kept and sent back as they are
            block = {k: v for k, v in item.items() if v is not None and k != "status"}
            parts.append(ProviderPart(provider=PROVIDER, kind=str(kind), block=block, text=_summary(item)))
    stop: StopReason = "max_tokens" if cut else "refusal" if refused else "tool_use" if calls else "end_turn"
    details: dict[str, Any] = {"id": reply.get("id")}
    if reason:
        details["incomplete"] = reason
    return response_of(reply, parts, stop, details, tokens=("input", "output"))


def responses_delta(event: Any) -> tuple[str, bool] | None:
    """The text a Responses stream event (JSON or the SDK's object) adds (and whether it is
    reasoning), if any."""
    kind = field_of(event, "type")
    if kind == "response.output_text.delta":
        return field_of(event, "delta") or "", False
    if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        return field_of(event, "delta") or "", True
    return None
