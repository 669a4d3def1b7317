"""The front door: what every request must show before a route sees it (an ASGI middleware).

In order, each refusal a JSON ``{"error": message}`` that says what to do:

1. ``Host``: one the server answers to (421): the address it was reached on, ``localhost``,
   ``127.0.0.1`` and ``::1`` when that address is a loopback one, and the ``allowed_hosts``
   (``"*.example.com"`` admits its subdomains; ``"*"`` any Host, for a proxy that checks it).
   A DNS-rebinding page reaches the server under its own name, so it is refused here.
2. ``Origin``, on a request that may change something (any method but GET, HEAD, OPTIONS): the
   server's own origin (the ``Origin``'s host and port are the ``Host``'s) or one of
   ``cors_origins`` (403 otherwise; ``Origin: null`` too). Browsers send ``Origin`` on every
   cross-origin POST, so another site's page cannot start, decide or cancel a run.
3. ``Content-Type``: a request that may change something and carries a body, or declares a
   type, declares ``application/json`` (415 otherwise). A browser sends a cross-origin
   ``text/plain`` or form POST without asking first (no CORS preflight); JSON it must ask for.
4. The body: at most ``max_body_bytes`` (413), read as it arrives: a ``Content-Length`` past it
   is refused before a byte is read, a chunked body as soon as it goes past; the route then
   reads the body from memory.

The body's JSON itself (UTF-8, nesting, lone surrogates) is checked where it is parsed
(:func:`loopwright.serve.web.json_body`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..data.errors import ConfigurationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 2**20
"""The default largest request body (1 MiB): ``app(..., max_body_bytes=)``, ``--max-body-bytes``."""
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The names a server reached on a loopback address also answers to."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: no Origin or Content-Type check."""
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def check_hosts(hosts: Sequence[str]) -> list[str]:
    """``allowed_hosts`` as given to ``app()``, lower-cased (ConfigurationError if malformed)."""
    if isinstance(hosts, str):
        raise ConfigurationError(f"serve.app(allowed_hosts=) takes a list of host names, not the string {hosts!r}")
    out = []
    for host in hosts:
        if not isinstance(host, str) or not host.strip() or "/" in host or " " in host:
            raise ConfigurationError(
                f"serve.app(allowed_hosts=) got {host!r}: give host names such as 'agents.example.com', "
                "'*.example.com' or '*' (no scheme, no path)"
            )
        out.append(host.strip().lower())
    return out


def split_host(value: str) -> tuple[str, int | None]:
    """A ``Host`` value's name and port (None: none given); ``[::1]:8000`` -> ``("::1", 8000)``."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    return name.rstrip("."), int(port) if port.isdigit() else None


def is_loopback(host: str) -> bool:
    """``host`` names this machine alone (a loopback address, or ``localhost``)."""
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bearer_token(token: str, user: str = "token") -> Callable[[Any], str | None]:
    """An auth hook for ``app(..., auth=)``: a request sending ``Authorization: Bearer <token>``
    is ``user``'s (compared in constant time, :func:`hmac.compare_digest`); any other gets 401.
    ``loopwright serve --token-env VAR`` reads the token from the environment."""
    if not token:
        raise ConfigurationError("bearer_token() needs a token: a long random secret, not an empty string")
    expected = token.encode("utf-8")

    def auth(request: Any) -> str | None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return user if hmac.compare_digest(given.strip().encode("utf-8", "surrogateescape"), expected) else None

    return auth


class FrontDoor:
    """The ASGI middleware of the module docstring, around the app's routes."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str] = (),
        cors_origins: Sequence[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.hosts = check_hosts(allowed_hosts)
        self.origins = {o.rstrip("/").lower() for o in cors_origins}
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        refused = self._refusal(scope, headers)
        if refused is not None:
            await _answer(send, *refused)
            return
        if scope["method"] in SAFE_METHODS or not _has_body(headers):
            await self.app(scope, receive, send)
            return
        body = await self._read(headers, receive)
        if body is None:
            await _answer(send, 413, self._too_big())
            return
        await self.app(scope, _replay(body, receive), send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host")
        if host is not None and not self._host_allowed(scope, host):
            return 421, (
                f"this server does not answer to Host {host!r}; reach it by the address it listens on, or "
                "start it with --allowed-host NAME (serve.app(..., allowed_hosts=[NAME])) for a name of "
                "yours (behind a proxy: the name the proxy forwards)"
            )
        if scope["method"] in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, host, scope):
            return 403, (
                f"a request from Origin {origin!r} may not change anything here: only the server's own pages "
                "and the origins given to serve.app(..., cors_origins=[...]) (--allowed-origin) may"
            )
        kind = headers.get("content-type")
        if (kind is not None or _has_body(headers)) and not _is_json(kind):
            return 415, (
                f"the body must be JSON, sent with the header Content-Type: application/json (got "
                f"{'no Content-Type' if kind is None else repr(kind)})"
            )
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            return 413, self._too_big()
        return None

    def _too_big(self) -> str:
        return (
            f"the body is larger than this server takes ({self.max_body_bytes} bytes, its max_body_bytes); "
            "send less (or start the server with a larger --max-body-bytes)"
        )

    def _host_allowed(self, scope: Scope, value: str) -> bool:
        name, _ = split_host(value)
        server = scope.get("server")
        reached = str(server[0]).lower() if server else None
        if (reached is None or is_loopback(reached)) and name in LOOPBACK_NAMES:
            return True
        if reached is not None and name == reached:
            return True
        for allowed in self.hosts:
            if allowed == "*":
                return True
            allowed_name, allowed_port = split_host(allowed)
            wild = allowed_name.startswith("*.")
            matched = name.endswith(allowed_name[1:]) if wild else name == allowed_name
            if matched and (allowed_port is None or allowed_port == split_host(value)[1]):
                return True
        return False

    def _origin_allowed(self, origin: str, host: str | None, scope: Scope) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if origin in self.origins or "*" in self.origins:
            return True
        if origin == "null" or host is None:
            return False
        parts = urlsplit(origin)
        if not parts.scheme or not parts.hostname:
            return False
        try:
            origin_port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        name, port = split_host(host)
        return parts.hostname == name and origin_port == (port or DEFAULT_PORTS.get(parts.scheme))

    async def _read(self, headers: dict[str, str], receive: Receive) -> bytes | None:
        """The whole body, read as it comes; None as soon as it is past ``max_body_bytes``."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: hand the app what came
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length", "").strip()
    return (length != "" and length != "0") or "transfer-encoding" in headers


def _is_json(kind: str | None) -> bool:
    if kind is None:
        return False
    media = kind.split(";", 1)[0].strip().lower()
    return media == "application/json"


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then whatever the client sends next (its leaving)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
