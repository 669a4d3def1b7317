"""What the routes share: the app's state (:class:`App`: the service, the auth hook, the trace
page), the request's JSON body and ``Last-Event-ID``, and the SSE frames every stream sends."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
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


MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a request body may have (400 past it)."""


async def json_body(request: Request) -> Any:
    """The request's body as JSON: UTF-8, at most :data:`MAX_JSON_DEPTH` deep, no lone
    surrogate, no ``NaN``/``Infinity`` (ServeError 400 saying which, never a 500)."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServeError(
            400, f"the body is not UTF-8 (byte {exc.start} is {raw[exc.start : exc.start + 1]!r}); send JSON as UTF-8"
        ) from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ServeError(400, _too_deep()) from None
    except ValueError as exc:
        raise ServeError(400, f"the body is not JSON ({exc}); send a JSON object") from None
    _check_value(value)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep() -> str:
    return f"the body's JSON is nested more than {MAX_JSON_DEPTH} deep; send a flatter JSON object"


def _check_value(value: Any) -> None:
    """ServeError 400 if ``value`` nests past :data:`MAX_JSON_DEPTH` or holds a string that is no
    UTF-8 (a lone surrogate, from a ``\\ud800`` escape). Iterative: any depth is safe to walk."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, (list, dict)):
            if depth > MAX_JSON_DEPTH:
                raise ServeError(400, _too_deep())
            if isinstance(item, dict):
                for key, inner in item.items():
                    _check_text(key)
                    stack.append((inner, depth + 1))
            else:
                stack.extend((inner, depth + 1) for inner in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ServeError(
            400, f"the body's JSON has a lone surrogate ({text[exc.start]!r}), which is no UTF-8 text; send valid text"
        ) from None


def after_of(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        return int(text)
    except ValueError:
        raise ServeError(422, f"Last-Event-ID must be an event's seq (a whole number), got {text!r}") from None


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
PIECE_CHARS = 64 * 1024
"""The most a stream writes at once (one bigger frame goes alone): the server then waits until
the client has read enough (uvicorn's flow control), so a client that never reads holds at
most about this much more than the transport's own buffer, whatever the run's history."""


def pieces(frames: Iterable[str]) -> Iterator[str]:
    """``frames`` joined into pieces of at most :data:`PIECE_CHARS` characters (a frame never split)."""
    batch: list[str] = []
    size = 0
    for frame in frames:
        if batch and size + len(frame) > PIECE_CHARS:
            yield "".join(batch)
            batch, size = [], 0
        batch.append(frame)
        size += len(frame)
    if batch:
        yield "".join(batch)


def busy_frame() -> str:
    message = "too many event streams are open on this server; reconnect in a few seconds (with Last-Event-ID)"
    return f"event: busy\ndata: {json.dumps({'message': message})}\n\n"


def dropped_frame(run_id: str, last: int) -> str:
    message = (
        f"this client read the events of run {run_id} too slowly and was dropped; resume from Last-Event-ID: {last} "
        f"(GET /runs/{run_id}/events with the header Last-Event-ID: {last})"
    )
    return f"event: dropped\ndata: {json.dumps({'message': message, 'last_event_id': last})}\n\n"


def end_frame(run_id: str, last: int, *, agui: bool = False) -> str:
    """The stream's last event once the run has ended (AG-UI: as a ``CUSTOM`` event named ``end``)."""
    return _named("end", {"run_id": run_id, "last_event_id": last}, agui)


def shutdown_frame(run_id: str, last: int, *, agui: bool = False) -> str:
    """The stream's last event when the server is shutting down: where to resume."""
    message = (
        f"the server is shutting down; the run {run_id} goes on where it stopped on the next server: follow it "
        f"there from Last-Event-ID: {last} (GET /runs/{run_id}/events with the header Last-Event-ID: {last})"
    )
    return _named("shutdown", {"message": message, "last_event_id": last}, agui)


def _named(name: str, data: dict[str, Any], agui: bool) -> str:
    body = {"type": "CUSTOM", "name": name, "value": data} if agui else data
    return f"event: {name}\ndata: {json.dumps(body)}\n\n"
