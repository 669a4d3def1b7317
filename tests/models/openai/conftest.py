"""The OpenAI adapter's tests: here ``fake`` is the OpenAI fake server (tests/conftest.py's ``openai_fake``)."""

from __future__ import annotations

import pytest

from tests.fake_openai import FakeOpenAI


@pytest.fixture
def fake(openai_fake: FakeOpenAI) -> FakeOpenAI:
    return openai_fake
