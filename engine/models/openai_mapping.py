"""loopwright's messages as OpenAI request JSON (Responses ``input`` items, Chat Completions
``messages``), and OpenAI replies (as plain JSON: ``to_dict()`` of the SDK's objects, or a
streamed reply assembled) as loopwright's. No ``openai`` import.

History rules (both APIs):

- Tool calls and their results are matched by the call id the API gave (``call_id`` /
  ``tool_calls[].id``); results go first in their turn (Chat: as ``tool`` messages right after
  the assistant's tool calls).
- A reply cut by the output limit is never continued by prefill: a short user turn
  (:data:`CONTINUE`) asks the model to go on, after a cut turn and between a cut turn and its
  continuation. A tool call cut mid-arguments is dropped (never run with half its input).
- Responses: reasoning items (with their ``encrypted_content``) are kept as
  ``ProviderPart(provider="openai", kind="reasoning")`` and sent back in place, so a reasoning
  model keeps its chain of thought across tool calls without server-side storage. Other
  output items loopwright does not interpret are kept and sent back the same way.
- Chat: a server's ``reasoning_content`` / ``reasoning`` (vLLM, Ollama, DeepSeek) becomes a
  :class:`ThoughtPart` (shown, not sent back).
- Structured output: the instruction ``structured_output`` adds for an ``output_type`` is also
  sent as the API's native JSON schema (``text.format`` / ``response_format``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..data.errors import ModelError
from ..data.events import (
    DocumentPart,
    ImagePart,
    Instruction,
    Message,
    ModelResponse,
    ProviderPart,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
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
(tests/test_openai_model.py pins that the feature still says them)."""
_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


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


def _schema_name(schema: dict[str, Any]) -> str:
    name = "".join(c for c in str(schema.get("title") or "answer") if c.isalnum() or c in "_-")
    return name[:64] or "answer"


def _data_url(part: Any) -> str:
    if part.url:
        return str(part.url)
    return f"data:{part.media_type or 'application/octet-stream'};base64,{part.data or ''}"


def _result_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def _media_in(content: Any) -> list[dict[str, Any]]:
    """Images and documents in a tool's result (as data), in order."""
    items = content if isinstance(content, list) else [content]
    return [item for item in items if isinstance(item, dict) and item.get("type") in ("image", "document")]


def _turns(history: Sequence[Message]) -> list[tuple[str, list[Any]]]:
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


def _usage(input_tokens: int | None, output_tokens: int | None, cached: int | None) -> Usage:
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


# ------------------------------------------------------------------ Responses API


def responses_input(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for role, parts in _turns(history):
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
    media = _media_in(result.content)
    if not media:
        return {"type": "function_call_output", "call_id": result.call_id, "output": _result_text(result.content)}
    items = result.content if isinstance(result.content, list) else [result.content]
    output = [
        _input_block(ImagePart.model_validate(i) if i.get("type") == "image" else DocumentPart.model_validate(i))
        if isinstance(i, dict) and i in media
        else {"type": "input_text", "text": _result_text(i)}
        for i in items
    ]
    return {"type": "function_call_output", "call_id": result.call_id, "output": output}


def _input_block(part: Any) -> dict[str, Any] | None:
    kind = type(part)
    if kind is TextPart:
        return {"type": "input_text", "text": part.text} if part.text.strip() else None
    if kind is ImagePart:
        return {"type": "input_image", "image_url": _data_url(part), "detail": "auto"}
    if kind is DocumentPart:
        if part.data or part.url:
            block: dict[str, Any] = {"type": "input_file", "filename": part.title or "document.pdf"}
            if part.url:
                block["file_url"] = part.url
            else:
                block["file_data"] = _data_url(part)
            return block
        return {"type": "input_text", "text": part.text or ""}
    return None


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": False,
        }
        for t in tools
    ]


def responses_params(request: Any) -> dict[str, Any]:
    """The request-dependent ``responses.create`` arguments (instructions, input, tools, format)."""
    params: dict[str, Any] = {"input": responses_input(request.messages)}
    instructions = "\n\n".join(i.text for i in request.instructions if i.text)
    if instructions:
        params["instructions"] = instructions
    if request.tools:
        params["tools"] = responses_tools(request.tools)
        if request.tool_choice is not None:
            params["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
    schema = output_schema(request.instructions)
    if schema is not None:
        params["text"] = {
            "format": {"type": "json_schema", "name": _schema_name(schema), "schema": schema, "strict": False}
        }
    return params


def _summary(item: dict[str, Any]) -> str:
    return "\n\n".join(s.get("text", "") for s in item.get("summary") or () if isinstance(s, dict))


def from_responses(reply: dict[str, Any]) -> ModelResponse:
    """A Responses API reply (as JSON) as a ModelResponse."""
    if not isinstance(reply, dict) or "output" not in reply:
        raise ModelError(
            f"the server answered with something that is not a Responses API reply ({str(reply)[:200]!r}); "
            "a proxy or gateway in between may have answered instead",
            retryable=True,
        )
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
    usage = reply.get("usage") or {}
    details: dict[str, Any] = {"id": reply.get("id")}
    if reason:
        details["incomplete"] = reason
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        model=reply.get("model"),
        usage=_usage(
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            (usage.get("input_tokens_details") or {}).get("cached_tokens"),
        ),
        details=details,
    )


# ------------------------------------------------------------------ Chat Completions


def chat_messages(instructions: Sequence[Instruction], history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Chat Completions ``messages``."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(i.text for i in instructions if i.text)
    if system:
        messages.append({"role": "system", "content": system})
    for role, parts in _turns(history):
        if role == "user":
            for result in (p for p in parts if type(p) is ToolResult):
                messages.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": _result_text(result.content)}
                )
                for media in _media_in(result.content):  # Chat's tool messages hold text only
                    block = _chat_block(
                        ImagePart.model_validate(media)
                        if media["type"] == "image"
                        else DocumentPart.model_validate(media)
                    )
                    if block is not None:
                        messages.append({"role": "user", "content": [block]})
            content = [block for p in parts if type(p) is not ToolResult and (block := _chat_block(p)) is not None]
            if content:
                plain = all(block["type"] == "text" for block in content)
                messages.append({"role": "user", "content": "".join(b["text"] for b in content) if plain else content})
            continue
        text = "".join(p.text for p in parts if type(p) is TextPart and p.text.strip())
        calls = [
            {"id": p.id, "type": "function", "function": {"name": p.name, "arguments": json.dumps(p.args)}}
            for p in parts
            if type(p) is ToolCall
        ]
        if not text and not calls:
            continue
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
    return messages


def _chat_block(part: Any) -> dict[str, Any] | None:
    kind = type(part)
    if kind is TextPart:
        return {"type": "text", "text": part.text} if part.text.strip() else None
    if kind is ImagePart:
        return {"type": "image_url", "image_url": {"url": _data_url(part)}}
    if kind is DocumentPart:
        if part.data:
            return {"type": "file", "file": {"filename": part.title or "document.pdf", "file_data": _data_url(part)}}
        return {"type": "text", "text": part.text or part.url or ""}
    return None


def chat_params(request: Any) -> dict[str, Any]:
    """The request-dependent ``chat.completions.create`` arguments."""
    params: dict[str, Any] = {"messages": chat_messages(request.instructions, request.messages)}
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
        if request.tool_choice is not None:
            params["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
    schema = output_schema(request.instructions)
    if schema is not None:
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": False},
        }
    return params


_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def from_chat(reply: dict[str, Any]) -> ModelResponse:
    """A Chat Completions reply (as JSON) as a ModelResponse."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise ModelError(
            f"the server answered with something that is not a Chat Completions reply ({str(reply)[:200]!r}); "
            "a proxy or gateway in between may have answered instead",
            retryable=True,
        )
    choice = choices[0]
    message = choice["message"]
    finish = choice.get("finish_reason") or "stop"
    cut = finish == "length"
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart] = []
    thought = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thought, str) and thought:
        parts.append(ThoughtPart(text=thought))
    if message.get("content"):
        parts.append(TextPart(text=message["content"]))
    refused = finish == "content_filter"
    if message.get("refusal"):
        parts.append(TextPart(text=message["refusal"]))
        refused = True
    calls = False
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        args = parse_args(function.get("arguments"), function.get("name", ""), cut=cut)
        if args is not None:
            parts.append(ToolCall(id=call["id"], name=function["name"], args=args))
            calls = True
    stop: StopReason = "refusal" if refused and not cut else _FINISH.get(finish, "end_turn")
    if stop == "end_turn" and calls:
        stop = "tool_use"  # some servers say "stop" for a reply with tool calls
    usage = reply.get("usage") or {}
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        model=reply.get("model"),
        usage=_usage(
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        ),
        details={"id": reply.get("id"), "finish_reason": finish},
    )


class ChatAssembler:
    """Streamed ``chat.completion.chunk`` objects (as JSON) assembled into the reply
    :func:`from_chat` reads: content, refusal and reasoning concatenated, tool calls joined by
    index (their argument pieces in order), the finish reason, the usage chunk."""

    __slots__ = ("calls", "content", "finish", "id", "model", "reasoning", "refusal", "usage")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.id: str | None = None
        self.model: str | None = None

    def add(self, chunk: Any) -> tuple[str, bool] | None:
        """Take one chunk (JSON or the SDK's object); the text it adds (and whether it is
        reasoning), if any."""
        self.id = _get(chunk, "id") or self.id
        self.model = _get(chunk, "model") or self.model
        usage = _get(chunk, "usage")
        if usage:
            self.usage = usage if isinstance(usage, dict) else usage.to_dict()
        shown: tuple[str, bool] | None = None
        for choice in _get(chunk, "choices") or ():
            if (_get(choice, "index") or 0) != 0:
                continue
            delta = _get(choice, "delta")
            if delta is not None:
                shown = self._delta(delta) or shown
            finish = _get(choice, "finish_reason")
            if finish:
                self.finish = finish
        return shown

    def _delta(self, delta: Any) -> tuple[str, bool] | None:
        shown: tuple[str, bool] | None = None
        content = _get(delta, "content")
        if content:
            self.content.append(content)
            shown = (content, False)
        thought = _get(delta, "reasoning_content") or _get(delta, "reasoning")
        if isinstance(thought, str) and thought:
            self.reasoning.append(thought)
            shown = (thought, True)
        refusal = _get(delta, "refusal")
        if refusal:
            self.refusal.append(refusal)
        for piece in _get(delta, "tool_calls") or ():
            call = self.calls.setdefault(_get(piece, "index") or 0, {"id": None, "name": "", "arguments": []})
            call["id"] = _get(piece, "id") or call["id"]
            function = _get(piece, "function")
            if function is not None:
                call["name"] += _get(function, "name") or ""
                call["arguments"].append(_get(function, "arguments") or "")
        return shown

    def reply(self) -> dict[str, Any]:
        if self.finish is None:
            raise ModelError(
                "the reply stream ended before the reply was complete (no finish_reason); the partial reply was "
                "discarded",
                retryable=True,
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) or None,
            "refusal": "".join(self.refusal) or None,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": "".join(c["arguments"])},
                }
                for _, c in sorted(self.calls.items())
            ]
        return {
            "id": self.id,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": self.usage,
        }


def responses_delta(event: Any) -> tuple[str, bool] | None:
    """The text a Responses stream event (JSON or the SDK's object) adds (and whether it is
    reasoning), if any."""
    kind = _get(event, "type")
    if kind == "response.output_text.delta":
        return _get(event, "delta") or "", False
    if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        return _get(event, "delta") or "", True
    return None


def _get(value: Any, name: str) -> Any:
    """A field of a reply piece given as JSON or as the SDK's object."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)
