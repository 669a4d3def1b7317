"""``Server``: uvicorn's server that tells the event streams it is shutting down.

uvicorn, told to stop, waits for the requests in progress before the app's lifespan ends; an
event stream following a run that waits for a person would hold it forever, and one cut at the
graceful timeout would just close. This server first ends every stream of a
:func:`loopwright.serve.app` with a ``shutdown`` event (where to resume: its ``Last-Event-ID``),
then shuts down as uvicorn does (the app's lifespan pauses the runs in progress: the next
server resumes them). ``loopwright serve`` runs on it; run yours with
``Server(uvicorn.Config(app, host=..., port=...)).run()``."""

from __future__ import annotations

import socket

from .decisions import STARLETTE_MISSING

try:
    import uvicorn
except ImportError as exc:  # pragma: no cover (the serve extra)
    raise ImportError(STARLETTE_MISSING) from exc


class Server(uvicorn.Server):
    """uvicorn's ``Server``, which first ends the app's event streams with a ``shutdown`` event."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = getattr(getattr(self.config.app, "state", None), "loopwright", None)
        stop = getattr(state, "shutting_down", None)
        if callable(stop):
            stop()
        await super().shutdown(sockets=sockets)


__all__ = ["Server"]
