"""The adapter conformance kit (loopwright.testing.adapter_kit) passes for AnthropicModel,
OpenAIModel (Responses and Chat) and GeminiModel over real HTTP, and fails adapters with planted
faults."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from loopwright import ModelError, ModelRequest, ModelResponse, ToolCall
from loopwright.models.openai import OpenAIModel
from loopwright.testing import adapter_kit
from loopwright.testing.adapter_kit import AdapterConformance, AdapterHarness, check_adapter
from tests.adapter_harnesses import ClaudeHarness, OpenAIHarness, QuirkyGeminiHarness
from tests.fake_claude import FakeClaude
from tests.fake_gemini import FakeGemini
from tests.fake_openai import FakeOpenAI


class _SlowProperty(AdapterConformance):
    @pytest.mark.slow
    def test_stream_equals_complete_property(self, harness: AdapterHarness) -> None:
        super().test_stream_equals_complete_property(harness)  # a dozen runs over HTTP: seconds

    @pytest.mark.slow
    def test_errors_mapped(self, harness: AdapterHarness) -> None:
        super().test_errors_mapped(harness)  # every error status over HTTP, with retry waits: ~0.5 s


class TestAnthropicConforms(_SlowProperty):
    @pytest.fixture
    def harness(self) -> Iterator[AdapterHarness]:
        with FakeClaude() as fake:
            yield ClaudeHarness(fake)


class TestOpenAIResponsesConforms(_SlowProperty):
    @pytest.fixture
    def harness(self) -> Iterator[AdapterHarness]:
        with FakeOpenAI() as fake:
            yield OpenAIHarness(fake, "responses")


class TestOpenAIChatConforms(_SlowProperty):
    @pytest.fixture
    def harness(self) -> Iterator[AdapterHarness]:
        with FakeOpenAI() as fake:
            yield OpenAIHarness(fake, "chat")


class TestGeminiConforms(_SlowProperty):
    @pytest.fixture
    def harness(self) -> Iterator[AdapterHarness]:
        with FakeGemini() as fake:
            yield QuirkyGeminiHarness(fake)


# ---------------------------------------------------------------- planted faults


class DropsCallIds(OpenAIModel):
    """A broken adapter: it drops the API's tool call ids (each call gets a fresh one)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        parts = tuple(ToolCall(name=p.name, args=p.args) if isinstance(p, ToolCall) else p for p in response.parts)
        return response.model_copy(update={"parts": parts})


class SwallowsRateLimits(OpenAIModel):
    """A broken adapter: a 429 comes out as an error a retry cannot fix."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            return await super().complete(request)
        except ModelError as exc:
            if exc.status == 429:
                raise ModelError(exc.message, status=429, retryable=False) from exc
            raise


def _kit(model_class: type[OpenAIModel], check: str | None = None) -> Any:
    with FakeOpenAI() as fake:
        harness = OpenAIHarness(fake, "chat", model_class)
        if check is None:
            return asyncio.run(check_adapter(harness))
        return asyncio.run(adapter_kit.CHECKS[check](harness))


@pytest.mark.slow
def test_a_dropped_tool_call_id_fails_the_kit() -> None:
    with pytest.raises(
        AssertionError, match=r"DropsCallIds \(chat\) fails tool_round_trip: the reply.s call came out as"
    ):
        _kit(DropsCallIds, "tool_round_trip")
    with pytest.raises(AssertionError, match="parallel_calls_in_order"):  # check_adapter lists every failure
        _kit(DropsCallIds)


def test_a_swallowed_429_fails_the_kit() -> None:
    with pytest.raises(AssertionError, match=r"fails errors_mapped: a 429 came out with retryable=False"):
        _kit(SwallowsRateLimits, "errors_mapped")


@pytest.mark.slow
def test_the_sound_adapter_passes_check_adapter_whole() -> None:
    _kit(OpenAIModel)


def test_every_check_has_its_pytest_test() -> None:
    tests = set(adapter_kit._names())
    assert set(adapter_kit.CHECKS) <= tests


def test_check_adapter_names_an_unknown_skip() -> None:
    with pytest.raises(ValueError, match="no such check"):
        asyncio.run(check_adapter(object(), skip=["nope"]))  # type: ignore[arg-type]


# ---------------------------------------------------------------- server quirks


def test_a_chat_model_that_does_not_send_reasoning_back_fails_the_kit() -> None:
    with FakeOpenAI() as fake:
        harness = OpenAIHarness(fake, "chat", send_reasoning=False)
        with pytest.raises(
            AssertionError, match=r"fails reasoning_returned: the run ended 'failed'.*reasoning_content"
        ):
            asyncio.run(adapter_kit.CHECKS["reasoning_returned"](harness))


def test_a_quirk_an_api_cannot_send_is_not_applicable_saying_why() -> None:
    with (
        FakeClaude() as fake,
        pytest.raises(adapter_kit.NotApplicable, match="cannot occur on AnthropicModel: every reply carries usage"),
    ):
        asyncio.run(adapter_kit.CHECKS["no_usage"](ClaudeHarness(fake)))


class _Plain(OpenAIHarness):
    cannot_send = None  # type: ignore[assignment]  # a harness written before the quirks


def test_a_harness_without_quirks_says_so_rather_than_passing() -> None:
    with FakeOpenAI() as fake, pytest.raises(adapter_kit.NotApplicable, match="scripts no server quirks"):
        asyncio.run(adapter_kit.CHECKS["calls_without_ids"](_Plain(fake, "chat")))


@pytest.mark.slow
def test_check_adapter_returns_the_cases_that_do_not_apply() -> None:
    with FakeOpenAI() as fake:
        skipped = asyncio.run(check_adapter(OpenAIHarness(fake, "responses")))
    assert sorted(skipped) == ["calls_without_ids", "calls_without_index", "no_usage", "object_arguments"]
    assert "function_call arguments are always a JSON string" in skipped["object_arguments"]
