"""loopwright behind HTTP: ``loopwright.serve.app(agents, store=...)`` is an ASGI app (Starlette)
to run with uvicorn or mount in a Starlette/FastAPI app; ``loopwright serve module:agent`` runs
it with the dev UI. Needs the ``serve`` extra: ``pip install 'loopwright[serve]'``.

Modules: :mod:`~loopwright.serve.service` (what the routes do, without HTTP: runs started,
followed, decided, cancelled), :mod:`~loopwright.serve.hub` (one run's events fanned out to
its clients, each with a bounded buffer), :mod:`~loopwright.serve.agui` (events as AG-UI
events), :mod:`~loopwright.serve.http` (the routes, the auth hook, SSE),
:mod:`~loopwright.serve.guard` (the front door: Host, Origin, JSON bodies, body size, bearer
tokens), :mod:`~loopwright.serve.server` (uvicorn's server, which ends the event streams
with a ``shutdown`` event before it stops); ``static/``: the dev UI. Deploying it: ``docs/guide/deploying.md``.
"""

from __future__ import annotations

from typing import Any

from ..data.exports import lazy_exports as _lazy_exports


def app(*args: Any, **kwargs: Any) -> Any:
    """The ASGI app: see :func:`loopwright.serve.http.app` (imported here on first use, so
    ``import loopwright.serve`` needs no Starlette)."""
    from .http import app as make

    return make(*args, **kwargs)


__getattr__, __dir__ = _lazy_exports(__name__, {"Server": ".server"})
"""``Server`` is imported on first use (it needs uvicorn)."""

__all__ = ["Server", "app"]
