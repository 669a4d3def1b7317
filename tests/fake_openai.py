"""A local stand-in for the OpenAI API, for tests: a real HTTP server on 127.0.0.1 that answers
``POST /v1/responses`` (the Responses API) and ``POST /v1/chat/completions`` (Chat Completions,
the wire format OpenAI-compatible servers speak) as the API does — JSON replies, server-sent-event
streams in chunked transfer encoding (Responses: ``response.created``, ``output_item.added``,
``output_text.delta``, ``function_call_arguments.delta``, ``reasoning_summary_text.delta``,
``output_item.done``, ``response.completed``/``response.incomplete``; Chat: ``chat.completion.chunk``
deltas with tool-call argument pieces by index, a usage chunk when ``stream_options`` asks, then
``[DONE]``), and real error bodies, status codes and ``x-request-id`` / ``retry-after`` headers.
The SDK is real; only the server is ours.

Quirks (``FakeOpenAI(quirks={...})``, Chat Completions only) make the server send what other
OpenAI-compatible servers really send: ``"no_index"`` (streamed tool calls without ``index``, each
whole in one chunk: Gemini's OpenAI endpoint), ``"index_zero"`` (every streamed call at ``index``
0: Ollama, #15457), ``"one_delta"`` (several calls in one delta), ``"no_ids"`` (calls without an
``id``: vLLM #18412, LiteLLM #11407), ``"object_arguments"`` (``arguments`` as a JSON object, not
a string), ``"no_usage"`` (no usage at all, ``stream_options`` ignored), ``"reasoning_required"``
(DeepSeek's thinking mode: a request whose assistant turn with tool calls lacks its
``reasoning_content`` is refused with DeepSeek's 400), ``"name_every_chunk"`` (the function's
name repeated on every argument piece, as some proxies stream it).

Script items: a Responses reply (:func:`response`), a Chat reply (:func:`completion`), either of
them sent to the other route is converted (:func:`as_chat` / :func:`as_responses`), so one script
serves both APIs; :class:`Error` (an HTTP error with its ``Retry-After``), :class:`Cut` (a stream
that breaks off), :class:`Raw` (any status and body). Each test scripts the replies; the server
records every request body, its headers and its path.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.fake_http import FakeHandler, Raw, Served

# ---------------------------------------------------------------- reply bodies (the Responses shape)


def response(
    *output: dict[str, Any],
    status: str = "completed",
    reason: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "gpt-test",
) -> dict[str, Any]:
    """A Responses API reply body; ``status="incomplete"`` with ``reason`` ("max_output_tokens",
    "content_filter") is a cut reply. ``usage`` keys: input_tokens, output_tokens, cached_tokens."""
    numbers = {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0, **(usage or {})}
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": model,
        "status": status,
        "incomplete_details": {"reason": reason} if reason else None,
        "error": None,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": numbers["input_tokens"],
            "input_tokens_details": {"cached_tokens": numbers["cached_tokens"]},
            "output_tokens": numbers["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": numbers["input_tokens"] + numbers["output_tokens"],
        },
    }


_ids = itertools.count(1)


def text(value: str) -> dict[str, Any]:
    """An assistant message output item holding ``value``."""
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": value, "annotations": []}],
    }


def refusal(value: str) -> dict[str, Any]:
    """An assistant message output item that refuses."""
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": value}],
    }


def function_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    """A function call output item (``args`` as a dict, or raw argument text: a cut call)."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {
        "type": "function_call",
        "id": f"fc_{next(_ids)}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def reasoning(summary: str, encrypted: str = "enc==") -> dict[str, Any]:
    """A reasoning item (its summary, and the encrypted content a stateless client sends back)."""
    return {
        "type": "reasoning",
        "id": f"rs_{next(_ids)}",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        "encrypted_content": encrypted,
    }


def completion(
    content: str | None = None,
    *calls: dict[str, Any],
    finish_reason: str | None = None,
    refusal: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "gpt-test",
    reasoning: str | None = None,
) -> dict[str, Any]:
    """A Chat Completions reply body; ``calls`` from :func:`chat_call`; ``reasoning``: the
    server's ``reasoning_content`` (DeepSeek, vLLM)."""
    numbers = {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0, **(usage or {})}
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = list(calls)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": numbers["input_tokens"],
            "completion_tokens": numbers["output_tokens"],
            "total_tokens": numbers["input_tokens"] + numbers["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": numbers["cached_tokens"]},
        },
    }


def chat_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def as_chat(reply: dict[str, Any]) -> dict[str, Any]:
    """A Responses reply body as the Chat Completions body that says the same."""
    if reply.get("object") == "chat.completion":
        return reply
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    thoughts: list[str] = []
    for item in reply["output"]:
        if item["type"] == "message":
            for part in item["content"]:
                (texts if part["type"] == "output_text" else refusals).append(part.get("text") or part["refusal"])
        elif item["type"] == "function_call":
            calls.append(chat_call(item["call_id"], item["name"], item["arguments"]))
        elif item["type"] == "reasoning":
            thoughts.extend(s["text"] for s in item["summary"])
    reason = (reply.get("incomplete_details") or {}).get("reason")
    finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(reason or "")
    usage = reply["usage"]
    return completion(
        "".join(texts) or None,
        *calls,
        finish_reason=finish,
        refusal="".join(refusals) or None,
        usage={
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cached_tokens": usage["input_tokens_details"]["cached_tokens"],
        },
        model=reply["model"],
        reasoning="".join(thoughts) or None,
    )


def as_responses(reply: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions reply body as the Responses body that says the same."""
    if reply.get("object") == "response":
        return reply
    choice = reply["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append(text(message["content"]))
    if message.get("refusal"):
        output.append(refusal(message["refusal"]))
    for call in message.get("tool_calls") or ():
        output.append(function_call(call["id"], call["function"]["name"], call["function"]["arguments"]))
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(choice["finish_reason"])
    usage = reply["usage"]
    return response(
        *output,
        status="incomplete" if reason else "completed",
        reason=reason,
        usage={
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
        },
        model=reply["model"],
    )


# ---------------------------------------------------------------- script items


@dataclass
class Error:
    """A scripted HTTP error reply; ``retry_after`` is its ``Retry-After`` header (seconds)."""

    status: int
    message: str
    kind: str = "invalid_request_error"
    code: str | None = None
    retry_after: str | None = "0"


@dataclass
class Cut:
    """A streamed reply that stops after ``events`` SSE events: the connection drops mid-body."""

    reply: dict[str, Any]
    events: int


@dataclass
class StreamFail:
    """A streamed reply that sends ``events`` events, then an error inside the 200 stream: the
    Responses API's ``error`` event, or Chat's ``data: {"error": ...}`` chunk."""

    reply: dict[str, Any]
    events: int
    code: str = "server_error"
    message: str = "The server had an error while processing your request."


@dataclass
class FakeOpenAI(Served):
    """Scripted replies, recorded requests. Use as a context manager; ``base_url`` (ending in
    ``/v1``) for the SDK."""

    base_path = "/v1"
    quirks: set[str] = field(default_factory=set)


QUIRKS = frozenset({"no_index", "index_zero", "one_delta", "no_ids", "object_arguments", "no_usage",
                    "reasoning_required", "name_every_chunk"})  # fmt: skip
DEEPSEEK_400 = "The `reasoning_content` in the thinking mode must be passed back to the API."


class _Handler(FakeHandler):
    """Answers one request from the script of the server's :class:`FakeOpenAI`."""

    disable_nagle_algorithm = True  # headers and body go in separate writes: no 40 ms delayed-ACK stall
    id_header = "x-request-id"

    def do_POST(self) -> None:  # noqa: C901, PLR0912
        fake: FakeOpenAI = self.server.fake
        body = self.read_request()
        if self.path not in ("/v1/responses", "/v1/chat/completions"):
            return self._error(Error(404, f"Invalid URL (POST {self.path})"))
        if not self.headers.get("authorization", "").startswith("Bearer "):
            return self._error(Error(401, "You didn't provide an API key.", code="invalid_api_key"))
        if not fake.script:
            return self._error(Error(500, "the test's script has no reply left", kind="server_error"))
        chat = self.path.endswith("/chat/completions")
        if chat and "reasoning_required" in fake.quirks and _lacks_reasoning(body):
            return self._error(Error(400, DEEPSEEK_400))
        lost = None if chat else _unresolvable(body)
        if lost is not None:
            return self._error(Error(404, f"Item with id '{lost}' not found. Items are not persisted when `store` is "
                                     "set to false. Try again with `store` set to true, or remove this item from "
                                     "your input."))  # fmt: skip
        reply = fake.script.pop(0)
        if isinstance(reply, Error):
            return self._error(reply)
        if isinstance(reply, Raw):
            return self._raw(reply)
        cut = None
        fail = None
        if isinstance(reply, Cut):
            reply, cut = reply.reply, reply.events
        elif isinstance(reply, StreamFail):
            reply, fail = reply.reply, reply
        reply = as_chat(reply) if chat else _as_asked(as_responses(reply), body)
        quirks = fake.quirks if chat else set()
        unknown = quirks - QUIRKS
        assert not unknown, f"no such quirk(s) {unknown}; the fake knows {sorted(QUIRKS)}"
        if quirks:
            reply = _quirky(reply, quirks)
        if not body.get("stream"):
            return self._json(200, reply)
        if chat:
            usage = bool((body.get("stream_options") or {}).get("include_usage")) and "no_usage" not in quirks
            events = [(None, chunk) for chunk in chat_chunks(reply, usage, quirks)] + [(None, "[DONE]")]
        else:
            events = list(response_events(reply))
        if fail is not None:
            error = {"message": fail.message, "code": fail.code}
            tail = (
                (None, {"error": {**error, "type": fail.code}})
                if chat
                else ("error", {"type": "error", **error, "param": None})
            )
            events = [*events[: fail.events], tail]
        self._sse(events[:cut] if cut is not None else events, cut=cut is not None)

    def _error(self, error: Error) -> None:
        payload = {"error": {"message": error.message, "type": error.kind, "param": None, "code": error.code}}
        headers = {"retry-after": error.retry_after} if error.retry_after is not None else {}
        self._json(error.status, payload, headers)


FakeOpenAI.handler = _Handler


def _unresolvable(body: dict[str, Any]) -> str | None:
    """The id of a reasoning item sent back without its encrypted content to a stateless
    (``store=False``) Responses request: the API cannot find it."""
    if body.get("store") is not False:
        return None
    for item in body.get("input") or ():
        if isinstance(item, dict) and item.get("type") == "reasoning" and not item.get("encrypted_content"):
            return str(item.get("id"))
    return None


def _as_asked(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A Responses reply as the request asked: reasoning items carry their encrypted content
    only when ``include`` names ``reasoning.encrypted_content``."""
    if "reasoning.encrypted_content" in (body.get("include") or ()):
        return reply
    output = [{k: v for k, v in item.items() if k != "encrypted_content"} for item in reply["output"]]
    return {**reply, "output": output}


def _lacks_reasoning(body: dict[str, Any]) -> bool:
    """A Chat request with an assistant turn that asked for tools but carries no reasoning."""
    return any(
        m.get("role") == "assistant" and m.get("tool_calls") and not m.get("reasoning_content")
        for m in body.get("messages") or ()
    )


def _quirky(reply: dict[str, Any], quirks: set[str]) -> dict[str, Any]:
    """A whole Chat reply as a quirky server sends it (the streamed shapes: :func:`chat_chunks`)."""
    reply = json.loads(json.dumps(reply))
    if "no_usage" in quirks:
        reply.pop("usage", None)
    for call in reply["choices"][0]["message"].get("tool_calls") or ():
        if "no_ids" in quirks:
            del call["id"]
        if "object_arguments" in quirks:
            with contextlib.suppress(ValueError):  # (not JSON: sent as the text it is)
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return reply


# ---------------------------------------------------------------- streams


def _chunks(value: str, size: int = 7) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def response_events(reply: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:  # noqa: C901
    """The server-sent events the Responses API streams for ``reply``."""
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(numbers), **fields}

    start = {**reply, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    for index, item in enumerate(reply["output"]):
        kind = item["type"]
        if kind == "message":
            yield event(
                "response.output_item.added", output_index=index, item={**item, "content": [], "status": "in_progress"}
            )
            for c, part in enumerate(item["content"]):
                empty = {**part, "text": ""} if part["type"] == "output_text" else {**part, "refusal": ""}
                yield event(
                    "response.content_part.added", item_id=item["id"], output_index=index, content_index=c, part=empty
                )
                if part["type"] == "output_text":
                    for piece in _chunks(part["text"]):
                        yield event("response.output_text.delta", item_id=item["id"], output_index=index,
                                    content_index=c, delta=piece, logprobs=[])  # fmt: skip
                    yield event("response.output_text.done", item_id=item["id"], output_index=index,
                                content_index=c, text=part["text"], logprobs=[])  # fmt: skip
                else:
                    yield event("response.refusal.delta", item_id=item["id"], output_index=index, content_index=c,
                                delta=part["refusal"])  # fmt: skip
                    yield event("response.refusal.done", item_id=item["id"], output_index=index, content_index=c,
                                refusal=part["refusal"])  # fmt: skip
                yield event(
                    "response.content_part.done", item_id=item["id"], output_index=index, content_index=c, part=part
                )
        elif kind == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for piece in _chunks(item["arguments"]):
                yield event(
                    "response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece
                )
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                        arguments=item["arguments"], name=item["name"])  # fmt: skip
        elif kind == "reasoning":
            yield event("response.output_item.added", output_index=index, item={**item, "summary": []})
            for s, part in enumerate(item["summary"]):
                for piece in _chunks(part["text"]):
                    yield event("response.reasoning_summary_text.delta", item_id=item["id"], output_index=index,
                                summary_index=s, delta=piece)  # fmt: skip
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if reply["status"] == "incomplete" else "response.completed"
    yield event(final, response=reply)


def chat_chunks(  # noqa: C901, PLR0912
    reply: dict[str, Any], usage: bool, quirks: set[str] | frozenset[str] = frozenset()
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects Chat Completions streams for ``reply`` (as the
    ``quirks`` server streams them)."""
    choice = reply["choices"][0]
    message = choice["message"]
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"], "model": reply["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _chunks(message.get("reasoning_content") or "") if message.get("reasoning_content") else ():
        yield chunk({"reasoning_content": piece})
    for piece in _chunks(message.get("content") or "") if message.get("content") else ():
        yield chunk({"content": piece})
    if message.get("refusal"):
        yield chunk({"refusal": message["refusal"]})
    calls = message.get("tool_calls") or ()
    whole = quirks & {"no_index", "index_zero", "one_delta", "object_arguments"}
    if whole:  # each call whole in one piece (Ollama, Gemini's endpoint), or all of them in one delta
        pieces = []
        for index, call in enumerate(calls):
            piece = {"type": "function", "function": dict(call["function"])}
            if "id" in call:
                piece["id"] = call["id"]
            if "no_index" not in quirks:
                piece["index"] = 0 if "index_zero" in quirks else index
            pieces.append(piece)
        for group in [pieces] if "one_delta" in quirks else [[p] for p in pieces]:
            if group:
                yield chunk({"tool_calls": group})
    else:
        for index, call in enumerate(calls):
            head = {"index": index, "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
            if "id" in call:
                head["id"] = call["id"]
            yield chunk({"tool_calls": [head]})
            name = {"name": call["function"]["name"]} if "name_every_chunk" in quirks else {}
            for piece in _chunks(call["function"]["arguments"]):
                yield chunk({"tool_calls": [{"index": index, "function": {**name, "arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if usage and reply.get("usage"):
        yield {**base, "choices": [], "usage": reply["usage"]}
