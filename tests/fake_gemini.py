"""A local stand-in for the Gemini API, for tests: a real HTTP server on 127.0.0.1 that answers
``POST /v1beta/models/{model}:generateContent`` (JSON; ``/v1/`` too, the SDK's default since 3.x) and
``:streamGenerateContent?alt=sse``
(server-sent events, one ``GenerateContentResponse`` chunk each: text split in small pieces, a
part's thought signature on its last piece or, with ``signature_apart``, in a chunk of its own
with empty text; the finish reason and usage in the last chunk), with real error bodies
(``{"error": {"code", "message", "status", "details"}}``, ``Retry-After`` headers and
``RetryInfo`` details). The real SDK is pointed at it with
``HttpOptions(base_url=fake.base_url)``. Each test scripts the replies; the server records every
request body, its headers and its path.

Script items: a reply body (:func:`reply`), :class:`Error`, :class:`Cut` (a stream that breaks
off), :class:`Raw` (any status and body). :class:`GeminiHarness` wraps it in the shape the adapter
conformance kit asks for (make_model / make_unreachable_model / script / requests / answered_ids
/ clear).
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.fake_http import FakeHandler, Raw, Served

MODEL = "gemini-3.8-flash"
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def sig(data: bytes) -> str:
    """A thought signature as the API sends it (standard base64 of opaque bytes)."""
    return base64.b64encode(data).decode()


def text(value: str, *, signature: bytes | None = None, thought: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = sig(signature)
    return part


def call(name: str, args: dict[str, Any], *, id_: str | None = None, signature: bytes | None = None) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": name, "args": args}
    if id_ is not None:
        function_call["id"] = id_
    part: dict[str, Any] = {"functionCall": function_call}
    if signature is not None:
        part["thoughtSignature"] = sig(signature)
    return part


def reply(
    *parts: dict[str, Any],
    finish: str | None = "STOP",
    usage: dict[str, int] | None = None,
    safety: list[dict[str, Any]] | None = None,
    prompt_blocked: str | None = None,
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` body; ``prompt_blocked``: no candidates, the prompt blocked."""
    body: dict[str, Any] = {
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15, **(usage or {})},
        "modelVersion": MODEL,
        "responseId": "resp_test",
    }
    if prompt_blocked:
        body["promptFeedback"] = {"blockReason": prompt_blocked}
        return body
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    if safety:
        candidate["safetyRatings"] = safety
    body["candidates"] = [candidate]
    return body


@dataclass
class Error:
    """A scripted HTTP error; ``retry_after`` its ``Retry-After`` header, ``retry_delay`` a
    ``RetryInfo`` detail (``"2s"``)."""

    status: int
    message: str
    retry_after: str | None = None
    retry_delay: str | None = None
    reason: str | None = None

    def body(self) -> dict[str, Any]:
        details: list[dict[str, Any]] = []
        if self.reason:
            details.append(
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": self.reason, "domain": "googleapis.com"}
            )
        if self.retry_delay:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": self.retry_delay})
        error: dict[str, Any] = {
            "code": self.status,
            "message": self.message,
            "status": STATUS_NAMES.get(self.status, "UNKNOWN"),
        }
        if details:
            error["details"] = details
        return {"error": error}


@dataclass
class Cut:
    """A streamed reply that stops after ``chunks`` SSE chunks; the connection drops mid-body."""

    reply: dict[str, Any]
    chunks: int


@dataclass
class FakeGemini(Served):
    """Scripted replies, recorded requests. Use as a context manager; ``base_url`` for the SDK."""

    signature_apart: bool = False
    """Stream a text part's signature in a chunk of its own (empty text), as the API may."""
    signed: dict[str, str] = field(default_factory=dict)
    """Each thought signature the fake sent (base64, as on the wire), and the model that sent it:
    a signature sent back to another model is refused, as the API refuses it."""
    caches: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The explicit caches made through ``POST /v1beta/cachedContents``, by name (their bodies)."""

    def streamed(self) -> list[bool]:
        """Per request: was it the streaming route."""
        return [":streamGenerateContent" in p for p in self.paths]


_ROUTE = re.compile(r"^/(?:v1|v1beta)/models/([^/:]+):(generateContent|streamGenerateContent)(\?alt=sse)?$")
_CACHES = re.compile(r"^/(?:v1|v1beta)/cachedContents$")
PLACEHOLDER = "skip_thought_signature_validator"
"""The signature Google documents for function calls the model did not make."""
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to https://ai.google.dev/gemini-api/docs/"
    "thought-signatures for more details."
)
CACHE_BESIDE = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config."
    "\n\nProposed fix: move those values to CachedContent from GenerateContent request."
)


class _Handler(FakeHandler):
    disable_nagle_algorithm = True  # headers and body leave at once (else a delayed ACK adds ~40 ms a reply)
    json_type = "application/json; charset=UTF-8"
    sse_end = "\r\n"

    def _quick_ack(self) -> None:
        """Acknowledge at once: a client that writes a request's headers and body apart (Nagle on)
        would otherwise wait for the delayed ACK of the headers (~40 ms) before the body leaves."""
        if hasattr(socket, "TCP_QUICKACK"):
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

    def setup(self) -> None:
        super().setup()
        self._quick_ack()

    def do_POST(self) -> None:
        self._quick_ack()
        fake: FakeGemini = self.server.fake
        body = self.read_request()
        self._quick_ack()
        if not self.headers.get("x-goog-api-key"):
            return self._json(403, Error(403, "Method doesn't allow unregistered callers.").body())
        if _CACHES.match(self.path.split("?")[0]):
            return self._cache(fake, body)
        route = _ROUTE.match(self.path)
        if route is None:
            return self._json(404, Error(404, f"no route for {self.path}").body())
        refused = refusal(body) or model_refusal(fake, route.group(1), body)
        if refused:
            status = 403 if refused.startswith("CachedContent not found") else 400
            return self._json(status, Error(status, refused).body())
        if not fake.script:
            return self._json(500, Error(500, "the test's script has no reply left").body())
        return self._answer(fake, fake.script.pop(0), route.group(1), route.group(2) == "streamGenerateContent")

    def _answer(self, fake: FakeGemini, item: Any, model: str, stream: bool) -> None:
        """Send the scripted ``item`` (its signatures recorded as ``model``'s)."""
        if isinstance(item, dict):
            _record_signatures(fake, model, item)
        if isinstance(item, Error):
            headers = {"retry-after": item.retry_after} if item.retry_after is not None else {}
            return self._json(item.status, item.body(), headers)
        if isinstance(item, Raw):
            return self._raw(item)
        if isinstance(item, Cut):
            return self._sse([(None, c) for c in chunks(item.reply, fake.signature_apart)][: item.chunks], cut=True)
        if stream:
            return self._sse((None, c) for c in chunks(item, fake.signature_apart))
        return self._json(200, item)

    def _cache(self, fake: FakeGemini, body: dict[str, Any]) -> None:
        """``caches.create``: the cache is kept by name (its body), its resource answered."""
        name = f"cachedContents/cache{len(fake.caches) + 1}"
        fake.caches[name] = body
        usage = {"totalTokenCount": 4096}
        return self._json(200, {"name": name, "model": body.get("model"), "usageMetadata": usage})


FakeGemini.handler = _Handler


def _record_signatures(fake: FakeGemini, model: str, body: dict[str, Any]) -> None:
    for candidate in body.get("candidates") or ():
        for part in (candidate.get("content") or {}).get("parts") or ():
            if "thoughtSignature" in part:
                fake.signed[part["thoughtSignature"]] = model


def chunks(body: dict[str, Any], signature_apart: bool = False) -> Iterator[dict[str, Any]]:
    """The SSE chunks the API streams for ``body``: text in pieces of 7 characters."""
    meta = {k: v for k, v in body.items() if k not in ("candidates", "usageMetadata")}
    if "candidates" not in body:
        yield body
        return
    candidate = body["candidates"][0]
    pieces = [piece for part in candidate["content"]["parts"] for piece in _pieces(part, signature_apart)]
    for n, piece in enumerate(pieces):
        chunk_candidate: dict[str, Any] = {"content": {"role": "model", "parts": [piece]}, "index": 0}
        event = {**meta, "candidates": [chunk_candidate]}
        if n == len(pieces) - 1:
            chunk_candidate.update({k: v for k, v in candidate.items() if k in ("finishReason", "safetyRatings")})
            event["usageMetadata"] = body["usageMetadata"]
        yield event
    if not pieces:
        last = {k: v for k, v in candidate.items() if k != "content"}
        yield {**meta, "candidates": [last], "usageMetadata": body["usageMetadata"]}


def _pieces(part: dict[str, Any], signature_apart: bool) -> list[dict[str, Any]]:
    """One part as streamed: text in pieces, its signature on the last piece or on its own."""
    if "text" not in part or "functionCall" in part:
        return [part]
    value = part["text"]
    signature = part.get("thoughtSignature")
    bits = [value[i : i + 7] for i in range(0, len(value), 7)] or [""]
    pieces = [{**{k: v for k, v in part.items() if k != "thoughtSignature"}, "text": bit} for bit in bits]
    if signature is not None and signature_apart:
        pieces.append({"text": "", "thoughtSignature": signature})
    elif signature is not None:
        pieces[-1]["thoughtSignature"] = signature
    return pieces


def refusal(body: dict[str, Any]) -> str | None:
    """What the API would refuse in ``body`` (a 400's message), or None."""
    contents = body.get("contents") or []
    if not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for n, content in enumerate(contents):
        for part in content.get("parts") or []:
            if "functionResponse" in part and (n == 0 or contents[n - 1]["role"] != "model"):
                return "Please ensure that function response turn comes immediately after a function call turn."
        if content.get("role") not in ("user", "model"):
            return f"* GenerateContentRequest.contents[{n}].role: must be user or model"
    for n, content in enumerate(contents[:-1]):
        calls = [p["functionCall"] for p in content.get("parts") or [] if "functionCall" in p]
        if content["role"] == "model" and calls:
            answers = [p["functionResponse"] for p in contents[n + 1].get("parts") or [] if "functionResponse" in p]
            if [a["name"] for a in answers] != [c["name"] for c in calls]:
                return (
                    "Please ensure that the number of function response parts is equal to the number of function "
                    "call parts of the function call turn."
                )
    return None


def gemini_3(model: str) -> bool:
    """A Gemini 3 (or later) model id: the one that checks thought signatures."""
    found = re.match(r"gemini-(\d+)", model.removeprefix("models/"))
    return found is not None and int(found.group(1)) >= 3


def model_refusal(fake: FakeGemini, model: str, body: dict[str, Any]) -> str | None:
    """What the API would refuse in ``body`` sent to ``model`` (beyond :func:`refusal`): a step of
    the current turn whose first function call is unsigned (Gemini 3); a signature another model
    made; ``cachedContent`` beside an instruction, tools or a tool config, or one never made;
    media inside function responses (before Gemini 3); a tool config that names no declared
    function."""
    return _signature_refusal(fake, model, body.get("contents") or []) or _config_refusal(fake, body)


def _signature_refusal(fake: FakeGemini, model: str, contents: list[dict[str, Any]]) -> str | None:
    for part in (p for c in contents for p in c.get("parts") or []):
        made_by = fake.signed.get(part.get("thoughtSignature", ""))
        if made_by is not None and made_by != model:
            return "Corrupted thought signature."
        if part.get("functionResponse", {}).get("parts") and not gemini_3(model):
            return "Multimodal function responses are not supported by this model."
    if not gemini_3(model):
        return None
    standard = [n for n, c in enumerate(contents) if c["role"] == "user" and _plain_user(c)]
    for content in contents[standard[-1] if standard else 0 :]:
        calls = [(n, p) for n, p in enumerate(content.get("parts") or []) if "functionCall" in p]
        if content["role"] == "model" and calls and not calls[0][1].get("thoughtSignature"):
            n, first = calls[0]
            return MISSING_SIGNATURE.format(name=first["functionCall"]["name"], position=n + 1)
    return None


def _config_refusal(fake: FakeGemini, body: dict[str, Any]) -> str | None:
    cached = body.get("cachedContent")
    if cached is not None:
        if {"systemInstruction", "tools", "toolConfig"} & body.keys():
            return CACHE_BESIDE
        if cached not in fake.caches:
            return f"CachedContent not found (or permission denied): {cached}"
    config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    allowed = config.get("allowedFunctionNames")
    if not allowed:
        return None
    tools = body.get("tools") or fake.caches.get(cached or "", {}).get("tools") or []
    declared = {d["name"] for t in tools for d in t.get("functionDeclarations") or []}
    if config.get("mode") not in ("ANY", "VALIDATED"):
        return "allowed_function_names is only allowed when function calling mode is ANY or VALIDATED."
    if set(allowed) - declared:
        return f"Function {sorted(set(allowed) - declared)[0]} in allowed_function_names is not declared."
    return None


def _plain_user(content: dict[str, Any]) -> bool:
    """A user turn that is not only function responses (it starts a new turn)."""
    parts = content.get("parts") or []
    return any("functionResponse" not in p for p in parts)


# ------------------------------------------------------------------ the harness


class GeminiHarness:
    """The fake server in the shape of the adapter conformance kit's ``AdapterHarness``
    (``loopwright.testing.adapter_kit``): the kit's neutral replies and failures (read by
    attribute: ``text``, ``calls`` of ``id``/``name``/``args``, ``cut``, token counts; ``status``,
    ``retry_after``, ``context_window``, ``message``) scripted as Gemini wire bodies."""

    name = "GeminiModel"
    CONTEXT_WINDOW = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."

    def __init__(self, fake: FakeGemini) -> None:
        self.fake = fake

    def make_model(self, **options: Any) -> Any:
        from loopwright.models.gemini import GeminiModel

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return GeminiModel(options.pop("model", MODEL), api_key="test-key", base_url=self.fake.base_url, **options)

    def make_unreachable_model(self) -> Any:
        from loopwright.models.gemini import GeminiModel

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return GeminiModel(MODEL, api_key="test-key", base_url=f"http://127.0.0.1:{port}")

    def script(self, *items: Any) -> None:
        for item in items:
            self.fake.script.append(self.wire(item))

    @classmethod
    def wire(cls, item: Any) -> Any:
        """A kit ``Reply`` or ``Failure`` as what the Gemini API sends."""
        if hasattr(item, "status"):
            message = cls.CONTEXT_WINDOW if getattr(item, "context_window", False) else item.message
            header = None if item.retry_after is None else str(item.retry_after)
            return Error(item.status, message, retry_after=header)
        parts = [text(item.text)] if item.text else []
        parts += [call(c.name, dict(c.args), id_=c.id) for c in item.calls]
        usage = {
            "promptTokenCount": item.input_tokens + item.cached_tokens,  # Gemini counts the cached part in
            "cachedContentTokenCount": item.cached_tokens,
            "candidatesTokenCount": item.output_tokens,
            "totalTokenCount": item.input_tokens + item.cached_tokens + item.output_tokens,
        }
        return reply(*parts, finish="MAX_TOKENS" if item.cut else "STOP", usage=usage)

    def requests(self) -> list[dict[str, Any]]:
        return self.fake.requests

    def answered_ids(self, body: dict[str, Any]) -> list[str]:
        """The call ids of the function responses in a request body, in order."""
        return [
            p["functionResponse"].get("id", "")
            for c in body["contents"]
            for p in c.get("parts") or []
            if "functionResponse" in p
        ]

    def clear(self) -> None:
        self.fake.requests.clear()
        self.fake.headers.clear()
        self.fake.paths.clear()
        self.fake.script.clear()

    @staticmethod
    def tool_results(request: dict[str, Any]) -> list[tuple[str | None, Any]]:
        """The (call id, response) pairs the last turn of a request answers, in order."""
        last = request["contents"][-1]
        return [
            (p["functionResponse"].get("id"), p["functionResponse"].get("response"))
            for p in last.get("parts") or []
            if "functionResponse" in p
        ]
