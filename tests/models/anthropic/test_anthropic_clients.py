"""AnthropicModel in production over real HTTP (tests/fake_claude.py): output budgets that need
streaming, clients that close with their event loop, passed clients and factories, cloud
clients, current model names and deprecation warnings, options checked at construction."""

from __future__ import annotations

import asyncio
import gc
import os
import warnings
from pathlib import Path
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, ConfigurationError, Limits, Runner, RunResult
from loopwright.data.events import ModelRequest, ModelResponse, TextPart
from loopwright.models.anthropic import model as anthropic_model
from loopwright.models.anthropic.facts import CURRENT, facts_for
from tests import ROOT
from tests.fake_claude import FakeClaude, message, text


def hi() -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "parts": [TextPart(text="hi")]}])  # type: ignore[list-item]


def complete(model: AnthropicModel, request: ModelRequest) -> ModelResponse:
    async def go() -> ModelResponse:
        try:
            return await model.complete(request)
        finally:
            await model.aclose()

    return asyncio.run(go())


def run_sync(model: AnthropicModel, text_: str = "hi", **limits: Any) -> RunResult:
    return Runner(Agent(name="a", model=model, limits=Limits(retry_backoff_s=0, **limits))).run_sync(text_)


# ---------------------------------------------------------------- output budget


def test_a_current_models_full_output_budget_works_through_complete(env: FakeClaude) -> None:
    """The SDK refuses a non-streamed request above ~21,333 max_tokens; complete() streams."""
    env.script.append(message(text("A long essay.")))
    model = AnthropicModel(CURRENT)
    assert model.max_tokens == facts_for(CURRENT).max_output == 128_000
    assert complete(model, hi()).text == "A long essay."
    assert env.requests[0]["max_tokens"] == 128_000 and env.requests[0]["stream"] is True


def test_max_tokens_defaults_per_model_and_is_checked() -> None:
    assert AnthropicModel("claude-opus-5-5").max_tokens == 128_000
    assert AnthropicModel("anthropic.claude-haiku-4-5-20251001-v1:0").max_tokens == 64_000  # Bedrock's spelling
    assert AnthropicModel("claude-opus-4-6@20260205").max_tokens == 128_000  # Vertex's
    assert AnthropicModel("my-proxy-alias").max_tokens == 16_384  # unknown: a modest default
    with pytest.raises(ConfigurationError, match=r"claude-sonnet-5-5 writes at most 128000 output tokens"):
        AnthropicModel("claude-sonnet-5-5", max_tokens=128_001)
    with pytest.raises(ConfigurationError, match="max_tokens must be a positive int"):
        AnthropicModel(CURRENT, max_tokens=0)


# ---------------------------------------------------------------- clients


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts open files through /proc")
def test_own_clients_are_closed_when_their_loop_ends_200_run_sync_calls(env: FakeClaude) -> None:
    model = AnthropicModel(CURRENT)
    env.script += [message(text("ok"))] * 201
    assert run_sync(model).output == "ok"  # warm up: imports, the server's first thread
    gc.collect()
    before = _fds()
    for _ in range(200):
        assert run_sync(model).outcome == "final"
    gc.collect()
    grown = _fds() - before
    print(f"\nfd count: {before} before, {before + grown} after 200 run_sync calls (+{grown})")
    assert grown <= 5


def test_a_passed_client_used_from_a_new_event_loop_is_a_clear_error_not_retried(fake: FakeClaude) -> None:
    fake.script += [message(text("one")), message(text("two"))]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key")
    model = AnthropicModel(CURRENT, client=client)
    assert run_sync(model, max_model_retries=3).output == "one"
    second = run_sync(model, max_model_retries=3)  # run_sync starts a new event loop
    assert second.outcome == "failed" and second.error is not None and not second.error.retryable
    assert "first used in another event loop" in second.error.message
    assert "client=lambda: anthropic.AsyncAnthropic(...)" in second.error.message
    assert second.trace.count("reason") == 1 and len(fake.requests) == 1


def test_a_client_factory_gives_each_loop_its_own_client_and_closes_it(fake: FakeClaude) -> None:
    fake.script += [message(text("one")), message(text("two"))]
    made: list[anthropic.AsyncAnthropic] = []

    def factory() -> anthropic.AsyncAnthropic:
        made.append(anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=4))
        return made[-1]

    model = AnthropicModel(CURRENT, client=factory)
    assert [run_sync(model).output, run_sync(model).output] == ["one", "two"]
    assert len(made) == 2 and all(c.is_closed() for c in made)
    assert [h["x-stainless-retry-count"] for h in fake.headers] == ["0", "0"]


def test_vertex_and_bedrock_clients_are_accepted(fake: FakeClaude) -> None:
    fake.script.append(message(text("from vertex")))
    vertex = anthropic.AsyncAnthropicVertex(
        region="us-east5", project_id="p", access_token="token", base_url=f"{fake.base_url}/vertex"
    )
    model = AnthropicModel("claude-opus-4-6@20260205", client=vertex, cache="1h")

    async def go() -> ModelResponse:
        try:
            return await model.complete(hi())
        finally:
            await vertex.close()

    assert asyncio.run(go()).text == "from vertex"
    assert fake.paths[0].endswith("/models/claude-opus-4-6@20260205:streamRawPredict")
    sent = fake.requests[0]["messages"][0]["content"][0]
    assert sent["cache_control"] == {"type": "ephemeral", "ttl": "1h"}  # block-level: the clouds take it
    bedrock = anthropic.AsyncAnthropicBedrock(aws_region="us-east-1", aws_access_key="k", aws_secret_key="s")
    assert AnthropicModel("anthropic.claude-opus-4-6-v1:0", client=bedrock).max_tokens == 128_000
    with pytest.raises(ConfigurationError, match="client must be an anthropic async client"):
        AnthropicModel(CURRENT, client=object())  # type: ignore[arg-type]


# ---------------------------------------------------------------- current models


def test_docs_and_messages_name_a_current_model() -> None:
    old = "claude-sonnet-4-5"
    assert facts_for(CURRENT).deprecated is None and facts_for(CURRENT).known
    for path in ("README.md", "engine/cli/app.py", "engine/models/anthropic/model.py", "tests/cli/test_cli.py"):
        assert old not in (ROOT / path).read_text(), f"{path} still names {old}"
    with pytest.raises(ConfigurationError, match=CURRENT):
        AnthropicModel("")


def test_a_deprecated_model_warns_where_users_see_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # a model only the installed SDK's list deprecates (the list changes from release to release:
    # 2.14 dropped the retired claude-3-7-sonnet; with none of that kind, one entry of its form)
    sdk_list = anthropic_model._SDK_DEPRECATED
    sdk_only = next((m for m in sdk_list if facts_for(m).deprecated is None), None)
    if sdk_only is None:
        sdk_only = "claude-retired-1-20250101"
        monkeypatch.setitem(sdk_list, sdk_only, "January 1st, 2030")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # Python's own filters: DeprecationWarning would be hidden
        AnthropicModel("claude-sonnet-4-5")  # deprecated in loopwright's own table
        AnthropicModel(sdk_only)
        AnthropicModel(CURRENT)
    assert [w.category for w in seen] == [FutureWarning, FutureWarning]
    assert "end of life on November 30th, 2026" in str(seen[0].message) and CURRENT in str(seen[0].message)
    assert f"end of life on {sdk_list[sdk_only]}" in str(seen[1].message)


def test_a_retired_model_says_so_and_a_deprecated_base_id_is_recognised_in_every_spelling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """claude-mythos-preview's end of life is past: the warning says it is retired (it spoke of
    the date as still to come); claude-opus-4-5's deprecation (the SDK lists its base id) is
    recognised on Vertex and Bedrock spellings too (it was missed)."""
    # the SDK's list as 2.14 has it (older releases lack the entry)
    monkeypatch.setitem(anthropic_model._SDK_DEPRECATED, "claude-opus-4-5", "January 22nd, 2027")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        AnthropicModel("claude-mythos-preview")
        AnthropicModel("claude-opus-4-5@20251101")
        AnthropicModel("anthropic.claude-opus-4-5-v1:0")
    assert [w.category for w in seen] == [FutureWarning] * 3
    assert "reached end of life on June 30th, 2026 (retired)" in str(seen[0].message)
    assert all("end of life on January 22nd, 2027" in str(w.message) for w in seen[1:])


# ---------------------------------------------------------------- options


def test_unknown_options_are_refused_at_construction_with_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        AnthropicModel(CURRENT, temprature=0.5)
    assert "unknown option(s) 'temprature'" in str(caught.value) and "stop_sequences" in str(caught.value)
    with pytest.raises(ConfigurationError, match=r"'messages' \(messages is set by loopwright itself\)"):
        AnthropicModel(CURRENT, messages=[])


def test_betas_travel_as_the_header_not_in_the_body(env: FakeClaude) -> None:
    env.script.append(message(text("ok")))
    complete(AnthropicModel(CURRENT, betas=["context-1m-2025-08-07", "files-api-2025-04-14"]), hi())
    assert env.headers[0]["anthropic-beta"] == "context-1m-2025-08-07,files-api-2025-04-14"
    assert "betas" not in env.requests[0]


def test_sampling_parameters_a_model_refuses_are_dropped_with_a_warning(env: FakeClaude) -> None:
    env.script += [message(text("ok")), message(text("ok"))]
    with pytest.warns(UserWarning, match=r"claude-opus-5-5 does not accept temperature, top_k"):
        model = AnthropicModel("claude-opus-5-5", temperature=0.2, top_k=5, stop_sequences=["END"])
    complete(model, hi())
    assert "temperature" not in env.requests[0] and "top_k" not in env.requests[0]
    assert env.requests[0]["stop_sequences"] == ["END"]
    complete(AnthropicModel("claude-sonnet-4-6", temperature=0.2), hi())  # a model that takes it
    assert env.requests[1]["temperature"] == 0.2


def test_a_misspelt_model_setting_fails_the_run_before_any_request(env: FakeClaude) -> None:
    agent = Agent(
        name="a", model=AnthropicModel(CURRENT), model_settings={"max_token": 10}, limits=Limits(retry_backoff_s=0)
    )
    result = Runner(agent).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "the agent's model_settings got unknown option(s) 'max_token'" in result.error.message
    assert env.requests == []
