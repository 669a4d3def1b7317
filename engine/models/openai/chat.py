"""loopwright's requests as Chat Completions arguments (``messages``, tools, response format),
and its replies, whole or streamed chunk by chunk (:class:`ChatAssembler`), as loopwright's
(rules: :mod:`.openai_mapping`). No ``openai`` import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...data.errors import ModelError
from ...data.events import (
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
)
from .shared import (
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


def chat_messages(instructions: Sequence[Instruction], history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Chat Completions ``messages``."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(i.text for i in instructions if i.text)
    if system:
        messages.append({"role": "system", "content": system})
    for role, parts in history_turns(history):
        if role == "user":
            for result in (p for p in parts if type(p) is ToolResult):
                messages.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result.content)}
                )
                for media in media_in(result.content):  # Chat's tool messages hold text only
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
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if kind is DocumentPart:
        if part.data:
            return {"type": "file", "file": {"filename": part.title or "document.pdf", "file_data": data_url(part)}}
        return {"type": "text", "text": part.text or part.url or ""}
    return None


def chat_params(request: Any) -> dict[str, Any]:
    """The request-dependent ``chat.completions.create`` arguments."""
    params: dict[str, Any] = {"messages": chat_messages(request.instructions, request.messages)}
    params.update(tool_params(request, lambda tools: [{"type": "function", "function": function(t)} for t in tools]))
    schema = schema_format(request.instructions)
    if schema is not None:
        params["response_format"] = {"type": "json_schema", "json_schema": schema}
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
        raise not_a_reply("Chat Completions", reply)
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
    details = {"id": reply.get("id"), "finish_reason": finish}
    return response_of(reply, parts, stop, details, tokens=("prompt", "completion"))


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
        self.id = field_of(chunk, "id") or self.id
        self.model = field_of(chunk, "model") or self.model
        usage = field_of(chunk, "usage")
        if usage:
            self.usage = usage if isinstance(usage, dict) else usage.to_dict()
        shown: tuple[str, bool] | None = None
        for choice in field_of(chunk, "choices") or ():
            if (field_of(choice, "index") or 0) != 0:
                continue
            delta = field_of(choice, "delta")
            if delta is not None:
                shown = self._delta(delta) or shown
            finish = field_of(choice, "finish_reason")
            if finish:
                self.finish = finish
        return shown

    def _delta(self, delta: Any) -> tuple[str, bool] | None:
        shown: tuple[str, bool] | None = None
        content = field_of(delta, "content")
        if content:
            self.content.append(content)
            shown = (content, False)
        thought = field_of(delta, "reasoning_content") or field_of(delta, "reasoning")
        if isinstance(thought, str) and thought:
            self.reasoning.append(thought)
            shown = (thought, True)
        refusal = field_of(delta, "refusal")
        if refusal:
            self.refusal.append(refusal)
        for piece in field_of(delta, "tool_calls") or ():
            call = self.calls.setdefault(field_of(piece, "index") or 0, {"id": None, "name": "", "arguments": []})
            call["id"] = field_of(piece, "id") or call["id"]
            function = field_of(piece, "function")
            if function is not None:
                call["name"] += field_of(function, "name") or ""
                call["arguments"].append(field_of(function, "arguments") or "")
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
