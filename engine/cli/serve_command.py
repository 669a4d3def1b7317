"""``loopwright serve module:agent [more...] --store URL --port 8000``: the agents behind HTTP
(:mod:`loopwright.serve`) with the dev UI at ``/`` and each run's trace page at
``/runs/{id}/trace``; ``--sessions URL`` keeps users' sessions there (``POST /runs`` with a
``session``: :func:`loopwright.serve.app`'s ``sessions=``). Needs the ``serve`` extra
(``pip install 'loopwright[serve]'``)."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..data.errors import ConfigurationError
from ..runtime.agent import Agent


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
    command.set_defaults(handler=run_command)


def run_command(args: Any) -> int:
    """0 when the server stopped, 2 for bad input (one line on standard error)."""
    try:
        agents = [_agent(target) for target in args.targets]
        options: dict[str, Any] = {}
        if args.sessions:
            from ..stores.sessions import open_sessions

            options["sessions"] = open_sessions(args.sessions)
        server_app = dev_app(agents, store=args.store, ui=args.ui, **options)
        import uvicorn
    except ImportError:
        print("loopwright serve: Starlette and uvicorn are missing: pip install 'loopwright[serve]'", file=sys.stderr)
        return 2
    except (LookupError, ConfigurationError) as exc:
        print(f"loopwright serve: {exc.args[0]}", file=sys.stderr)
        return 2
    print(f"loopwright serve: {', '.join(a.name for a in agents)} on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(server_app, host=args.host, port=args.port, log_level="warning")
    return 0


def dev_app(agents: list[Agent], *, store: Any, ui: bool = True, **options: Any) -> Any:
    """:func:`loopwright.serve.app` with the dev UI and the trace pages (the CLI's floor draws them)."""
    from ..serve import app
    from .trace_page import trace_page

    return app(agents, store=store, ui=ui, trace_page=trace_page, **options)


def _agent(target: str) -> Agent:
    from ..machines.verify import load_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's own folder, as `python -m` does
    found = load_target(target)
    if not isinstance(found, Agent):
        raise ConfigurationError(f"{target} is not an Agent (it is a {type(found).__name__}); name an Agent to serve")
    return found


__all__ = ["add_command", "dev_app", "run_command"]
