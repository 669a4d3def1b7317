"""Cost: each reply priced exactly (an unknown model: None, never a guess), summed per run, bounded by max_cost_usd."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    Usage,
)
from loopwright.data.events import ErrorOccurred, ModelResponded
from loopwright.models import prices
from loopwright.models.prices import cost_of, known_prices, price_for, register_price, unregister_price
from tests.helpers import add


def reply(text: str | None = None, *, model: str | None = "claude-opus-4-6", **usage: int) -> ModelResponse:
    parts: tuple[Any, ...] = (TextPart(text=text),) if text else (ToolCall(name="add", args={"a": 1, "b": 2}),)
    return ModelResponse(parts=parts, usage=Usage(requests=1, **usage), model=model)


def run(agent: Agent) -> RunResult:
    return asyncio.run(asyncio.wait_for(Runner(agent).run("go"), 20))


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        unregister_price(name)


def test_known_usage_gives_the_exact_cost() -> None:
    usage = Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=2000, cache_creation_tokens=100)
    # claude-opus-4-6: $5 input, $25 output, $6.25 cache write, $0.50 cache read per million tokens
    assert cost_of("claude-opus-4-6", usage) == Decimal("0.019125")  # (5000 + 12500 + 625 + 1000) / 1e6


def test_a_run_sums_the_cost_of_its_steps_exactly() -> None:
    script = [reply(input_tokens=1000, output_tokens=100), reply("done", input_tokens=1200, output_tokens=7)]
    result = run(Agent(name="a", model=ScriptedModel(script), tools=[add]))
    assert result.outcome == "final"
    steps = [e.response.usage.cost_usd for e in result.events if isinstance(e, ModelResponded)]
    assert steps == [Decimal("0.0075"), Decimal("0.006175")]  # (5000 + 2500) / 1e6, (6000 + 175) / 1e6
    assert result.cost_usd == Decimal("0.013675")
    assert result.usage.cost_usd == result.cost_usd
    assert RunState.from_json(result.run_state.to_json()).usage.cost_usd == Decimal("0.013675")


def test_an_unknown_model_costs_none_and_so_does_the_run() -> None:
    assert cost_of("some-new-model", Usage(input_tokens=10)) is None
    assert cost_of(None, Usage(input_tokens=10)) is None
    script = [reply(input_tokens=10), reply("done", model="some-new-model", input_tokens=10)]
    result = run(Agent(name="a", model=ScriptedModel(script), tools=[add]))
    assert result.outcome == "final" and result.cost_usd is None  # never a partial sum


def test_a_reply_that_names_no_model_is_priced_by_the_model_called() -> None:
    class Configured:
        model = "claude-haiku-4-5"

        async def complete(self, request: Any) -> ModelResponse:
            return ModelResponse(parts=(TextPart(text="hi"),), usage=Usage(input_tokens=1000, output_tokens=1000))

    result = run(Agent(name="a", model=Configured()))
    assert result.cost_usd == Decimal("0.006")  # (1000 * 1 + 1000 * 5) / 1e6


def test_a_cache_price_that_is_not_listed_is_not_guessed() -> None:
    assert cost_of("gemini-2.5-flash", Usage(input_tokens=10, output_tokens=10)) is not None
    assert cost_of("gemini-2.5-flash", Usage(input_tokens=10, cache_read_tokens=5)) is None
    assert cost_of("gpt-5.4", Usage(input_tokens=300_000)) is None  # past the standard rates' prompt length


@pytest.mark.parametrize(
    ("spelling", "base"),
    [
        ("claude-opus-4-6@20260205", "claude-opus-4-6"),
        ("anthropic.claude-opus-4-6-v1:0", "claude-opus-4-6"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("gpt-5.4-2026-03-05", "gpt-5.4"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
    ],
)
def test_every_spelling_of_a_model_finds_its_price(spelling: str, base: str) -> None:
    assert price_for(spelling) is price_for(base) is not None


def test_every_built_in_price_says_when_and_where_it_was_read() -> None:
    for model, found in known_prices().items():
        if model in prices._REGISTERED:  # a user's (a docs example run in this worker may have registered one)
            continue
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", found.date), model
        assert found.source.startswith("https://"), model


def test_users_register_prices(registered: list[str]) -> None:
    registered.append("my-gateway-model")
    register_price("my-gateway-model", input=0.1, output="0.4", cache_read=0.01)
    assert cost_of("my-gateway-model", Usage(input_tokens=1000, output_tokens=1000, cache_read_tokens=1000)) == Decimal(
        "0.00051"
    )
    registered.append("claude-opus-4-6")
    register_price("claude-opus-4-6", input=1, output=1)  # a negotiated price wins over the table
    assert cost_of("claude-opus-4-6", Usage(input_tokens=1_000_000)) == Decimal(1)


@pytest.mark.parametrize(
    ("model", "prices", "wrong"),
    [
        ("", {"input": 1, "output": 1}, "model"),
        ("m", {"input": -1, "output": 1}, "input"),
        ("m", {"input": "abc", "output": 1}, "input"),
        ("m", {"input": 1, "output": float("nan")}, "output"),
        ("m", {"input": True, "output": 1}, "input"),
    ],
)
def test_bad_prices_are_refused_in_one_line(model: str, prices: dict[str, Any], wrong: str) -> None:
    with pytest.raises(ConfigurationError, match=wrong) as caught:
        register_price(model, **prices)
    assert "\n" not in str(caught.value)
    assert price_for("m") is None


def test_a_spent_max_cost_usd_skips_the_salvage_call_it_cannot_pay() -> None:
    """$0.005 a step under a $0.01 cap: two steps spend it exactly; salvage's call is paid from
    the budget too, and nothing is left: it is not made, and an error event says so."""
    script = [reply(input_tokens=500, output_tokens=100) for _ in range(2)] + [reply("best effort")]
    agent = Agent(name="a", model=ScriptedModel(script), tools=[add], limits=Limits(max_cost_usd=0.01))
    result = run(agent)
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")
    assert result.iterations == 2
    assert result.cost_usd == Decimal("0.01")
    assert "decide -> salvage" in " ".join(f"{a} -> {b}" for a, b in zip(result.trace, result.trace[1:], strict=False))
    assert any(e.type == "error_occurred" and "salvage call was not made" in e.error.message for e in result.events)


def test_max_cost_usd_stops_before_a_call_that_would_overspend() -> None:
    """Issue 37: $0.0075 a step under a $0.01 cap: the second call would overspend it, so it is
    not made (before, it was, and the run spent $0.015 and more with its salvage call)."""
    script = [reply(input_tokens=1000, output_tokens=100) for _ in range(2)] + [reply("best effort")]
    agent = Agent(name="a", model=ScriptedModel(script), tools=[add], limits=Limits(max_cost_usd=0.01))
    result = run(agent)
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")
    assert result.iterations == 1
    assert result.cost_usd is not None and result.cost_usd <= Decimal("0.01")


def test_max_cost_usd_with_salvage_off_ends_with_the_limit() -> None:
    script = [reply(input_tokens=3000, output_tokens=100) for _ in range(3)]
    agent = Agent(name="a", model=ScriptedModel(script), tools=[add], limits=Limits(max_cost_usd=0.01, salvage=False))
    result = run(agent)
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")


def test_a_cost_budget_that_cannot_be_counted_stops_the_run() -> None:
    script = [reply(model="some-new-model", input_tokens=10), reply("salvaged", model="some-new-model")]
    agent = Agent(name="a", model=ScriptedModel(script), tools=[add], limits=Limits(max_cost_usd=100))
    result = run(agent)
    # an unknown cost spends the budget: the salvage call, paid from it, is not made (saying so)
    assert (result.outcome, result.limit, result.cost_usd) == ("limit", "max_cost_usd", None)
    assert any(e.type == "error_occurred" and "salvage call was not made" in e.error.message for e in result.events)


def test_without_a_cost_budget_an_unknown_cost_changes_nothing() -> None:
    result = run(
        Agent(name="a", model=ScriptedModel([[ToolCall(name="add", args={"a": 1, "b": 2})], "ok"]), tools=[add])
    )
    assert (result.outcome, result.cost_usd) == ("final", None)


def test_a_bad_max_cost_usd_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match=r"max_cost_usd.*US dollars") as caught:
        Limits(max_cost_usd=-1)
    assert "\n" not in str(caught.value)


def test_usage_sums_know_when_the_cost_is_unknown() -> None:
    priced = Usage(input_tokens=1, requests=1, cost_usd=Decimal("0.5"))
    unknown = Usage(input_tokens=1, requests=1)
    assert (Usage() + priced).cost_usd == Decimal("0.5")  # a usage of nothing adds nothing
    assert (priced + Usage()).cost_usd == Decimal("0.5")
    assert (priced + priced).cost_usd == Decimal(1)
    assert (priced + unknown).cost_usd is None
    assert (unknown + priced).cost_usd is None


_COUNTS = st.integers(0, 10**9)
_PRICES = st.decimals(min_value=0, max_value=1000, places=4, allow_nan=False, allow_infinity=False)


@given(
    prices=st.tuples(_PRICES, _PRICES, _PRICES, _PRICES),
    low=st.tuples(_COUNTS, _COUNTS, _COUNTS, _COUNTS),
    more=st.tuples(_COUNTS, _COUNTS, _COUNTS, _COUNTS),
)
def test_cost_is_monotone_in_usage_and_adds_up(
    prices: tuple[Decimal, ...], low: tuple[int, ...], more: tuple[int, ...]
) -> None:
    from loopwright.models.prices import price

    p = price(*prices, date="2026-11-26", source="https://example.com")

    def usage(counts: tuple[int, ...]) -> Usage:
        return Usage(input_tokens=counts[0], output_tokens=counts[1], cache_creation_tokens=counts[2],
                     cache_read_tokens=counts[3])  # fmt: skip

    a, b = usage(low), usage(tuple(x + y for x, y in zip(low, more, strict=True)))
    ca, cb, extra = p.cost(a), p.cost(b), p.cost(usage(more))
    assert ca is not None and cb is not None and extra is not None
    assert ca <= cb
    assert ca + extra == cb  # exact: no rounding anywhere


def test_a_request_that_would_overspend_is_not_sent() -> None:
    """Checked before the call (its input alone, estimated from below, at the cheapest input price)."""
    sent: list[int] = []

    def answer(request: Any) -> ModelResponse:
        sent.append(len(request.messages))
        return reply(input_tokens=1000, output_tokens=100)

    big = "x" * 50_000  # >= 10,000 tokens: at least $0.005 of claude-opus-4-6 (cache reads at $0.50: $0.005)
    agent = Agent(
        name="a",
        model=ScriptedModel(answer, name="claude-opus-4-6"),
        tools=[add],
        limits=Limits(max_cost_usd=0.004),
    )
    result = run(agent.replace(instruction=big))
    assert sent == []
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")
    errors = [e.error.message for e in result.events if isinstance(e, ErrorOccurred)]
    assert len(errors) == 1 and "was not sent" in errors[0] and "max_cost_usd=0.004" in errors[0]
    assert result.trace[-2:] == ["reason", "done"]
    run(agent.replace(limits=Limits(max_cost_usd=1, max_iterations=1)))  # a small request is sent
    assert sent[:1] == [1]


def test_the_estimate_is_from_below() -> None:
    from loopwright import Message, ModelRequest
    from loopwright.models.prices import estimate_input_tokens

    request = ModelRequest(messages=[Message(role="user", parts=(TextPart(text="a" * 100),))])
    assert estimate_input_tokens(request) == 20


def test_a_nested_run_adds_its_cost_to_the_run_above() -> None:
    from loopwright import agent_tool

    inner_script = [reply(input_tokens=100), reply(input_tokens=100), reply("inner says hi", output_tokens=10)]
    inner = Agent(name="inner", model=ScriptedModel(inner_script), tools=[add])
    outer_script = [
        ModelResponse(
            parts=(ToolCall(name="inner", args={"task": "hi"}),),
            usage=Usage(requests=1, input_tokens=1000),
            model="claude-opus-4-6",
        ),
        reply("done", input_tokens=1000),
    ]
    outer = Agent(name="outer", model=ScriptedModel(outer_script), tools=[agent_tool(inner)])
    result = run(outer)
    assert result.outcome == "final", result.error
    # outer: 2 x 1000 input tokens ($0.01); inner: 200 input + 10 output ($0.00125)
    assert result.cost_usd == Decimal("0.01125")
