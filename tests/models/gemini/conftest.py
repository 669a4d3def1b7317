"""The Gemini adapter's tests: here ``fake`` is the Gemini fake server (tests/fake_gemini.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_gemini import FakeGemini


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server
