"""``loopwright serve module:agent [more...] --store URL --port 8000``: the agents behind HTTP
(:mod:`loopwright.serve`) with the dev UI at ``/`` and each run's trace page at
``/runs/{id}/trace``; ``--sessions URL`` keeps users' sessions there (``POST /runs`` with a
``session``: :func:`loopwright.serve.app`'s ``sessions=``). An agent whose machine ``verify``
rejects is refused (exit 2) unless given ``--unverified``. Needs the ``serve`` extra
(``pip install 'loopwright[serve]'``).

The front door (:mod:`loopwright.serve.guard`): ``--auth module:function`` or ``--token-env
VAR`` (a bearer token), ``--allowed-host``, ``--allowed-origin``, ``--max-body-bytes``; it
refuses to listen on a non-loopback address without auth unless given ``--insecure-no-auth``."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ..data.errors import ConfigurationError
from ..runtime.agent import Agent
from ..serve.guard import MAX_BODY_BYTES, bearer_token, is_loopback


def add_command(sub: Any) -> None:
    """Register ``loopwright serve`` on the CLI's subparsers."""
    command = sub.add_parser("serve", help="serve agents over HTTP with a dev UI (pip install 'loopwright[serve]')")
    command.add_argument("targets", nargs="+", metavar="module:agent", help="the Agents to serve, as module:attr")
    command.add_argument(
        "--store",
        default="sqlite:///loopwright-runs.db",
        help="where runs are kept (default: sqlite:///loopwright-runs.db)",
    )
    command.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    command.add_argument("--port", type=int, default=8000, help="the port to listen on (default: 8000)")
    command.add_argument("--no-ui", dest="ui", action="store_false", help="the API alone, without the dev UI at /")
    command.add_argument(
        "--sessions",
        metavar="URL",
        help="keep users' sessions here (sqlite:///sessions.db, postgresql://...): POST /runs may name a session",
    )
    command.add_argument(
        "--unverified",
        action="store_true",
        help="serve an agent whose machine verify rejects (a run still ends by its timeout_s, on cancel and "
        "at Limits.max_transitions); without it such an agent is refused",
    )
    command.add_argument(
        "--a2a",
        metavar="module:agent",
        help="also serve this Agent over A2A at /a2a/ (its card: /a2a/.well-known/agent-card.json; "
        "pip install 'loopwright[a2a]'; docs/guide/a2a.md)",
    )
    command.add_argument("--a2a-url", metavar="URL", help="the A2A URL the card names (default: http://HOST:PORT/a2a/)")
    door = command.add_argument_group("the front door (docs/guide/deploying.md)")
    door.add_argument(
        "--auth",
        metavar="module:function",
        help="the auth hook: a function of the request giving its user (or None: 401); each user sees their own runs",
    )
    door.add_argument(
        "--token-env",
        metavar="VAR",
        help="a bearer token read from the environment variable VAR: each request sends "
        "'Authorization: Bearer <token>' (the dev UI: open it at /#token=<token>)",
    )
    door.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name served besides the address listened on (repeat it; '*.example.com', '*' any): "
        "the name clients or a proxy use",
    )
    door.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an origin (https://ui.example.com) whose pages may call the API from a browser (CORS; repeat it)",
    )
    door.add_argument(
        "--max-body-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        metavar="N",
        help=f"the largest request body, in bytes (default {MAX_BODY_BYTES}: 1 MiB)",
    )
    door.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="listen on a non-loopback address without --auth or --token-env (something in front does auth)",
    )
    command.set_defaults(handler=run_command)


def run_command(args: Any) -> int:
    """0 when the server stopped, 2 for bad input (one line on standard error)."""
    try:
        auth = _auth(args)
        if args.max_body_bytes < 1:
            raise ConfigurationError(f"--max-body-bytes takes a number of bytes >= 1, got {args.max_body_bytes}")
        agents = [_agent(target) for target in args.targets]
        options: dict[str, Any] = {}
        if args.sessions:
            from ..stores.sessions import open_sessions

            options["sessions"] = open_sessions(args.sessions)
        server_app = dev_app(
            agents,
            store=args.store,
            ui=args.ui,
            auth=auth,
            allowed_hosts=args.allowed_host,
            cors_origins=args.allowed_origin,
            max_body_bytes=args.max_body_bytes,
            unverified=args.unverified,
            **options,
        )
        if args.a2a:
            server_app = _with_a2a(server_app, args, auth, options.get("sessions"))
        import uvicorn
    except ImportError as exc:
        if "a2a" in str(exc):
            print(f"loopwright serve: {exc}", file=sys.stderr)
            return 2
        print("loopwright serve: Starlette and uvicorn are missing: pip install 'loopwright[serve]'", file=sys.stderr)
        return 2
    except (LookupError, ConfigurationError) as exc:
        print(f"loopwright serve: {exc.args[0]}", file=sys.stderr)
        return 2
    open_door = "" if auth is not None or is_loopback(args.host) else " (without auth: --insecure-no-auth)"
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"loopwright serve: {', '.join(a.name for a in agents)} on http://{where}:{args.port}/{open_door}", flush=True
    )
    from ..serve.server import Server

    # (loopwright's uvicorn server: its event streams end with a "shutdown" event when it stops)
    Server(uvicorn.Config(server_app, host=args.host, port=args.port, log_level="warning")).run()
    return 0


def _auth(args: Any) -> Any:
    """The auth hook the options name (None: none); ConfigurationError for a server that would
    listen beyond this machine with none, unless ``--insecure-no-auth``."""
    if args.auth and args.token_env:
        raise ConfigurationError("give one of --auth and --token-env, not both")
    auth: Any = None
    if args.token_env:
        token = os.environ.get(args.token_env, "")
        if not token.strip():
            raise ConfigurationError(
                f"--token-env {args.token_env}: the environment variable {args.token_env} is unset or empty; "
                "set it to a long random secret (python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        auth = bearer_token(token.strip())
    elif args.auth:
        auth = _hook(args.auth)
    if auth is None and not args.insecure_no_auth and not is_loopback(args.host):
        raise ConfigurationError(
            f"{args.host} is not a loopback address and this server has no auth: anyone who reaches it could "
            "start runs and approve their calls; give --auth module:function or --token-env VAR, or "
            "--insecure-no-auth if something in front of the server (a proxy, a firewall) does that job"
        )
    return auth


def _with_a2a(http_app: Any, args: Any, auth: Any, sessions: Any) -> Any:
    """The HTTP app with ``--a2a``'s agent mounted beside it at ``/a2a`` (the same store, the
    same auth hook: a user's runs are theirs over both)."""
    from contextlib import AsyncExitStack, asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from ..integrations.a2a import a2a_app

    where = f"[{args.host}]" if ":" in args.host else args.host
    url = args.a2a_url or f"http://{where}:{args.port}/a2a/"
    a2a = a2a_app(_agent(args.a2a), store=args.store, url=url, sessions=sessions, auth=auth)

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with AsyncExitStack() as stack:
            for inner in (http_app, a2a):
                await stack.enter_async_context(inner.router.lifespan_context(inner))
            yield

    return Starlette(routes=[Mount("/a2a", app=a2a), Mount("/", app=http_app)], lifespan=lifespan)


def dev_app(agents: list[Agent], *, store: Any, ui: bool = True, **options: Any) -> Any:
    """:func:`loopwright.serve.app` with the dev UI and the trace pages (the CLI's floor draws them)."""
    from ..serve import app
    from .trace_page import trace_page

    return app(agents, store=store, ui=ui, trace_page=trace_page, **options)


def _hook(target: str) -> Any:
    """The auth hook ``module:function`` names (not called: it is called with each request)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ConfigurationError(f"--auth takes module:function, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's own folder, as `python -m` does
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise ConfigurationError(f"--auth {target}: cannot import {module} ({exc})") from None
    except AttributeError:
        raise ConfigurationError(f"--auth {target}: {module} has no {name}") from None
    if not callable(found):
        raise ConfigurationError(f"--auth {target} is not a function of the request (it is a {type(found).__name__})")
    return found


def _agent(target: str) -> Agent:
    from ..machines.verify import load_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's own folder, as `python -m` does
    found = load_target(target)
    if not isinstance(found, Agent):
        raise ConfigurationError(f"{target} is not an Agent (it is a {type(found).__name__}); name an Agent to serve")
    return found


__all__ = ["add_command", "dev_app", "run_command"]
