"""A local stand-in for the Anthropic Messages API, for tests: a real HTTP server on 127.0.0.1
that answers ``POST /v1/messages`` as the API does — JSON replies, server-sent-event streams
(message_start, content_block_start/delta/stop with text, input_json, thinking and signature
deltas, message_delta, message_stop), and real error bodies and status codes. Each test scripts
the replies; the server records every request body it received."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


@dataclass
class Error:
    """A scripted error reply."""

    status: int
    kind: str
    message: str


@dataclass
class Cut:
    """A streamed reply that breaks off after ``events`` SSE events."""

    reply: dict[str, Any]
    events: int


@dataclass
class FakeClaude:
    """Scripted replies, recorded requests. Use as a context manager; ``base_url`` for the SDK."""

    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __enter__(self) -> FakeClaude:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append(body)
                if self.path != "/v1/messages":
                    return self._json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": "no route"}}
                    )
                if not fake.script:
                    return self._json(500, {"type": "error", "error": {"type": "api_error", "message": "script empty"}})
                reply = fake.script.pop(0)
                if isinstance(reply, Error):
                    error = {"type": "error", "error": {"type": reply.kind, "message": reply.message}}
                    return self._json(reply.status, error, {"retry-after-ms": "1"})
                if isinstance(reply, Cut):
                    return self._sse(list(sse_events(reply.reply))[: reply.events], cut=True)
                if body.get("stream"):
                    return self._sse(list(sse_events(reply)))
                return self._json(200, reply)

            def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("request-id", "req_test")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str, dict[str, Any]]], cut: bool = False) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("request-id", "req_test")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                if cut:  # the connection drops mid-message
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def sse_events(reply: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events the API streams for ``reply``, deltas split in small chunks."""
    start = {**reply, "content": [], "stop_reason": None, "usage": {**reply["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(reply["content"]):
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
        elif block["type"] == "tool_use":
            empty = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
            for chunk in _chunks(json.dumps(block["input"])):
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
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                },
            )
        else:  # redacted_thinking and others arrive whole
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": reply.get("stop_sequence")}
    yield (
        "message_delta",
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": reply["usage"]["output_tokens"]}},
    )
    yield "message_stop", {"type": "message_stop"}


def _chunks(value: str, size: int = 7) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]
