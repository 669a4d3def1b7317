"""Who calls an A2A app: ``a2a_app(..., auth=)`` takes the hook of :func:`loopwright.serve.app`
(a function of the request giving its user, or None), and :class:`SignedIn` runs it before each
JSON-RPC request reaches the SDK:

- no user: HTTP 401 with ``WWW-Authenticate: Bearer`` and a JSON-RPC error body (the request
  never reaches the SDK, nothing changes);
- a user: put where Starlette's own authentication puts it (``scope["user"]``), so the SDK's
  ``DefaultServerCallContextBuilder`` hands it on as ``ServerCallContext.user``, and
  :func:`user_of` reads it: a run keeps its user in the store (as the HTTP API's runs do), and
  a task is only found for that user.

The card stays public (its route is not wrapped) and, with a hook, declares the scheme
(:func:`secure_card`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import AgentCard, HTTPAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList
from starlette.authentication import AuthCredentials, SimpleUser
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ...data.errors import ConfigurationError

Auth = Callable[[Request], "Awaitable[str | None] | str | None"]
"""The auth hook: the same as ``loopwright.serve.app(auth=)``'s."""

USER = "a2a"
"""Whom the runs started over A2A belong to without an auth hook (the store keeps it beside the run)."""

UNAUTHENTICATED = -32000
"""The JSON-RPC error code of a 401 (a server error: JSON-RPC has none for authentication)."""

BEARER = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
"""The scheme a card declares by default with a hook: HTTP bearer."""


def user_of(context: ServerCallContext | None) -> str:
    """The user a request's call context carries (:data:`USER` without an auth hook)."""
    if context is not None and context.user.is_authenticated and context.user.user_name:
        return context.user.user_name
    return USER


def secure_card(card: AgentCard, scheme: SecurityScheme | None) -> AgentCard:
    """``card`` declaring ``scheme`` (default :data:`BEARER`) as the one every request needs."""
    card.security_schemes["bearer" if scheme is None else "auth"].CopyFrom(scheme or BEARER)
    card.security_requirements.append(
        SecurityRequirement(schemes={"bearer" if scheme is None else "auth": StringList()})
    )
    return card


class SignedIn:
    """The ASGI app around a JSON-RPC route: the hook's user into the scope, or 401."""

    def __init__(self, app: Any, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = self.auth(Request(scope, receive))
        if inspect.isawaitable(found):
            found = await found
        if not found:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": UNAUTHENTICATED,
                    "message": "not signed in: this server's auth hook found no user for the request "
                    "(send the credentials its agent card's securitySchemes name)",
                },
            }
            await JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        scope["user"] = SimpleUser(str(found))
        scope["auth"] = AuthCredentials(["authenticated"])
        await self.app(scope, receive, send)


def guarded(routes: list[Route], auth: Auth | None) -> list[Route]:
    """The SDK's JSON-RPC ``routes`` behind ``auth`` (unchanged without one)."""
    if auth is None:
        return routes
    if not callable(auth):
        raise ConfigurationError(
            f"a2a_app(auth=) takes a function of the request giving its user (or None), got {type(auth).__name__}"
        )
    for route in routes:
        route.app = SignedIn(route.app, auth)
    return routes
