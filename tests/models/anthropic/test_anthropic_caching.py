"""Prompt caching that pays, measured with the fake Messages API's usage accounting
(tests/fake_claude.py, ``account=True``): a moving breakpoint on the history makes each request
read what the one before wrote; dynamic instructions travel after the cached prefix; the 1-hour
TTL is offered. Input cost is counted at the API's multipliers (cache write x1.25 for 5 minutes,
read x0.1) against the same requests with only the static prefix cached (the old layout)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, Limits, tool
from tests.fake_claude import FakeClaude, account, message, text, tool_use
from tests.models.anthropic.test_anthropic_model import run

RULES = "You are a careful research assistant. " * 110  # about 1,000 tokens of static instruction


@tool
def read_page(n: int) -> str:
    """Read page n of the report."""
    return f"Page {n}: " + "figures and findings, " * 90  # about 500 tokens


@pytest.fixture(autouse=True)
def _accounting(fake: FakeClaude) -> None:
    """Here the Claude fake (tests/conftest.py) counts usage (``account=True``)."""
    fake.account = True


def loop_agent(fake: FakeClaude, steps: int, **options: Any) -> Agent:
    fake.script += [
        message(text(f"Reading page {n}."), tool_use(f"t{n}", "read_page", {"n": n}), stop_reason="tool_use")
        for n in range(steps)
    ] + [message(text("Summary."))]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key")
    return Agent(
        name="researcher",
        model=AnthropicModel("claude-sonnet-5-5", client=client, **options),
        static_instruction=RULES,
        instruction="Today is {day}.",
        tools=[read_page],
        limits=Limits(max_iterations=steps + 2, max_tool_calls=steps + 1),
    )


def cost(usage: dict[str, int], write: float = 1.25) -> float:
    """Input billed, in base input-token units."""
    return usage["input_tokens"] + write * usage["cache_creation_input_tokens"] + 0.1 * usage["cache_read_input_tokens"]


def static_only(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the old layout sent it: a breakpoint on the static system prefix only."""
    body = copy.deepcopy(body)
    for turn in body["messages"]:
        for block in turn["content"]:
            block.pop("cache_control", None)
    return body


@pytest.mark.slow
@pytest.mark.parametrize("steps", [10, 30])
def test_a_moving_breakpoint_caches_the_history_of_a_tool_loop(fake: FakeClaude, steps: int) -> None:
    result = run(loop_agent(fake, steps))
    assert result.outcome == "final" and len(fake.ledger) == steps + 1
    reads = [u["cache_read_input_tokens"] for u in fake.ledger]
    assert reads[0] == 0 and all(b > a for a, b in itertools.pairwise(reads))  # reads grow every step
    assert all(u["input_tokens"] < 60 for u in fake.ledger[1:])  # only the dynamic tail is billed in full
    old = FakeClaude(account=True)  # the same requests, the static prefix cached only
    before = [account(old, static_only(body)) for body in fake.requests]
    ratio = sum(map(cost, before)) / sum(map(cost, fake.ledger))
    print(f"\n{steps}-step tool loop: input cost {sum(map(cost, before)):.0f} -> {sum(map(cost, fake.ledger)):.0f}"
          f" base-token units, {ratio:.1f}x less")  # fmt: skip
    assert ratio > (2.5 if steps == 10 else 5)


def test_dynamic_instructions_change_without_breaking_the_cached_prefix(fake: FakeClaude) -> None:
    agent = loop_agent(fake, 2)
    result = run(agent)  # run() fills {day} with Monday; the second run with another day
    assert result.outcome == "final"
    first_system = fake.requests[0]["system"]
    assert first_system == [{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}]
    for body in fake.requests:
        assert body["messages"][-1]["content"][-1] == {
            "type": "text",
            "text": "<instructions>\nToday is Monday.\n</instructions>",
        }
        assert "cache_control" not in body["messages"][-1]["content"][-1]  # after the breakpoint


def test_an_agent_with_only_a_dynamic_instruction_still_caches_its_history(fake: FakeClaude) -> None:
    agent = loop_agent(fake, 3).replace(static_instruction=None)
    result = run(agent)
    assert result.outcome == "final" and "system" not in fake.requests[0]
    assert [u["cache_read_input_tokens"] > 0 for u in fake.ledger] == [False, True, True, True]


def test_the_one_hour_ttl_and_no_caching(fake: FakeClaude) -> None:
    run(loop_agent(fake, 1, cache="1h"))
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert fake.requests[0]["system"][0]["cache_control"] == hour
    assert fake.requests[1]["messages"][-1]["content"][0]["cache_control"] == hour
    fake.requests.clear()
    run(loop_agent(fake, 1, cache=None))
    assert "cache_control" not in str(fake.requests)


def wide_agent(fake: FakeClaude, steps: int, width: int) -> Agent:
    """A tool loop whose every step makes ``width`` parallel calls."""
    fake.script += [
        message(
            text(f"Reading {width} pages."),
            *[tool_use(f"t{n}_{k}", "read_page", {"n": n * width + k}) for k in range(width)],
            stop_reason="tool_use",
        )
        for n in range(steps)
    ] + [message(text("Summary."))]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key")
    return Agent(
        name="researcher",
        model=AnthropicModel("claude-sonnet-5-5", client=client),
        static_instruction=RULES,
        tools=[read_page],
        limits=Limits(max_iterations=steps + 2, max_tool_calls=steps * width + 1),
    )


@pytest.mark.parametrize("width", [1, 4, 12])
def test_wide_steps_read_what_the_step_before_wrote(fake: FakeClaude, width: int) -> None:
    """A step of 12 parallel calls adds 25 blocks, more than the API's 20-block lookback from one
    moving breakpoint: a second breakpoint where the previous request ended finds its cache."""
    result = run(wide_agent(fake, 5, width))
    assert result.outcome == "final" and len(fake.ledger) == 6
    read = [u["cache_read_input_tokens"] for u in fake.ledger]
    written = [u["cache_creation_input_tokens"] for u in fake.ledger]
    print(f"\n{width} call(s) a step: read {read}, written {written}")
    assert all(b > a for a, b in itertools.pairwise(read))  # every step reads the one before
    for step in range(1, 6):  # and writes only what is new since the request before
        new = sum(_block_tokens(fake.requests[step])) - sum(_block_tokens(fake.requests[step - 1]))
        assert written[step] <= new + 60, (step, written[step], new)
    assert all(body_breakpoints(body) <= 4 for body in fake.requests)  # the API allows four


def _block_tokens(body: dict[str, Any]) -> list[int]:
    from tests.fake_claude import _blocks, _tokens

    return [_tokens(block) for block, _ in _blocks(body)]


def body_breakpoints(body: dict[str, Any]) -> int:
    return str(body).count("cache_control")
