"""AnthropicModel's smaller API features over real HTTP against the fake Messages API: Bedrock's
Mantle client, Files API sources, document citations and search_result blocks, the count_tokens
pre-flight, rate-limit headers in errors, and 1-hour cache writes and server tool uses in Usage."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, ConfigurationError, ModelError, Runner, tool
from loopwright.data.events import DocumentPart, ImagePart, Message, ModelRequest, TextPart
from tests.fake_claude import Error, FakeClaude, message, text, tool_use
from tests.models.anthropic.test_anthropic_images import PNG
from tests.models.anthropic.test_anthropic_model import agent, run

FILES = "files-api-2025-04-14"


def test_bedrock_mantle_client_is_accepted(fake: FakeClaude) -> None:
    mantle = getattr(anthropic, "AsyncAnthropicBedrockMantle", None)
    if mantle is None:
        pytest.skip("this anthropic release has no AsyncAnthropicBedrockMantle")
    fake.script.append(message(text("hello from bedrock")))

    async def go() -> Any:
        client = mantle(api_key="k", base_url=fake.base_url, aws_region="us-east-1")
        try:
            model = AnthropicModel("anthropic.claude-opus-4-6-v1:0", client=client, cache=None)
            return await Runner(Agent(name="a", model=model)).run("hi")
        finally:
            await client.close()

    result = asyncio.run(go())
    assert result.outcome == "final", result.error
    assert result.output == "hello from bedrock"


def test_file_id_sources_go_as_files_api_blocks(fake: FakeClaude) -> None:
    fake.script.append(message(text("read")))
    a = agent(fake, options={"betas": [FILES]})
    result = run(a, ["Read these:", DocumentPart(file_id="file_doc", title="Q3", citations=True),
                     ImagePart(file_id="file_img")])  # type: ignore[arg-type]  # fmt: skip
    assert result.outcome == "final", result.error
    content = fake.requests[0]["messages"][0]["content"]
    assert {"type": "document", "source": {"type": "file", "file_id": "file_doc"}, "title": "Q3",
            "citations": {"enabled": True}} in content  # fmt: skip
    assert {"type": "image", "source": {"type": "file", "file_id": "file_img"}} in content


def test_document_citations_are_kept_on_the_reply(fake: FakeClaude) -> None:
    citation = {"type": "char_location", "cited_text": "Revenue grew 8%.", "document_index": 0,
                "document_title": "Q3", "start_char_index": 0, "end_char_index": 16}  # fmt: skip
    fake.script.append(message({"type": "text", "text": "It grew 8%.", "citations": [citation]}))
    result = run(agent(fake), ["How did revenue do?", DocumentPart(text="Revenue grew 8%.", citations=True)])  # type: ignore[arg-type]
    assert result.outcome == "final", result.error
    reply = next(e.response for e in result.events if e.type == "model_responded")
    assert reply.details["citations"] == [citation]


def test_search_result_blocks_from_a_tool_go_to_the_api_as_blocks(fake: FakeClaude) -> None:
    found = {"type": "search_result", "source": "https://kb.example/a", "title": "A",
             "content": [{"type": "text", "text": "A is 1."}], "citations": {"enabled": True}}  # fmt: skip

    @tool
    def search(q: str) -> Any:
        """Search the knowledge base."""
        return [found]

    fake.script += [message(tool_use("t1", "search", {"q": "a"}), stop_reason="tool_use"), message(text("1"))]
    result = run(agent(fake).replace(tools=[search]))
    assert result.outcome == "final", result.error
    block = fake.requests[1]["messages"][-1]["content"][0]
    assert block["type"] == "tool_result" and block["content"] == [found]


def _over_estimate(fake: FakeClaude, preflight: str) -> Any:
    """A run whose second request holds an image: the local estimate counts 1,600 tokens for it,
    the API (the fake) far fewer; 1,500 tokens are allowed in all."""

    @tool
    def screenshot() -> Any:
        """Take a screenshot."""
        return PNG

    fake.script += [message(tool_use("s1", "screenshot", {}), stop_reason="tool_use"), message(text("a dot"))]
    a = agent(fake, limits={"max_total_tokens": 1500}).replace(tools=[screenshot])
    model = a.model
    assert isinstance(model, AnthropicModel)
    model.preflight = preflight  # type: ignore[assignment]
    return run(a)


def test_count_tokens_preflight_asks_the_api_instead_of_estimating(fake: FakeClaude) -> None:
    result = _over_estimate(fake, "count_tokens")
    assert result.outcome == "final", result.error
    assert len(fake.counted) == 2 and fake.counted[1]["messages"] == fake.requests[1]["messages"]


def test_the_estimate_refuses_the_same_request(fake: FakeClaude) -> None:
    result = _over_estimate(fake, "estimate")
    assert result.outcome != "final" and not fake.counted


def test_count_tokens_preflight_refuses_what_the_api_counts_too_large(fake: FakeClaude) -> None:
    fake.script.append(message(text("never")))
    a = agent(fake, limits={"max_total_tokens": 5}, model="claude-opus-4-6")
    model = a.model
    assert isinstance(model, AnthropicModel)
    model.preflight = "count_tokens"
    result = run(a)
    assert result.outcome == "limit" and not fake.requests and fake.counted


def test_preflight_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="preflight must be"):
        AnthropicModel("claude-opus-4-6", preflight="guess")  # type: ignore[arg-type]


def test_rate_limit_headers_are_in_the_error(fake: FakeClaude) -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2026-11-26T20:00:00Z",
    }
    fake.script.append(Error(429, "rate_limit_error", "input tokens per minute exceeded", headers=headers))
    result = run(agent(fake))
    assert result.outcome == "failed" and result.error is not None
    assert "rate limits: input-tokens 0/40000 left, reset 2026-11-26T20:00:00Z; requests 49/50 left" in (
        result.error.message
    )
    failed = [e for e in result.events if e.type == "error_occurred"]
    assert failed and "input-tokens 0/40000 left" in failed[0].error.message


def test_one_hour_cache_writes_and_server_tool_uses_are_counted(fake: FakeClaude) -> None:
    usage = {
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 1},
    }
    fake.script.append(message(text("found"), usage=usage))
    result = run(agent(fake))
    assert result.outcome == "final", result.error
    assert result.usage.cache_creation_tokens == 300
    assert result.usage.cache_creation_1h_tokens == 200
    assert result.usage.server_tool_uses == 3
    assert (result.usage + result.usage).server_tool_uses == 6


def test_every_status_error_carries_the_rate_limits(fake: FakeClaude) -> None:
    headers = {"anthropic-ratelimit-requests-remaining": "7", "anthropic-ratelimit-requests-limit": "50"}
    fake.script.append(Error(401, "authentication_error", "invalid x-api-key", headers=headers))

    async def go() -> ModelError:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
        model = AnthropicModel("claude-opus-4-6", client=client, cache=None)
        try:
            await model.complete(ModelRequest(messages=[Message(role="user", parts=(TextPart(text="hi"),))]))
        except ModelError as exc:
            return exc
        finally:
            await client.close()
        raise AssertionError("no error")

    error = asyncio.run(go())
    assert error.status == 401 and "ANTHROPIC_API_KEY" in str(error)
    assert error.rate_limits == {"requests-remaining": "7", "requests-limit": "50"}  # type: ignore[attr-defined]


def test_one_hour_cache_writes_cost_twice_the_input_price(fake: FakeClaude) -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 300,
             "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}}  # fmt: skip
    fake.script.append({**message(text("cached"), usage=usage), "model": "claude-opus-4-6"})
    result = run(agent(fake, model="claude-opus-4-6"))
    assert result.outcome == "final", result.error
    # opus-4-6: input $5, output $25, a 5-minute write $6.25, a 1-hour write $10 a million tokens
    assert result.usage.cost_usd == Decimal(10 * 5 + 5 * 25 + 100 * 6.25 + 200 * 10) / 1_000_000
