"""The public surface: the names the issues promise, and __all__ kept exact."""

from __future__ import annotations

import loopwright


def test_promised_names_import() -> None:
    from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, ToolCall, tool  # noqa: F401


LAZY = {"AnthropicModel"}  # imported on first use (the SDK is slow to import)


def test_all_is_sorted_and_matches_the_public_names() -> None:
    public = {n for n in vars(loopwright) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(loopwright, n)).__name__ == "module"}
    assert sorted(loopwright.__all__) == loopwright.__all__
    assert set(loopwright.__all__) == (public - modules - {"TYPE_CHECKING", "Any"}) | LAZY


def test_the_anthropic_sdk_is_imported_only_when_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, loopwright; print('anthropic' in sys.modules); "
        "loopwright.AnthropicModel; print('anthropic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True"], done.stderr


def test_limits_defaults_are_finite() -> None:
    limits = loopwright.Limits()
    assert limits.max_iterations == 10 and limits.max_model_retries == 2 and limits.salvage
