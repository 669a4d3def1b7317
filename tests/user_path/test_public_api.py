"""The public surface: the names the issues promise, and __all__ kept exact."""

from __future__ import annotations

import loopwright
from tests import ROOT


def test_promised_names_import() -> None:
    from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, ToolCall, tool  # noqa: F401


def test_all_is_sorted_and_matches_the_public_names() -> None:
    assert sorted(loopwright.__all__) == loopwright.__all__
    assert set(loopwright.__all__) == set(loopwright._EXPORTS)  # every public name is importable lazily
    for name in loopwright.__all__:
        assert getattr(loopwright, name) is not None, name
    assert set(dir(loopwright)) >= set(loopwright.__all__)


def test_import_loopwright_loads_only_what_is_used() -> None:
    """``import loopwright`` loads no dependency; the names load their modules on first use."""
    import subprocess
    import sys

    code = (
        "import sys, loopwright; heavy = ('pydantic', 'transitions', 'structlog', 'rich', 'anthropic', "
        "'openai', 'google.genai', 'mcp', 'starlette', 'uvicorn'); "
        "print(*[m in sys.modules for m in heavy]); loopwright.Runner; loopwright.Agent; "
        "print(*[m in sys.modules for m in heavy])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    before, after = done.stdout.splitlines()
    assert before.split() == ["False"] * 10, done.stderr
    assert after.split() == ["True", "True"] + ["False"] * 8, done.stderr  # the extras' SDKs: only when used


def test_event_classes_are_exported_for_matching() -> None:
    from loopwright.data import events

    kinds = {cls.model_fields["type"].default for cls in events.EVENT_CLASSES}
    parts = {"text", "thought", "tool_call", "tool_result"}
    assert kinds.isdisjoint(parts)  # an event type never equals a content part's
    for cls in events.EVENT_CLASSES:
        assert cls.__name__ in events.__all__
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in cls.__name__).lstrip("_")
        assert cls.model_fields["type"].default == snake


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


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    """A plain ``pip install .`` ships only the packages pyproject lists (``loopwright.features`` was missing)."""
    import tomllib

    root = ROOT
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"loopwright.states"} | {
        ".".join(("loopwright", *init.parent.relative_to(root / "engine").parts)).rstrip(".")
        for init in (root / "engine").rglob("__init__.py")
    }
    missing, extra = sorted(found - listed), sorted(listed - found)
    assert found == listed, f"add to [tool.setuptools] packages: {missing}; drop: {extra}"
