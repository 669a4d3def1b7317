"""A local stand-in for the Anthropic Messages API, for tests: a real HTTP server on 127.0.0.1
that answers ``POST /v1/messages`` as the API does — JSON replies, server-sent-event streams in
chunked transfer encoding (message_start, content_block_start/delta/stop with text,
input_json, thinking and signature deltas, message_delta, message_stop), error events inside a
stream, and real error bodies, status codes and ``request-id`` headers. Each test scripts the
replies; the server records every request body (and its headers) it received.

Script items: a reply body (:func:`message`), :class:`Error` (an HTTP error, with the
``Retry-After`` it says), :class:`Cut` (a stream that breaks off), :class:`StreamError` (an
``error`` event inside a 200 stream), :class:`Raw` (any status and body: an HTML page, broken
JSON, a torn body).

It also holds the API's rules that matter to a client:

- prefill: a request whose last turn is the assistant's is refused with 400 on models that do
  not take prefill (every model but the 4.5 line, and every model with thinking on), unless the
  reply before was ``pause_turn``, which the API asks to be sent back last;
- beta fields (``context_management``, ``compaction``, ``mcp_servers``) need the
  ``anthropic-beta`` header (400 without); the beta route (``/v1/messages?beta=true``) streams
  compaction blocks as ``compaction_delta`` events and ends with ``context_management``;
- thinking per model: ``budget_tokens`` on a 5.x model, and thinking ``disabled`` on
  claude-sonnet-5-5, are refused with 400;
- a non-streamed request with ``max_tokens`` over 21,333 is refused (the API asks to stream);
- tools: a ``strict`` tool's schema must close every object (``additionalProperties: false``);
  an Anthropic-defined tool (``type``) must carry the name its type has; ``defer_loading`` needs
  a tool search tool and at least one tool not deferred; a ``file`` source needs the Files API
  beta;
- ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": n}`` (about four characters a
  token, as ``account`` counts), recorded in ``counted``;
- :class:`Error` may carry more headers (``anthropic-ratelimit-*``);
- usage accounting (``account=True``): input tokens are counted from the request (about four
  characters a token) and prompt caching is played out: each ``cache_control`` breakpoint writes
  its prefix, a later request reads the longest cached prefix found at a breakpoint or up to 20
  blocks before it; ``usage`` replaces the scripted numbers and ``ledger`` keeps them all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.fake_http import FakeHandler, Raw, Served

_PARTIAL = "_partial_json"
"""A tool_use block's key holding raw input JSON cut off mid-value (see :func:`cut_tool_use`)."""


def message(
    *content: dict[str, Any], stop_reason: str = "end_turn", usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """A Messages API reply body."""
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, **(usage or {})},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def cut_tool_use(id_: str, name: str, partial_json: str) -> dict[str, Any]:
    """A tool_use block whose input JSON was cut off by ``max_tokens``: streamed as exactly
    ``partial_json``; a JSON reply carries the input the API could parse (here: none)."""
    return {"type": "tool_use", "id": id_, "name": name, "input": {}, _PARTIAL: partial_json}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def server_tool_use(id_: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "server_tool_use", "id": id_, "name": name, "input": args}


def web_search_result(tool_use_id: str, url: str, title: str) -> dict[str, Any]:
    result = {"type": "web_search_result", "url": url, "title": title, "encrypted_content": "enc==", "page_age": None}
    return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": [result]}


def cited_text(value: str, url: str, quote: str) -> dict[str, Any]:
    citation = {
        "type": "web_search_result_location",
        "url": url,
        "title": "Source",
        "encrypted_index": "idx==",
        "cited_text": quote,
    }
    return {"type": "text", "text": value, "citations": [citation]}


@dataclass
class Error:
    """A scripted HTTP error reply; ``retry_after`` is its ``Retry-After`` header (seconds)."""

    status: int
    kind: str
    message: str
    retry_after: str | None = "0"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Cut:
    """A streamed reply that stops after ``events`` SSE events: the connection drops mid-body,
    or (``clean``) the body ends properly but without the rest of the message."""

    reply: dict[str, Any]
    events: int
    clean: bool = False


@dataclass
class StreamError:
    """A streamed reply that sends ``events`` SSE events, then an ``error`` event (as the API
    does when it is overloaded mid-reply), then ends."""

    reply: dict[str, Any]
    events: int
    kind: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class FakeClaude(Served):
    """Scripted replies, recorded requests. Use as a context manager; ``base_url`` for the SDK."""

    prefill: bool | None = None
    """None: as the API does by model (see the module docstring); True/False: always/never."""
    account: bool = False
    """Count usage from the requests and play out prompt caching (see the module docstring)."""
    ledger: list[dict[str, int]] = field(default_factory=list)
    cache: set[str] = field(default_factory=set)
    paused: bool = False
    """The last reply was ``pause_turn``: the next request may end with that assistant turn."""
    counted: list[dict[str, Any]] = field(default_factory=list)
    """The bodies sent to ``/v1/messages/count_tokens``."""


class _Handler(FakeHandler):
    """Answers one request from the script of the server's :class:`FakeClaude`."""

    id_header = "request-id"

    def do_POST(self) -> None:
        fake: FakeClaude = self.server.fake
        body = self.read_request()
        vertex = re.search(r"/publishers/anthropic/models/([^/:]+):(stream)?rawPredict$", self.path, re.IGNORECASE)
        if vertex:  # Google Vertex AI's route: the model is in the path, the stream flag in the body
            body = {**body, "model": vertex.group(1)}
        elif self.path.startswith("/v1/messages/count_tokens"):
            fake.requests.pop()
            fake.headers.pop()
            fake.counted.append(body)
            return self._json(200, {"input_tokens": sum(_tokens(b) for b, _ in _blocks(body))})
        elif self.path not in ("/v1/messages", "/v1/messages?beta=true"):
            return self._error(404, "not_found_error", f"no route for {self.path}")
        beta_only = sorted(BETA_ONLY & body.keys())
        if beta_only and not self.headers.get("anthropic-beta"):
            return self._error(400, "invalid_request_error", f"{beta_only[0]}: Extra inputs are not permitted")
        refused = refusal(fake, body)
        if refused:
            return self._error(400, "invalid_request_error", refused)
        if not fake.script:
            return self._error(500, "api_error", "the test's script has no reply left")
        reply = fake.script.pop(0)
        fake.paused = isinstance(reply, dict) and reply.get("stop_reason") == "pause_turn"
        if fake.account and isinstance(reply, dict):
            usage = account(fake, body)
            fake.ledger.append(usage)
            reply = {**reply, "usage": {**reply["usage"], **usage}}
        return self._answer(reply, body)

    def _answer(self, reply: Any, body: dict[str, Any]) -> None:
        """Send the scripted ``reply`` to the request ``body``."""
        if isinstance(reply, Error):
            return self._error(reply.status, reply.kind, reply.message, reply.retry_after, reply.headers)
        if isinstance(reply, Cut):
            return self._cut(reply)
        if isinstance(reply, StreamError):
            return self._stream_error(reply)
        if isinstance(reply, Raw):
            return self._raw(reply)
        if body.get("stream"):
            return self._sse(list(sse_events(reply)))
        return self._json(200, as_json_reply(reply))

    def _cut(self, reply: Cut) -> None:
        self._sse(list(sse_events(reply.reply))[: reply.events], cut=not reply.clean)

    def _stream_error(self, reply: StreamError) -> None:
        error = {"type": "error", "error": {"type": reply.kind, "message": reply.message}}
        self._sse([*list(sse_events(reply.reply))[: reply.events], ("error", error)])

    def _error(
        self, status: int, kind: str, message: str, retry_after: str | None = "0", more: dict[str, str] | None = None
    ) -> None:
        error = {"type": "error", "error": {"type": kind, "message": message}}
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        self._json(status, error, {**headers, **(more or {})})


FakeClaude.handler = _Handler


def as_json_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply as a non-streamed JSON body (test-only keys removed)."""
    content = [{k: v for k, v in block.items() if k != _PARTIAL} for block in reply["content"]]
    return {**reply, "content": content}


def sse_events(reply: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events the API streams for ``reply``, deltas split in small chunks."""
    start = {**reply, "content": [], "stop_reason": None, "usage": {**reply["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(reply["content"]):
        yield from _block_events(index, block)
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": reply.get("stop_sequence")}
    ending = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": reply["usage"]["output_tokens"]}}
    if "context_management" in reply:  # the beta API: what context editing cleared
        ending["context_management"] = reply["context_management"]
    yield "message_delta", ending
    yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of one content block, up to (not with) its content_block_stop."""
    if block["type"] == "text":
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        )
        for chunk in _chunks(block["text"]):
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": chunk}},
            )
        for citation in block.get("citations") or ():
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "citations_delta", "citation": citation},
                },
            )
    elif block["type"] in ("tool_use", "server_tool_use"):
        empty = {"type": block["type"], "id": block["id"], "name": block["name"], "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        for chunk in _chunks(block.get(_PARTIAL, json.dumps(block["input"]))):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": chunk},
                },
            )
    elif block["type"] == "thinking":
        empty = {"type": "thinking", "thinking": "", "signature": ""}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        for chunk in _chunks(block["thinking"]):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": chunk},
                },
            )
        if block["signature"]:
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                },
            )
    elif block["type"] == "compaction":  # the beta stream: the summary comes in a compaction_delta
        empty = {"type": "compaction", "content": None}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        delta = {"type": "compaction_delta", "content": block.get("content"),
                 "encrypted_content": block.get("encrypted_content")}  # fmt: skip
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    else:  # redacted_thinking and others arrive whole
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def _chunks(value: str, size: int = 7) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


# ---------------------------------------------------------------- the API's rules

_PREFILL_MODELS = re.compile(r"claude-(opus|sonnet|haiku)-4-5")
NONSTREAMING_MAX_TOKENS = 21_333
BETA_ONLY = frozenset({"context_management", "compaction", "mcp_servers"})
"""Request fields the API takes only with a beta (the ``anthropic-beta`` header): 400 without."""
_FIVE = re.compile(r"claude-[a-z]+-5(-|$|@)")


def refusal(fake: FakeClaude, body: dict[str, Any]) -> str | None:
    """What the API would refuse in ``body`` (a 400's message), or None."""
    messages = body.get("messages") or []
    if messages and messages[-1]["role"] == "assistant" and not fake.paused:
        thinking_on = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        allowed = fake.prefill if fake.prefill is not None else bool(_PREFILL_MODELS.search(body.get("model", "")))
        if thinking_on or not allowed:
            return (
                "This model does not support assistant message prefill. The conversation must end with a user message."
            )
    thinking = body.get("thinking") or {}
    if thinking.get("type") in ("enabled", "adaptive") and (refused := _thinking_first(messages)):
        return refused
    if (refused := _tool_pairing(messages)) is not None:
        return refused
    if _FIVE.search(body.get("model", "")) and "budget_tokens" in thinking:
        return "thinking.budget_tokens is not supported on this model; use thinking.type 'adaptive'"
    if "claude-sonnet-5-5" in body.get("model", "") and thinking.get("type") == "disabled":
        return "thinking cannot be disabled on this model"
    if not body.get("stream") and body.get("max_tokens", 0) > NONSTREAMING_MAX_TOKENS:
        return "Streaming is required for operations that may take longer than 10 minutes (max_tokens is too large)"
    return tools_refusal(body.get("tools") or []) or _files_refusal(fake, body)


def _thinking_first(messages: list[dict[str, Any]]) -> str | None:
    """With thinking on, the last assistant turn that asked for tools must start with thinking."""
    last = next((n for n in range(len(messages) - 1, -1, -1) if messages[n]["role"] == "assistant"), None)
    if last is None:
        return None
    content = messages[last]["content"]
    blocks = content if isinstance(content, list) else [{"type": "text"}]
    if not any(b.get("type") == "tool_use" for b in blocks) or blocks[0].get("type") in _THINKING:
        return None
    return (
        f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
        "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`."
    )


_THINKING = ("thinking", "redacted_thinking")


def _tool_pairing(messages: list[dict[str, Any]]) -> str | None:
    """Each ``tool_use`` answered by a ``tool_result`` in the next message, and each result
    answering a ``tool_use`` of the message before."""
    for n, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        after = messages[n + 1]["content"] if n + 1 < len(messages) else []
        answered = {b.get("tool_use_id") for b in after if isinstance(b, dict) and b.get("type") == "tool_result"}
        missing = [u for u in uses if u not in answered]
        if missing and n + 1 < len(messages):
            return (
                f"messages.{n + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
                "next message."
            )
        before = messages[n - 1]["content"] if n and isinstance(messages[n - 1]["content"], list) else []
        asked = {b.get("id") for b in before if b.get("type") == "tool_use"}
        stray = [b["tool_use_id"] for b in content if b.get("type") == "tool_result" and b["tool_use_id"] not in asked]
        if stray:
            return (
                f"messages.{n}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray[0]}. Each "
                "`tool_result` block must have a corresponding `tool_use` block in the previous message."
            )
    return None


_CLIENT_TOOL_NAMES = {"bash": "bash", "memory": "memory", "computer": "computer"}


def tools_refusal(tools: list[dict[str, Any]]) -> str | None:
    """What the API would refuse in the ``tools`` of a request, or None."""
    for n, tool in enumerate(tools):
        kind = tool.get("type")
        if kind and kind != "custom":
            family = kind.rpartition("_")[0]
            want = _CLIENT_TOOL_NAMES.get(family)
            if want is not None and tool.get("name") != want:
                return f"tools.{n}.{kind}.name: Input should be '{want}'"
            continue
        if tool.get("strict") and not _closed(tool.get("input_schema") or {}):
            return (
                f"tools.{n}.custom: For 'strict' tools, 'additionalProperties' must be explicitly set to false "
                "on every object schema"
            )
    deferred = [t for t in tools if t.get("defer_loading")]
    if deferred:
        if not any(str(t.get("type", "")).startswith("tool_search_tool_") for t in tools):
            return "tools: defer_loading requires a tool search tool (tool_search_tool_regex or _bm25)"
        if len(deferred) == len([t for t in tools if not str(t.get("type", "")).startswith("tool_search_tool_")]):
            return "tools: at least one tool must not be deferred (defer_loading)"
    return None


def _closed(schema: Any) -> bool:
    """Every object in ``schema`` says ``additionalProperties: false``."""
    if isinstance(schema, list):
        return all(_closed(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        return False
    return all(_closed(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))


def _files_refusal(fake: FakeClaude, body: dict[str, Any]) -> str | None:
    if '"type": "file"' not in json.dumps(body.get("messages") or []):
        return None
    beta = fake.headers[-1].get("anthropic-beta", "") if fake.headers else ""
    if "files-api-" not in beta:
        return "source.type 'file' requires the files-api-2025-04-14 beta (anthropic-beta header)"
    return None


def _tokens(block: Any) -> int:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return max(1, len(json.dumps(block, sort_keys=True)) // 4)


def _blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The request's blocks in cache-prefix order (tools, system, messages), each with its role."""
    out: list[tuple[dict[str, Any], str]] = [(t, "tools") for t in body.get("tools") or []]
    system = body.get("system") or []
    out += (
        [({"type": "text", "text": system}, "system")] if isinstance(system, str) else [(b, "system") for b in system]
    )
    for turn in body.get("messages") or []:
        content = turn["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [(b, turn["role"]) for b in blocks]
    return out


def account(fake: FakeClaude, body: dict[str, Any]) -> dict[str, int]:
    """The usage the API would bill for ``body``, with the prompt cache played out."""
    blocks = _blocks(body)
    digest = hashlib.sha256(body.get("model", "").encode())
    keys: list[str] = []
    tokens: list[int] = []
    for block, role in blocks:
        digest.update(role.encode() + json.dumps({k: v for k, v in block.items() if k != "cache_control"},
                                                 sort_keys=True).encode())  # fmt: skip
        keys.append(digest.hexdigest())
        tokens.append(_tokens(block))
    total = sum(tokens)
    breakpoints = [i for i, (block, _) in enumerate(blocks) if block.get("cache_control")]
    read_to = 0
    for point in breakpoints:
        for j in range(point, max(-1, point - 20), -1):
            if keys[j] in fake.cache:
                read_to = max(read_to, j + 1)
                break
    write_to = max(breakpoints, default=-1) + 1
    read = sum(tokens[:read_to])
    written = sum(tokens[read_to:write_to]) if write_to > read_to else 0
    for point in breakpoints:
        fake.cache.add(keys[point])
    return {
        "input_tokens": total - read - written,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }
