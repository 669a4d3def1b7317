"""A cut reply's tokens are billed even when the retry that continues it fails: the run's usage,
cost and budgets count them."""

from __future__ import annotations

from decimal import Decimal

from loopwright import ContextWindowError, ModelError
from loopwright.models.prices import cost_of
from tests.fake_claude import Error, FakeClaude, cut_tool_use, message, text, thinking, tool_use
from tests.models.anthropic.test_anthropic_model import agent, run


def cut(output_tokens: int = 512) -> dict[str, object]:
    partial = cut_tool_use("cut", "weather", '{"city": "Par')
    return message(partial, stop_reason="max_tokens", usage={"input_tokens": 100, "output_tokens": output_tokens})


def test_a_cut_attempt_is_billed_when_its_retry_fails(fake: FakeClaude) -> None:
    fake.script += [cut(), Error(500, "api_error", "the server broke")]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "failed" and len(fake.requests) == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (100, 512)
    assert result.usage.requests == 1  # the reply that was cut; the failed request billed nothing


def test_the_spent_attempt_joins_the_step_the_engine_retries(fake: FakeClaude) -> None:
    fake.script += [
        cut(),
        Error(529, "overloaded_error", "busy"),
        message(text("Sunny."), usage={"input_tokens": 100, "output_tokens": 10}),
    ]
    result = run(agent(fake, instruction="", max_model_retries=1))
    assert result.outcome == "final", result.error
    assert (result.usage.input_tokens, result.usage.output_tokens) == (200, 522)


def test_the_spent_attempt_is_priced(fake: FakeClaude) -> None:
    fake.script += [cut(), Error(500, "api_error", "the server broke")]
    result = run(agent(fake, instruction="", model="claude-opus-4-6"))
    assert result.outcome == "failed"
    expected = cost_of("claude-opus-4-6", result.usage)
    assert expected is not None and expected > Decimal(0)
    assert result.usage.cost_usd == expected


def test_a_cut_that_cannot_grow_is_billed(fake: FakeClaude) -> None:
    """The budget cannot grow past the model's max output: the error says so and carries the spent usage."""
    fake.script += [cut()]
    result = run(agent(fake, instruction="", model="claude-opus-4-6", max_tokens=128_000))
    assert result.outcome == "failed" and result.error is not None and "cannot grow" in result.error.message
    assert (result.usage.input_tokens, result.usage.output_tokens) == (100, 512)


def test_a_reply_cut_by_a_full_context_window_is_billed(fake: FakeClaude) -> None:
    fake.script += [
        message(
            text("Paris: sunny"),
            stop_reason="model_context_window_exceeded",
            usage={"input_tokens": 9, "output_tokens": 7},
        ),
        Error(400, "invalid_request_error", "prompt is too long: 203714 tokens > 200000 maximum"),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "salvaged"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (9, 7)


def test_errors_carry_no_usage_by_default() -> None:
    assert ModelError("x").usage is None and ContextWindowError("y").usage is None


def test_a_salvage_call_cut_and_then_failed_is_billed(fake: FakeClaude) -> None:
    fake.script += [
        message(
            tool_use("t1", "weather", {"city": "Paris"}),
            stop_reason="tool_use",
            usage={"input_tokens": 10, "output_tokens": 5},
        ),
        message(thinking_only(), stop_reason="max_tokens", usage={"input_tokens": 20, "output_tokens": 512}),
        Error(500, "api_error", "the server broke"),
    ]
    result = run(agent(fake, instruction="", limits={"max_iterations": 1}))
    assert "salvage" in result.trace and len(fake.requests) == 3
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 517)


def thinking_only() -> dict[str, object]:
    """A reply cut inside its thinking: nothing usable."""
    return thinking("Let me think about Paris", "")
