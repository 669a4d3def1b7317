"""The DBOS tests: one DBOS launch on a SQLite file per module (DBOS is one per process)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from loopwright.integrations.dbos import Client


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    from dbos import DBOS  # imported here: a module without the dbos extra skips itself (importorskip)

    from loopwright.integrations import dbos as lw

    db = f"sqlite:///{tmp_path_factory.mktemp('dbos') / 'dbos.sqlite'}"
    for handler in logging.getLogger("dbos").handlers:  # made once per process, maybe on a test's closed capture
        if type(handler) is logging.StreamHandler and getattr(handler.stream, "closed", False):
            handler.stream = sys.__stderr__
    lw.launch(db)
    c = lw.Client(db)
    yield c
    c.close()
    DBOS.destroy()
