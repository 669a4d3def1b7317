"""The ASGI app (Starlette): the routes, the auth hook, request bodies, errors and SSE.

Routes (every body and answer is JSON; every error ``{"error": message}`` with a 4xx status):

- ``GET /agents``: the agents served; ``GET /agents/{name}/diagram.svg``: an agent's machine
- ``POST /runs`` ``{"agent", "input", "run_id"?, "session"?}``: start a run (202, ``{"run_id", "events"}``);
  ``session``: the user's session id, with an app given ``sessions=`` (409 while another run holds it)
- ``GET /runs?agent=&outcome=&since=&until=&limit=``: the runs you may see, newest first
- ``GET /runs/{id}``: one run (its outcome, output, pending calls)
- ``GET /runs/{id}/events``: its events as Server-Sent Events (``id:`` is the event's seq:
  reconnect with ``Last-Event-ID`` and the stream goes on after it)
- ``GET /runs/{id}/agui``: the same as AG-UI events (:mod:`loopwright.serve.agui`);
  ``POST /agents/{name}/agui``: an AG-UI client's run input (a message on a thread: its next run,
  continuing it; or ``resume`` entries for its latest run), answered with that leg's AG-UI events
- ``POST /runs/{id}/decisions`` ``{"decisions": [{"call_id", "action", "reason"?, "args"?, "value"?}]}``
- ``POST /runs/{id}/cancel``, ``/pause``, ``/resume``
- ``GET /runs/{id}/trace``: the run's trace page (when the app was given ``trace_page``); a
  workflow's run holds its children's loops, read from the store
- ``GET /``: the dev UI (``ui=True``)

Before any route, the front door (:mod:`loopwright.serve.guard`): a forged ``Host`` gets 421,
a POST from a foreign ``Origin`` 403, a body not sent as ``application/json`` 415, one past
``max_body_bytes`` 413; JSON that is not UTF-8, nests too deep or holds a lone surrogate 400.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .decisions import STARLETTE_MISSING

try:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # tests/serve/test_serve_cli.py hides Starlette in a subprocess
    raise ImportError(STARLETTE_MISSING) from exc

from ..data.errors import ConfigurationError
from ..runtime.agent import Agent
from ..stores.base import RunStore
from ..workflows.stored import composites_of, stored_children
from .agui_routes import agui, agui_input
from .decisions import DecisionIn, ServeError
from .guard import MAX_BODY_BYTES, FrontDoor, check_hosts
from .hub import BUSY, END, SHUTDOWN, StreamPool
from .service import Service, refuse_unverified
from .web import (
    SSE_HEADERS,
    App,
    Auth,
    TracePage,
    after_of,
    busy_frame,
    dropped_frame,
    end_frame,
    json_body,
    pieces,
    shutdown_frame,
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartRun(_Body):
    agent: str | None = None
    """The agent's name (default: the only agent served)."""
    input: str = Field(min_length=1)
    run_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    session: str | None = Field(default=None, min_length=1, max_length=200)
    """The user's session id: the run continues that session (``(agent, user, session)``)."""


class Decision(_Body):
    call_id: str = Field(min_length=1)
    action: Literal["approve", "deny", "value"]
    reason: str = ""
    args: dict[str, Any] | None = None
    value: Any = None


class Decisions(_Body):
    decisions: list[Decision] = Field(min_length=1)


def _errors(
    handler: Callable[[App, Request], Awaitable[Response]], ready: Callable[[], Awaitable[App]]
) -> Callable[[Request], Awaitable[Response]]:
    async def route(request: Request) -> Response:
        try:
            return await handler(await ready(), request)
        except ServeError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return JSONResponse({"error": f"bad request body: {where}: {first['msg']}"}, status_code=422)

    route.__name__ = handler.__name__
    return route


# ---------------------------------------------------------------- routes


async def list_agents(app: App, request: Request) -> Response:
    await app.user(request)
    return JSONResponse({"agents": list(app.service.runners), "approve_takes_args": _edits()})


def _edits() -> bool:
    from .decisions import approve_takes_args

    return approve_takes_args()


async def diagram_svg(app: App, request: Request) -> Response:
    await app.user(request)
    runner = app.service.runner(request.path_params["name"])
    from ..machines.diagram import diagram

    svg = diagram(runner.machine, "svg")  # Graphviz's drawing where it is installed, else pure Python's
    return Response(svg[svg.index("<svg") :], media_type="image/svg+xml")


async def start_run(app: App, request: Request) -> Response:
    user = await app.user(request)
    body = StartRun.model_validate(await json_body(request))
    agent = body.agent
    if agent is None:
        if len(app.service.runners) != 1:
            raise ServeError(422, f"name the agent: one of {', '.join(app.service.runners)}")
        agent = next(iter(app.service.runners))
    run_id = await app.service.start(agent, body.input, user, body.run_id, body.session)
    return JSONResponse({"run_id": run_id, "events": f"/runs/{run_id}/events"}, status_code=202)


async def list_runs(app: App, request: Request) -> Response:
    user = await app.user(request)
    q = request.query_params
    try:
        since = float(q["since"]) if q.get("since") else None
        until = float(q["until"]) if q.get("until") else None
        limit = int(q.get("limit") or 100)
    except ValueError:
        raise ServeError(422, "since and until are Unix times (seconds), limit a whole number") from None
    found = await app.service.runs(
        user,
        app.everyone,
        agent=q.get("agent") or None,
        outcome=q.get("outcome") or None,
        since=since,
        until=until,
        limit=max(1, min(limit, 1000)),
    )
    return JSONResponse({"runs": found})


async def show_run(app: App, request: Request) -> Response:
    user = await app.user(request)
    return JSONResponse(await app.service.show(request.path_params["run_id"], user, app.everyone))


async def decide(app: App, request: Request) -> Response:
    user = await app.user(request)
    body = Decisions.model_validate(await json_body(request))
    run_id = request.path_params["run_id"]
    given = [DecisionIn(d.call_id, d.action, d.reason, d.args, d.value) for d in body.decisions]
    await app.service.decide(run_id, given, user, app.everyone)
    return JSONResponse({"run_id": run_id, "status": "resumed"}, status_code=202)


async def cancel(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    status = await app.service.cancel(run_id, user, app.everyone)
    return JSONResponse({"run_id": run_id, "status": status}, status_code=202)


async def pause(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    await app.service.pause(run_id, user, app.everyone)
    return JSONResponse({"run_id": run_id, "status": "pausing"}, status_code=202)


async def resume(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    await app.service.resume(run_id, user, app.everyone)
    return JSONResponse({"run_id": run_id, "status": "resumed"}, status_code=202)


async def trace(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    if app.trace_page is None:
        raise ServeError(
            404, "this app has no trace pages: give app(..., trace_page=loopwright.cli.trace_page.trace_page)"
        )
    show = await app.service.show(run_id, user, app.everyone)
    events = await app.service.events(run_id)
    if not events:
        raise ServeError(404, f"run {run_id!r} has no events in the store yet")
    machine = app.service.runners[show["agent"]].machine if show["agent"] in app.service.runners else None
    if machine is None or not composites_of(machine):
        return HTMLResponse(app.trace_page(events, machine=machine))
    children = await stored_children(app.service.store, run_id, machine)  # a workflow's: its children's loops
    return HTMLResponse(app.trace_page(events, machine=machine, children=children))


async def events(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    after = after_of(request)
    await app.service.check_visible(run_id, user, app.everyone)
    app.service.streams.check_room()
    return StreamingResponse(_sse(app, run_id, after), media_type="text/event-stream", headers=SSE_HEADERS)


async def _sse(app: App, run_id: str, after: int) -> AsyncIterator[str]:
    last = after
    async for got in app.service.follow(run_id, after):
        if isinstance(got, list):
            last = max(last, got[-1].seq)
            for piece in pieces(item.frame for item in got):
                yield piece
        elif got == BUSY:
            yield busy_frame()
        elif got == "ping":
            yield ": ping\n\n"
        elif got == "dropped":
            yield dropped_frame(run_id, last)
        elif got == END:
            yield end_frame(run_id, last)
        elif got == SHUTDOWN:
            yield shutdown_frame(run_id, last)


async def ui_page(app: App, request: Request) -> Response:
    return HTMLResponse(_asset("index.html"))


async def ui_asset(app: App, request: Request) -> Response:
    name = request.path_params["name"]
    kinds = {"app.js": "text/javascript", "app.css": "text/css"}
    if name not in kinds:
        raise ServeError(404, f"no file {name!r} in the dev UI")
    return Response(_asset(name), media_type=kinds[name])


def _asset(name: str) -> str:
    return resources.files("loopwright.serve").joinpath("static", name).read_text(encoding="utf-8")


async def not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"no route {request.method} {request.url.path}; see GET /agents and /runs"}, 404)


async def not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"{request.method} is not allowed on {request.url.path}"}, 405)


# ---------------------------------------------------------------- the app


class _Lazy:
    """The app's service, made at startup (the lifespan) or, in an app mounted inside another
    (whose lifespan Starlette does not run), at the first request."""

    def __init__(
        self,
        agents: list[Agent],
        store: RunStore | str,
        auth: Auth | None,
        trace_page: TracePage | None,
        buffer: int,
        sessions: Any = None,
        streams: dict[str, int] | None = None,
        unverified: bool = False,
    ) -> None:
        self.agents, self.store, self.auth, self.trace_page, self.buffer = agents, store, auth, trace_page, buffer
        self.sessions = sessions
        self.streams = streams or {}
        self.unverified = unverified
        self.app: App | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> App:
        if self.app is not None:
            return self.app
        async with self._lock:
            if self.app is None:
                store = self.store
                if isinstance(store, str):
                    from ..stores import open_store

                    store = await open_store(store)
                pool = StreamPool(limit=self.buffer, **self.streams)
                service = Service(
                    self.agents,
                    store,
                    buffer=self.buffer,
                    sessions=self.sessions,
                    streams=pool,
                    unverified=self.unverified,
                )
                self.app = App(service, self.auth, self.trace_page)
        return self.app

    @property
    def service(self) -> Service:
        """The service (once the app has started)."""
        if self.app is None:
            raise RuntimeError("the app has not started yet")
        return self.app.service

    def shutting_down(self) -> None:
        """The server is shutting down: end the event streams saying so (:class:`loopwright.serve.Server`)."""
        if self.app is not None:
            self.app.service.shutting_down()

    async def close(self) -> None:
        if self.app is not None:
            await self.app.service.close()
            if isinstance(self.store, str):
                await self.app.service.store.close()
            self.app = None


def _served(agents: Agent | Sequence[Agent], unverified: bool) -> list[Agent]:
    """``app()``'s agents as a list (ConfigurationError: none, or not an Agent; MachineError: a
    machine verify rejects, unless ``unverified``)."""
    served = [agents] if isinstance(agents, Agent) else list(agents)
    if not served:
        raise ConfigurationError("serve.app() needs at least one Agent")
    for a in served:
        if not isinstance(a, Agent):
            raise ConfigurationError(f"serve.app() takes Agents, got {type(a).__name__}")
    if not unverified:
        refuse_unverified(served)
    return served


def app(
    agents: Agent | Sequence[Agent],
    *,
    store: RunStore | str,
    auth: Auth | None = None,
    cors_origins: Sequence[str] = (),
    ui: bool = False,
    trace_page: TracePage | None = None,
    buffer: int = 1000,
    sessions: Any = None,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    buffer_bytes: int = 2**20,
    max_buffered_bytes: int = 64 * 2**20,
    max_streams: int = 1000,
    unverified: bool = False,
) -> Starlette:
    """An ASGI app serving ``agents`` (see the module docstring for its routes).

    ``store``: a RunStore or its URL (``sqlite:///runs.db``, ``postgresql://...``): it keeps
    every run (runs outlive the requests that started them). ``auth``: a function of the
    request giving its user (or None: the request gets 401); each user sees only their own
    runs; without it every client sees every run. ``cors_origins``: origins allowed to call
    the app from a browser (none by default). ``ui``: serve the dev UI at ``/``.
    ``trace_page``: the trace page's renderer for ``/runs/{id}/trace``
    (``loopwright.cli.trace_page.trace_page``). ``buffer``: events a slow client may fall behind
    before it is dropped (told to reconnect with ``Last-Event-ID``). ``sessions``: a session
    store (``SQLiteSessions``, ``PostgresSessions``): ``POST /runs`` may then name the user's
    ``session`` (with ``auth``: a session is a user's), and the run continues it.

    The front door (:mod:`loopwright.serve.guard`): ``allowed_hosts``: the ``Host`` names served
    besides the address the server is reached on (and ``localhost`` forms on a loopback one):
    others get 421; ``"*.example.com"`` admits its subdomains, ``"*"`` any Host (behind a proxy
    that checks it). A request that may change something must come from the server's own
    origin or one of ``cors_origins`` (403) and send its body as ``application/json`` (415).
    ``max_body_bytes``: the largest request body (default 1 MiB; 413 past it).

    Event streams (SSE, AG-UI): ``buffer_bytes``: the bytes a slow client may have buffered
    (default 1 MiB) before it is dropped, as past ``buffer`` events; ``max_buffered_bytes``: all
    clients' buffers together (default 64 MiB; the client whose event would pass it is dropped);
    ``max_streams``: streams open at once (default 1000; 503 past it). Clients that never read
    hold at most ``max_buffered_bytes`` between them (:class:`~loopwright.serve.hub.StreamPool`).

    An agent whose machine :func:`~loopwright.machines.verify` rejects is refused here
    (MachineError, naming the violation) unless ``unverified=True``: its runs then still end by
    their ``timeout_s``, on cancel and at ``Limits.max_transitions`` (``Runner(agent, unverified=True)``)."""
    served = _served(agents, unverified)
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigurationError(
            f"serve.app(max_body_bytes=) takes a whole number of bytes >= 1, got {max_body_bytes!r}"
        )
    hosts = check_hosts(allowed_hosts)
    streams = {"limit_bytes": buffer_bytes, "total_bytes": max_buffered_bytes, "max_streams": max_streams}
    for name, value in (
        ("buffer", buffer),
        ("buffer_bytes", buffer_bytes),
        ("max_buffered_bytes", max_buffered_bytes),
        ("max_streams", max_streams),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"serve.app({name}=) takes a whole number >= 1, got {value!r}")
    lazy = _Lazy(served, store, auth, trace_page, buffer, sessions, streams, unverified)

    @asynccontextmanager
    async def lifespan(starlette: Starlette) -> AsyncIterator[None]:
        await lazy()
        try:
            yield
        finally:
            await lazy.close()

    routes = [
        Route("/agents", _errors(list_agents, lazy), methods=["GET"]),
        Route("/agents/{name}/diagram.svg", _errors(diagram_svg, lazy), methods=["GET"]),
        Route("/agents/{name}/agui", _errors(agui_input, lazy), methods=["POST"]),
        Route("/runs", _errors(start_run, lazy), methods=["POST"]),
        Route("/runs", _errors(list_runs, lazy), methods=["GET"]),
        Route("/runs/{run_id}", _errors(show_run, lazy), methods=["GET"]),
        Route("/runs/{run_id}/events", _errors(events, lazy), methods=["GET"]),
        Route("/runs/{run_id}/agui", _errors(agui, lazy), methods=["GET"]),
        Route("/runs/{run_id}/decisions", _errors(decide, lazy), methods=["POST"]),
        Route("/runs/{run_id}/cancel", _errors(cancel, lazy), methods=["POST"]),
        Route("/runs/{run_id}/pause", _errors(pause, lazy), methods=["POST"]),
        Route("/runs/{run_id}/resume", _errors(resume, lazy), methods=["POST"]),
        Route("/runs/{run_id}/trace", _errors(trace, lazy), methods=["GET"]),
    ]
    if ui:
        routes += [
            Route("/", _errors(ui_page, lazy), methods=["GET"]),
            Route("/ui/{name}", _errors(ui_asset, lazy), methods=["GET"]),
        ]
    door = Middleware(FrontDoor, allowed_hosts=hosts, cors_origins=list(cors_origins), max_body_bytes=max_body_bytes)
    middleware = [door]
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
            )
        )
    starlette = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: not_allowed},
    )
    starlette.state.loopwright = lazy  # (``.service``: the runs and streams, for tests and probes)
    return starlette
