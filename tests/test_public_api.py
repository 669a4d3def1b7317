"""The public surface: the names the issues promise, and __all__ kept exact."""

from __future__ import annotations

import loopwright


def test_promised_names_import() -> None:
    from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, ToolCall, tool  # noqa: F401


def test_all_is_sorted_and_matches_the_public_names() -> None:
    public = {n for n in vars(loopwright) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(loopwright, n)).__name__ == "module"}
    assert sorted(loopwright.__all__) == loopwright.__all__
    assert set(loopwright.__all__) == public - modules


def test_limits_defaults_are_finite() -> None:
    limits = loopwright.Limits()
    assert limits.max_iterations == 10 and limits.max_model_retries == 2 and limits.salvage
