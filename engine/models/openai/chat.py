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
    new_call_id,
)
from .. import from_wire
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
    strict_function,
    tool_params,
)

REASONING = "openai_chat"
"""The ``ProviderPart.provider`` of a Chat server's reasoning kept to be sent back
(``OpenAIModel(..., send_reasoning=True)``): its own provider name, so neither the Responses API
nor another provider's adapter ever replays it (they skip other providers' parts)."""


def chat_messages(
    instructions: Sequence[Instruction], history: Sequence[Message], *, send_reasoning: bool = False
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions ``messages``; with ``send_reasoning``, an assistant
    turn that asked for tools carries back the reasoning its server sent with it, under the field
    the server used (``reasoning_content`` or ``reasoning``): DeepSeek's and Kimi's thinking modes
    refuse a tool loop without it. Thoughts of other providers (Claude's thinking, Gemini's
    thoughts: :class:`ThoughtPart`) are never sent."""
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
        message = _assistant_message(parts, send_reasoning)
        if message is not None:
            messages.append(message)
    return messages


def _assistant_message(parts: list[Any], send_reasoning: bool) -> dict[str, Any] | None:
    text = "".join(p.text for p in parts if type(p) is TextPart and p.text.strip())
    calls = [
        {"id": p.id, "type": "function", "function": {"name": p.name, "arguments": json.dumps(p.args)}}
        for p in parts
        if type(p) is ToolCall
    ]
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
        if send_reasoning:
            for part in parts:
                if type(part) is ProviderPart and part.provider == REASONING:
                    message.update(part.block)
    return message


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


def chat_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The tools as Chat functions; a strict tool's with ``strict: true`` and its schema closed."""
    return [{"type": "function", "function": strict_function(t) if t.strict else function(t)} for t in tools]


def chat_params(request: Any, *, send_reasoning: bool = False) -> dict[str, Any]:
    """The request-dependent ``chat.completions.create`` arguments."""
    messages = chat_messages(request.instructions, request.messages, send_reasoning=send_reasoning)
    params: dict[str, Any] = {"messages": messages}
    params.update(tool_params(request, chat_tools))
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


def from_chat(reply: dict[str, Any], *, keep_reasoning: bool = False) -> ModelResponse:
    """A Chat Completions reply (as JSON) as a ModelResponse. What OpenAI-compatible servers
    send is taken as well: a call without an ``id`` gets a local one, ``arguments`` given as an
    object are the arguments, arguments that are not JSON become a call the tool's validation
    answers with an error the model reads (:func:`.shared.parse_args`). ``keep_reasoning``: the
    server's reasoning is also kept as a :data:`REASONING` part, to be sent back."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise not_a_reply("Chat Completions", reply)
    choice = choices[0]
    message = choice["message"]
    finish = choice.get("finish_reason") or "stop"
    cut = finish == "length"
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart] = []
    field = "reasoning_content" if message.get("reasoning_content") else "reasoning"
    thought = message.get(field)
    if isinstance(thought, str) and thought:
        parts.append(from_wire.thought(text=thought))
        if keep_reasoning:
            parts.append(ProviderPart(provider=REASONING, kind="reasoning", block={field: thought}))
    if message.get("content"):
        parts.append(from_wire.text(message["content"]))
    refused = finish == "content_filter"
    if message.get("refusal"):
        parts.append(from_wire.text(message["refusal"]))
        refused = True
    calls = False
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        args = parse_args(function.get("arguments"), function.get("name") or "", cut=cut)
        if args is not None:
            parts.append(from_wire.call(call.get("id") or new_call_id(), function.get("name") or "", args))
            calls = True
    stop: StopReason = "refusal" if refused and not cut else _FINISH.get(finish, "end_turn")
    if stop == "end_turn" and calls:
        stop = "tool_use"  # some servers say "stop" for a reply with tool calls
    details: dict[str, Any] = {"id": reply.get("id"), "finish_reason": finish}
    thinking = ((reply.get("usage") or {}).get("completion_tokens_details") or {}).get("reasoning_tokens")
    if thinking:
        details["reasoning_tokens"] = thinking
    return response_of(reply, parts, stop, details, tokens=("prompt", "completion"))


class ChatAssembler:
    """Streamed ``chat.completion.chunk`` objects (as JSON) assembled into the reply
    :func:`from_chat` reads: content, refusal and reasoning concatenated, tool calls joined
    (their argument pieces in order), the finish reason, the usage chunk.

    Tool-call pieces are joined by ``index`` as OpenAI sends them, and as other servers do too: a
    piece without an ``index`` (Gemini's OpenAI endpoint) continues the last call; a piece with a
    new ``id``, or a name after the call has arguments (Ollama sends each call whole, every one at
    ``index`` 0), starts a new call; a name repeated on every piece of one call (with its id, or
    before its arguments are whole) does not; several calls may come in one delta; ``arguments``
    may be an object (taken whole)."""

    __slots__ = ("by_index", "calls", "content", "finish", "id", "model", "reasoning", "reasoning_field", "refusal",
                 "usage")  # fmt: skip

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = "reasoning_content"
        self.calls: list[dict[str, Any]] = []
        self.by_index: dict[int, int] = {}
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
        for name in ("reasoning_content", "reasoning"):
            thought = field_of(delta, name)
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                self.reasoning_field = name
                shown = (thought, True)
                break
        refusal = field_of(delta, "refusal")
        if refusal:
            self.refusal.append(refusal)
        for piece in field_of(delta, "tool_calls") or ():
            self._piece(piece)
        return shown

    def _piece(self, piece: Any) -> None:
        """One tool-call piece: the call it continues, or a new one (see the class docstring)."""
        index = field_of(piece, "index")
        call_id = field_of(piece, "id")
        function = field_of(piece, "function")
        name = (field_of(function, "name") or "") if function is not None else ""
        arguments = field_of(function, "arguments") if function is not None else None
        if isinstance(index, int) and index in self.by_index:
            call: dict[str, Any] | None = self.calls[self.by_index[index]]
        else:
            call = self.calls[-1] if self.calls and not isinstance(index, int) else None
        if call is not None and (
            (call_id and call["id"] and call_id != call["id"])
            or (name and call["name"] and not (call_id and call_id == call["id"]) and _whole(call["arguments"]))
        ):
            call = None  # a new call at a known index (or without one)
        if call is None:
            call = {"id": None, "name": "", "arguments": []}
            self.calls.append(call)
            if isinstance(index, int):
                self.by_index[index] = len(self.calls) - 1
        call["id"] = call_id or call["id"]
        if name != call["name"]:  # (a name repeated on every piece is said once)
            call["name"] += name
        if isinstance(arguments, dict):  # an object, not a string: taken whole
            arguments = json.dumps(arguments)
        if arguments:
            call["arguments"].append(arguments)

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
            message[self.reasoning_field] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": "".join(c["arguments"])},
                }
                for c in self.calls
            ]
        return {
            "id": self.id,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": self.usage,
        }


def _whole(pieces: list[str]) -> bool:
    """The argument pieces so far make a whole JSON value (a call that is complete)."""
    if not pieces:
        return False
    try:
        json.loads("".join(pieces))
    except ValueError:
        return False
    return True
