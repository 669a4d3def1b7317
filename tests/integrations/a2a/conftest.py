"""Fixtures of the A2A tests: a uvicorn server on a port chosen first (the agent card names its URL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.serve_agents import free_port


@contextmanager
def serving_at(make: Any) -> Iterator[str]:
    """Run the ASGI app ``make(url)`` on uvicorn on 127.0.0.1 in a thread; its URL (ending in /)."""
    import uvicorn

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = uvicorn.Server(uvicorn.Config(make(url), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=20)
