"""The HTTP plumbing the fake API servers share (tests/fake_claude.py, fake_openai.py,
fake_gemini.py): a threaded server on 127.0.0.1 and a free port, started and stopped by the fake
as a context manager (:class:`Served`); a handler base (:class:`FakeHandler`) that records each
request (body, headers, path) on the fake and answers with JSON, any raw body (or a torn one), or
server-sent events in chunked transfer encoding (or a stream that breaks off). Each fake keeps its
API's own rules and wire formats; the request-id header, the JSON content type and the SSE line
ending are its handler's class attributes."""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="Served")


@dataclass
class Raw:
    """Any reply: ``status``, ``body`` as sent, its content type; ``torn`` announces a longer
    body than it sends and hangs up."""

    status: int
    body: str
    content_type: str = "text/html"
    torn: bool = False


@dataclass
class Served:
    """A fake's script and records, and its server's life: ``with Fake() as fake:`` serves on
    ``fake.base_url`` until the end of the block. The fake names its handler (``handler``) and the
    path the SDK's base URL ends in (``base_path``); the handler fills ``requests``, ``headers``
    and ``paths`` and answers from ``script``."""

    handler: ClassVar[type[FakeHandler]]
    base_path: ClassVar[str] = ""
    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __enter__(self: S) -> S:
        self.server = FakeServer(("127.0.0.1", 0), self.handler, self)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.base_path}"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], fake: Any) -> None:
        super().__init__(address, handler)
        self.fake = fake
        self.ids = itertools.count(1)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (as the SDK does when it closes a stream early) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeHandler(BaseHTTPRequestHandler):
    """Answers one request for the server's fake (its ``do_POST`` is the fake's own)."""

    protocol_version = "HTTP/1.1"
    id_header: ClassVar[str | None] = None
    """The header that carries each reply's request id (``req_001``, ...), if the API sends one."""
    json_type: ClassVar[str] = "application/json"
    sse_end: ClassVar[str] = "\n"
    """The line ending of the server-sent events."""
    server: FakeServer
    request_id: str

    def log_message(self, *args: Any) -> None:  # quiet
        return None

    def read_request(self) -> dict[str, Any]:
        """The request's JSON body, recorded on the fake with its headers and path."""
        fake = self.server.fake
        body: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["content-length"])))
        fake.requests.append(body)
        fake.headers.append({k.lower(): v for k, v in self.headers.items()})
        fake.paths.append(self.path)
        self.request_id = f"req_{next(self.server.ids):03d}"
        return body

    def _start(self, status: int, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        if self.id_header:
            self.send_header(self.id_header, self.request_id)
        for key, value in (headers or {}).items():
            self.send_header(key, value)

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._start(status, self.json_type, headers)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, reply: Raw) -> None:
        """Any body as given; a ``torn`` one announces twice its length and hangs up."""
        data = reply.body.encode()
        self._start(reply.status, reply.content_type)
        self.send_header("content-length", str(len(data) * 2 if reply.torn else len(data)))
        self.end_headers()
        self.wfile.write(data)
        if reply.torn:
            self.close_connection = True

    def _sse(self, events: Iterable[tuple[str | None, Any]], cut: bool = False) -> None:
        """``(name, data)`` events (no ``event:`` line without a name; data given as text is sent
        as it is); ``cut``: the connection drops mid-body, with no last chunk."""
        self._start(200, "text/event-stream", {"cache-control": "no-cache"})
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        end = self.sse_end
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            chunk = (f"event: {name}{end}" if name else "").encode() + f"data: {payload}{end}{end}".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        if cut:
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
