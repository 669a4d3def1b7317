"""claude_facts' output limits match Anthropic's model pages, and AnthropicModel allows the full
limit of the default model (the pages are named beside each row of the table)."""

from __future__ import annotations

import pytest

from loopwright import AnthropicModel, ConfigurationError
from loopwright.models.anthropic.facts import _TABLE, CURRENT, facts_for

# "Max output" from each model's page (platform.claude.com/docs/en/models/<model>/overview and the
# models overview's comparison table); the Mythos models share their Fable twin's specifications.
DOCUMENTED_MAX_OUTPUT = {
    "claude-opus-5-5": 128_000,
    "claude-sonnet-5-5": 128_000,
    "claude-haiku-5-5": 128_000,
    "claude-fable-5-2": 128_000,
    "claude-mythos-5-2": 128_000,
    "claude-fable-5-1": 128_000,
    "claude-mythos-5-1": 128_000,
    "claude-opus-5": 128_000,
    "claude-sonnet-5": 128_000,
    "claude-fable-5": 128_000,
    "claude-mythos-5": 128_000,
    "claude-opus-4-8": 128_000,
    "claude-opus-4-7": 128_000,
    "claude-opus-4-6": 128_000,
    "claude-sonnet-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-sonnet-4-5": 64_000,
}


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the deprecated 4.5 models warn when built
@pytest.mark.parametrize(("model", "limit"), sorted(DOCUMENTED_MAX_OUTPUT.items()))
def test_each_models_output_limit_is_the_documented_one(model: str, limit: int) -> None:
    assert facts_for(model).max_output == limit
    assert AnthropicModel(model).max_tokens == limit  # the default budget is the model's limit


def test_the_default_model_takes_max_tokens_up_to_its_128k_limit() -> None:
    assert CURRENT == "claude-sonnet-5-5"
    assert AnthropicModel(CURRENT, max_tokens=100_000).max_tokens == 100_000
    assert AnthropicModel(CURRENT, max_tokens=128_000).max_tokens == 128_000
    with pytest.raises(ConfigurationError, match=r"claude-sonnet-5-5 writes at most 128000 output tokens"):
        AnthropicModel(CURRENT, max_tokens=128_001)


def test_every_row_of_the_5x_line_allows_128k() -> None:
    """The 5.x line, Haiku included, writes up to 128K; a new row at 64K is most likely a copy slip."""
    five = [model for model in _TABLE if model.split("-")[2] == "5"]
    assert five and {model: _TABLE[model].max_output for model in five} == dict.fromkeys(five, 128_000)


def test_every_spelling_of_the_default_model_gets_its_limit() -> None:
    for spelling in (CURRENT, f"anthropic.{CURRENT}-v1:0", f"us.anthropic.{CURRENT}-v1:0", f"{CURRENT}@20261001"):
        assert facts_for(spelling).max_output == 128_000, spelling
