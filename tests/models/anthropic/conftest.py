"""The Claude adapter's tests: ``fake`` is the Claude fake server (tests/conftest.py); ``env``
points the clients AnthropicModel makes itself at it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fake_claude import FakeClaude


@pytest.fixture
def env(fake: FakeClaude, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    """Own clients (made by AnthropicModel) find the fake through the environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    return fake
