"""A request the model refuses to send because it is larger than what is left of
``max_total_tokens`` spends the token budget: over real HTTP (tests/fake_claude.py) the run goes
``reason -> salvage`` (salvage on; what the refused request would have added is left out, and the
salvage call fits in what is left) or ``reason -> done`` with outcome ``limit`` (salvage off) —
never ``failed``, and no request over the budget is ever sent."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

from loopwright import Agent, AnthropicModel, Limits, Runner, RunResult, ScriptedModel, tool
from loopwright.data.errors import TokenBudgetError
from loopwright.data.events import ToolResult
from loopwright.states.salvage import LEFT_OUT
from loopwright.table.machine import CORE
from tests.fake_claude import FakeClaude, message, text, tool_use

PAGE = "lorem ipsum dolor sit amet " * 2_000  # 54,000 characters: about 13,500 tokens by the estimate


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return PAGE


def run(fake: FakeClaude, text_: str = "Summarise example.com", **limits: Any) -> RunResult:
    async def go() -> RunResult:
        async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0) as client:
            model = AnthropicModel("claude-sonnet-5-5", max_tokens=512, client=client, cache=None)
            agent = Agent(name="reader", model=model, tools=[fetch], limits=Limits(retry_backoff_s=0, **limits))
            return await Runner(agent).run(text_)

    return asyncio.run(go())


def test_a_tool_result_too_large_for_the_budget_ends_in_salvage_not_failed(fake: FakeClaude) -> None:
    fake.script += [
        message(tool_use("f1", "fetch", {"url": "https://example.com"}), stop_reason="tool_use"),
        message(text("It is a placeholder page; I could not read all of it.")),
    ]
    result = run(fake, max_total_tokens=2_000)
    assert result.outcome == "salvaged" and result.limit == "max_total_tokens"
    assert result.output == "It is a placeholder page; I could not read all of it."
    assert result.trace[-3:] == ["reason", "salvage", "done"] and "failed" not in result.trace
    refusal = [e.error for e in result.events if e.type == "error_occurred"]
    assert len(refusal) == 1 and refusal[0].kind == "token_budget" and "it was not sent" in refusal[0].message
    limit = next(e for e in result.events if e.type == "limit_reached")
    assert limit.limit == "max_total_tokens" and limit.value == 2_000
    # two requests went out: the first, and the salvage call with the page left out (it fits)
    assert len(fake.requests) == 2
    last = fake.requests[1]["messages"][-1]  # one user turn: the tool's answer, then salvage's prompt
    answered, prompt = last["content"]
    assert answered["type"] == "tool_result" and answered["tool_use_id"] == "f1" and answered["is_error"] is True
    assert answered["content"] == LEFT_OUT.format(size=len(PAGE))
    assert "You have run out of tokens (max_total_tokens=2000)" in prompt["text"]
    assert "lorem ipsum" not in str(fake.requests[1])
    # the history keeps what the tool returned: only the salvage request left it out
    kept = [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert [p.content for p in kept] == [PAGE]


def test_without_salvage_it_ends_with_the_limit_not_failed(fake: FakeClaude) -> None:
    fake.script += [message(tool_use("f1", "fetch", {"url": "https://example.com"}), stop_reason="tool_use")]
    result = run(fake, max_total_tokens=2_000, salvage=False)
    assert result.outcome == "limit" and result.limit == "max_total_tokens" and result.error is None
    assert result.trace[-2:] == ["reason", "done"] and len(fake.requests) == 1


def test_an_input_too_large_to_send_is_never_sent_even_to_salvage(fake: FakeClaude) -> None:
    huge = "Summarise this: " + "and more detail " * 150_000  # about 2.4 MB
    result = run(fake, huge, max_total_tokens=1_000)
    assert result.outcome == "limit" and result.limit == "max_total_tokens"
    assert result.trace[-3:] == ["reason", "salvage", "done"]
    assert result.error is not None and result.error.kind == "salvage" and "it was not sent" in result.error.message
    assert fake.requests == []


def test_the_rows_hold_for_any_model_raising_token_budget_error() -> None:
    """Any model may refuse so: the table reads the error's kind, not the adapter."""
    agent = Agent(name="a", model=ScriptedModel([TokenBudgetError("too big"), "best effort"]))
    result = Runner(agent).run_sync("go")
    assert (result.outcome, result.output, result.limit) == ("salvaged", "best effort", "max_total_tokens")
    rows = [str(r) for r in CORE.rows_from("reason")]
    assert rows[5:7] == [
        "reason -> salvage (request_over_token_budget & salvage_allowed)",
        "reason -> done (request_over_token_budget)",
    ]
