"""AnthropicModel: Claude through the official ``anthropic`` SDK. The only module that imports
``anthropic``; the SDK's types never leave it.

Request: static instructions become ``system`` text blocks, the last of them carrying
``cache_control`` (prompt caching); dynamic instructions follow, uncached. History becomes
``messages`` (text, ``tool_use``, ``tool_result`` with ``is_error``, ``thinking`` and
``redacted_thinking`` sent back unchanged with their signatures); consecutive same-role turns
are merged, so all results of one assistant turn travel in one user turn, in call order.

Response: every block and every ``stop_reason`` is mapped on purpose; ``max_tokens`` and
``pause_turn`` reach the loop, which continues the reply (a ``tool_use`` block cut off by
``max_tokens`` is dropped, never run with half its arguments).

Errors: the SDK retries 429, 5xx and connection errors itself (``max_retries``); what is left
becomes a :class:`ModelError` with the status, the API's own message and the request id —
retryable for 429/5xx/529/connection (the reason stage's bounded retry edge), not for
400/401/403/404. An ``error`` event inside a streamed reply (the API says ``overloaded_error``
mid-stream with HTTP 200) gets the status its error type stands for; a stream that breaks off
is a retryable error, and the text already streamed stays with the events.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from ..errors import ModelError
from ..events import (
    Message,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    Usage,
)
from .base import StreamDelta

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    "model_context_window_exceeded": "max_tokens",  # cut short all the same: the loop decides
}
_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each API error type stands for (an error event in a stream comes with 200)."""
_MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set (and no other Anthropic credentials were found): export "
    "ANTHROPIC_API_KEY=<your key> (and ANTHROPIC_BASE_URL for a proxy) and run again, or pass "
    "AnthropicModel(client=anthropic.AsyncAnthropic(api_key=...))"
)
_SDK_PARAMS = frozenset(inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters) - {"self"}
"""The arguments this SDK release's ``messages.create`` names."""
_CACHE = {"type": "ephemeral"}


class AnthropicModel:
    """A loopwright model backed by Claude.

    ``AnthropicModel(model="claude-...", max_tokens=4096, client=None, max_retries=2,
    **request_options)``: ``request_options`` (``temperature``, ``thinking``, ``top_p``,
    ``stop_sequences``, ``metadata``...) go to every ``messages.create`` call; an agent's
    ``model_settings`` are merged over them. Without ``client``, an ``AsyncAnthropic`` is made
    per event loop on first use (it reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, or the SDK's
    other credential sources); missing credentials are reported by ``complete``/``stream``
    before any request is sent, never at construction (agents are often built at import time).
    ``max_retries`` is the SDK's own retry count for those clients. A ``client`` you pass keeps
    its own settings and must be used from one event loop (the SDK's rule).
    """

    def __init__(
        self,
        model: str,
        max_tokens: int = 4096,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        max_retries: int = 2,
        **request_options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("AnthropicModel needs a model id, e.g. AnthropicModel(model='claude-sonnet-4-5')")
        self.model = model
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.request_options = request_options
        self._client = client
        self._own: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The client given, or one made for the running event loop (an SDK client's
        connections belong to one loop, and every ``run_sync`` runs a new one)."""
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        client = self._own.get(loop)
        if client is None:
            try:
                client = anthropic.AsyncAnthropic(max_retries=self.max_retries)
            except anthropic.AnthropicError as exc:  # a profile named or configured but unusable
                raise _model_error(exc) from exc
            if client.api_key is None and client.auth_token is None and client.credentials is None:
                raise ModelError(_MISSING_KEY, retryable=False)
            self._own[loop] = client
        return client

    # ------------------------------------------------------------------ the Model protocol

    async def complete(self, request: ModelRequest) -> ModelResponse:
        params = self.params(request)
        client = self.client
        try:
            message = await client.messages.create(**params)
        except anthropic.AnthropicError as exc:
            raise _model_error(exc) from exc
        return to_response(message)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        params = self.params(request)
        client = self.client
        try:
            async with client.messages.stream(**params) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield StreamDelta(event.text)
                    elif event.type == "thinking" and event.thinking:
                        yield StreamDelta(event.thinking, thought=True)
                message = await stream.get_final_message()
        except anthropic.AnthropicError as exc:
            raise _model_error(exc) from exc
        except (ModelError, GeneratorExit):
            raise
        except Exception as exc:  # the transport broke mid-stream (the SDK does not wrap these)
            raise ModelError(f"the reply stream broke off: {type(exc).__name__}: {exc}", retryable=True) from exc
        if message.stop_reason is None:
            raise ModelError(
                "the reply stream ended before the message was complete (no message_stop); the partial "
                "reply was discarded",
                retryable=True,
            )
        yield to_response(message)

    # ------------------------------------------------------------------ request mapping

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``messages.create`` arguments for ``request``."""
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        extra: dict[str, Any] = {}
        for key, value in {**self.request_options, **request.settings}.items():
            # options this SDK release does not name (temperature in some) still reach the API
            (params if key in _SDK_PARAMS else extra)[key] = value
        if extra:
            params["extra_body"] = {**params.get("extra_body", {}), **extra}
        params["messages"] = to_messages(request.messages)
        system = to_system(request)
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
            ]
            if request.tool_choice is not None:
                params["tool_choice"] = {"type": request.tool_choice}
        return params

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"


def to_system(request: ModelRequest) -> list[dict[str, Any]]:
    """System blocks: instructions in order; the last cacheable one marks the cached prefix."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": i.text} for i in request.instructions if i.text]
    cached = [n for n, i in enumerate(i for i in request.instructions if i.text) if i.cache]
    if cached:
        blocks[cached[-1]]["cache_control"] = dict(_CACHE)
    return blocks


def to_messages(history: list[Message]) -> list[dict[str, Any]]:
    """The conversation as the Messages API wants it: same-role turns merged, tool results
    first in their user turn, a final assistant turn (a continuation) without trailing spaces."""
    merged: list[dict[str, Any]] = []
    for message in history:
        content = [block for part in message.parts if (block := _block(part)) is not None]
        if not content:
            continue
        if merged and merged[-1]["role"] == message.role:
            merged[-1]["content"].extend(content)
        else:
            merged.append({"role": message.role, "content": content})
    for turn in merged:  # the API wants tool_result blocks before any text in a user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    if merged and merged[-1]["role"] == "assistant":
        last = merged[-1]["content"][-1]
        if last["type"] == "text":  # never blank (see _block), so never empty once stripped
            last["text"] = last["text"].rstrip()
    return merged


def _block(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text.strip() else None  # the API refuses blank text
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.args}
    if isinstance(part, ToolResult):
        content = part.content if isinstance(part.content, str) else json.dumps(part.content)
        return {"type": "tool_result", "tool_use_id": part.call_id, "content": content, "is_error": part.is_error}
    if isinstance(part, ThoughtPart):
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.data or ""}
        if not part.signature:  # not Claude's own (or cut off before it was signed): the API would refuse it
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


# ------------------------------------------------------------------ response mapping


def to_response(message: Any) -> ModelResponse:
    """A Messages API reply (streamed or not: the same type) as a ModelResponse."""
    stop = _STOP_REASONS.get(message.stop_reason or "")
    blocks = list(message.content)
    if stop == "max_tokens" and blocks and blocks[-1].type == "tool_use":
        blocks.pop()  # cut off mid-arguments: never run a call with half its input
    parts: list[TextPart | ThoughtPart | ToolCall] = []
    for block in blocks:
        if block.type == "text":
            parts.append(TextPart(text=block.text))
        elif block.type == "tool_use":
            parts.append(ToolCall(id=block.id, name=block.name, args=dict(block.input or {})))
        elif block.type == "thinking":
            parts.append(ThoughtPart(text=block.thinking, signature=block.signature))
        elif block.type == "redacted_thinking":
            parts.append(ThoughtPart(redacted=True, data=block.data))
    usage = message.usage
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        model=message.model,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_creation_tokens=usage.cache_creation_input_tokens or 0,
            requests=1,
        ),
    )


def _api_error(exc: anthropic.APIStatusError) -> tuple[str | None, str]:
    """The API's error type and message from the error body, else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            kind = error.get("type")
            return (kind if isinstance(kind, str) else None), str(error["message"])
    return None, str(getattr(exc, "message", None) or exc)


def _model_error(exc: anthropic.AnthropicError) -> ModelError:
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = _api_error(exc)
        detail = f"{kind}: {message}" if kind else message
        request_id = f" [request-id {exc.request_id}]" if exc.request_id else ""
        status = exc.status_code
        where = ""
        if status < 400:  # an error event inside a streamed reply: the status line said 200
            status = _ERROR_TYPE_STATUS.get(kind or "", 500)
            where = " in the reply stream"
        if status == 401:
            return ModelError(
                f"the Anthropic API refused the credentials (401 {detail}); set ANTHROPIC_API_KEY to a valid key"
                f"{request_id}",
                status=401,
                retryable=False,
            )
        return ModelError(
            f"Anthropic API error {status}{where}: {detail}{request_id}",
            status=status,
            retryable=status in _RETRYABLE_STATUS,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelError(f"could not reach the Anthropic API: {exc}", retryable=True)
    if isinstance(exc, anthropic.CredentialsError):
        return ModelError(f"the Anthropic credentials could not be loaded: {exc}", retryable=False)
    return ModelError(f"Anthropic client error: {type(exc).__name__}: {exc}", retryable=False)
