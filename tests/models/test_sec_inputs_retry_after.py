"""A hostile ``Retry-After`` (issue 42, S13): a server that answers 429 with ``Retry-After:
99999999`` (or a date a year ahead, or Gemini's ``RetryInfo`` of as long) made a run sleep to its
deadline in all three adapters. A wait past :data:`MAX_RETRY_AFTER_S` is not honoured: the error
says what the server asked and the maximum, is retryable (the app may try later), and the run's
retries back off as for any other error, so the run ends promptly. Over real HTTP against the fake
servers; the sleeps the run asks for are counted, not timed."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from loopwright import Agent, AnthropicModel, Limits, Runner
from loopwright.models.gemini import GeminiModel
from loopwright.models.http_errors import MAX_RETRY_AFTER_S
from loopwright.models.openai import OpenAIModel
from tests import fake_claude as fc
from tests import fake_gemini as fg
from tests import fake_openai as fo


@dataclass
class Provider:
    fake: Callable[[], AbstractContextManager[Any]]
    model: Callable[[str], Any]
    ok: Callable[[str], Any]
    busy: Callable[[str], Any]


PROVIDERS = {
    "claude": Provider(
        fc.FakeClaude,
        lambda url: AnthropicModel(
            "claude-test", max_tokens=64, cache=None, client=lambda: anthropic.AsyncAnthropic(base_url=url, api_key="k")
        ),
        lambda text: fc.message(fc.text(text)),
        lambda after: fc.Error(429, "rate_limit_error", "slow down", retry_after=after),
    ),
    "openai": Provider(
        fo.FakeOpenAI,
        lambda url: OpenAIModel("gpt-5.5", client=lambda: openai.AsyncOpenAI(base_url=url, api_key="k")),
        lambda text: fo.response(fo.text(text)),
        lambda after: fo.Error(429, "slow down", kind="rate_limit_error", retry_after=after),
    ),
    "gemini": Provider(
        fg.FakeGemini,
        lambda url: GeminiModel(
            fg.MODEL, client=lambda: genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=url))
        ),
        lambda text: fg.reply(fg.text(text)),
        lambda after: fg.Error(429, "slow down", retry_after=after),
    ),
}


@pytest.fixture(params=sorted(PROVIDERS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Provider, Any]]:
    provider = PROVIDERS[request.param]
    with provider.fake() as fake:
        yield provider, fake


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the reason stage asks for before a retry (recorded, not slept)."""
    import asyncio
    import importlib
    import types

    reason = importlib.import_module("loopwright.states.reason")  # (the package's `reason` is the handler)
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(reason, "asyncio", types.SimpleNamespace(sleep=sleep))
    return asked


def _agent(model: Any, retries: int = 2) -> Agent:
    return Agent(name="a", model=model, limits=Limits(max_model_retries=retries, retry_backoff_s=0.01, timeout_s=120))


def _a_year_ahead() -> str:
    return email.utils.formatdate(time.time() + 365 * 86400, usegmt=True)


@pytest.mark.parametrize("header", ["99999999", "year"])
def test_a_huge_retry_after_ends_the_run_promptly_with_a_clear_retryable_error(
    served: tuple[Provider, Any], sleeps: list[float], header: str
) -> None:
    provider, fake = served
    after = _a_year_ahead() if header == "year" else header
    fake.script += [provider.busy(after) for _ in range(3)]
    result = Runner(_agent(provider.model(fake.base_url))).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None, result
    error = result.error
    assert error.status == 429 and error.retryable and error.retry_after is None, error
    assert f"longer than the {MAX_RETRY_AFTER_S:g} s loopwright waits at most" in error.message, error.message
    if header != "year":
        assert "asked to wait 99999999 s" in error.message, error.message
    assert len(fake.requests) == 3  # the first call and two retries, each after the usual backoff
    assert sleeps and max(sleeps) < 1, sleeps  # never a sleep toward the deadline


def test_a_retry_after_within_the_maximum_is_still_honoured(served: tuple[Provider, Any], sleeps: list[float]) -> None:
    provider, fake = served
    fake.script += [provider.busy("7"), provider.ok("back")]
    result = Runner(_agent(provider.model(fake.base_url))).run_sync("hi")
    assert result.outcome == "final" and result.output == "back"
    assert sleeps == [7.0]


def test_a_huge_gemini_retry_info_is_capped_too(sleeps: list[float]) -> None:
    with fg.FakeGemini() as fake:
        fake.script += [fg.Error(429, "quota", retry_delay="99999999s") for _ in range(2)]
        result = Runner(_agent(PROVIDERS["gemini"].model(fake.base_url), retries=1)).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None and result.error.retry_after is None
    assert "asked to wait 99999999 s" in result.error.message and result.error.retryable
    assert sleeps and max(sleeps) < 1, sleeps


def test_the_maximum_is_a_minute() -> None:
    assert MAX_RETRY_AFTER_S == 60.0
