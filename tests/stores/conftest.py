"""The stores' tests: the tool calls :mod:`tests.store_app`'s agents executed, and the crashes it
was told to stage, are forgotten before each test."""

from __future__ import annotations

import pytest

from tests.store_app import CRASH_AFTER, EXECUTED


@pytest.fixture(autouse=True)
def _fresh_store_app() -> None:
    EXECUTED.clear()
    CRASH_AFTER.clear()
