"""What the routes share: the app's state (:class:`App`: the service, the auth hook, the trace
page), the request's JSON body and ``Last-Event-ID``, and the SSE frames every stream sends."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from .decisions import STARLETTE_MISSING, ServeError
from .service import Service

try:
    from starlette.requests import Request
except ImportError as exc:  # tests/serve/test_serve_cli.py hides Starlette in a subprocess
    raise ImportError(STARLETTE_MISSING) from exc

Auth = Callable[[Request], "Awaitable[str | None] | str | None"]
"""The auth hook: the request's user (a string), or None for 401."""


class TracePage(Protocol):
    """The trace page's renderer (:func:`loopwright.cli.trace_page.trace_page`): a run's events
    and the machine it ran on → HTML. For a workflow's run it is also given ``children=``, the
    events of the runs under it by run id (read from the app's store), drawn inside it."""

    def __call__(
        self, trace: Any, *, machine: Any = None, children: Mapping[str, Sequence[Any]] | None = None
    ) -> str: ...


class App:
    """The state of one app: its service, auth hook and options (see :func:`loopwright.serve.http.app`)."""

    def __init__(self, service: Service, auth: Auth | None, trace_page: TracePage | None) -> None:
        self.service = service
        self.auth = auth
        self.trace_page = trace_page

    async def user(self, request: Request) -> str | None:
        """The request's user (ServeError 401 when the hook says none); None without a hook."""
        if self.auth is None:
            return None
        found = self.auth(request)
        if inspect.isawaitable(found):
            found = await found
        if not found:
            raise ServeError(401, "not signed in: this server's auth hook found no user for the request")
        return str(found)

    @property
    def everyone(self) -> bool:
        """Without an auth hook every client sees every run."""
        return self.auth is None


async def json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ServeError(400, f"the body is not JSON ({exc}); send a JSON object") from None


def after_of(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        return int(text)
    except ValueError:
        raise ServeError(422, f"Last-Event-ID must be an event's seq (a whole number), got {text!r}") from None


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def dropped_frame(run_id: str, last: int) -> str:
    message = (
        f"this client read the events of run {run_id} too slowly and was dropped; resume from Last-Event-ID: {last} "
        f"(GET /runs/{run_id}/events with the header Last-Event-ID: {last})"
    )
    return f"event: dropped\ndata: {json.dumps({'message': message, 'last_event_id': last})}\n\n"
