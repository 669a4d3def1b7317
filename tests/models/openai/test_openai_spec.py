"""models/spec.py: ``provider:model`` specs become adapters (the CLI's --model), with one-line
errors for an unknown provider, a missing adapter and a missing extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loopwright import AnthropicModel, ConfigurationError
from loopwright.models.openai import OpenAIModel
from loopwright.models.spec import model_from_spec, model_with_key, parse_spec


def test_specs_name_their_provider() -> None:
    assert parse_spec("openai:gpt-5.5") == ("openai", "gpt-5.5")
    assert parse_spec("Anthropic:claude-sonnet-5-5") == ("anthropic", "claude-sonnet-5-5")
    assert parse_spec("gemini:gemini-3-pro") == ("gemini", "gemini-3-pro")
    assert parse_spec("openai:Qwen/Qwen3-8B:latest") == ("openai", "Qwen/Qwen3-8B:latest")  # ids may hold colons
    assert parse_spec("claude-sonnet-5-5") == ("anthropic", "claude-sonnet-5-5")  # bare ids by their prefix
    assert parse_spec("gpt-5.5") == ("openai", "gpt-5.5") and parse_spec("o3") == ("openai", "o3")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("mistral:large", "unknown provider 'mistral'"),
        ("openai:", "names no model"),
        ("llama3", "cannot tell the provider of model 'llama3'"),
        ("", "a model spec is provider:model_id"),
    ],
)
def test_bad_specs_are_one_line_naming_the_valid_forms(spec: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words) as info:
        parse_spec(spec)
    assert "\n" not in str(info.value)


def test_models_from_specs() -> None:
    model = model_from_spec("openai:gpt-5.5")
    assert isinstance(model, OpenAIModel) and model.api == "responses"
    local = model_from_spec("openai:llama3.2", base_url="http://127.0.0.1:11434/v1")
    assert isinstance(local, OpenAIModel) and local.api == "chat" and local.base_url == "http://127.0.0.1:11434/v1"
    claude = model_from_spec("anthropic:claude-sonnet-5-5")
    assert isinstance(claude, AnthropicModel) and claude.model == "claude-sonnet-5-5"


def test_gemini_specs_and_a_missing_gemini_sdk() -> None:
    """``gemini:...`` makes a GeminiModel; without google-genai the error names the extra (a fresh
    interpreter where the SDK cannot be imported)."""
    from loopwright.models.gemini import GeminiModel

    assert isinstance(model_from_spec("gemini:gemini-3.8-flash"), GeminiModel)
    code = (
        "import sys; sys.modules['google.genai'] = None\n"
        "from loopwright.models.spec import model_from_spec\n"
        "try:\n    model_from_spec('gemini:gemini-3.8-flash')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("ConfigurationError") and "pip install 'loopwright[gemini]'" in done.stdout, done


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        model_with_key("openai:gpt-5.5")
    assert isinstance(model_with_key("openai:llama3", base_url="http://127.0.0.1:1/v1"), OpenAIModel)


def test_without_the_openai_sdk_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from loopwright.models.spec import model_from_spec\n"
        "try:\n    model_from_spec('openai:gpt-5.5')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (
        done.stdout.strip() == "ConfigurationError OpenAIModel needs the openai SDK: pip install 'loopwright[openai]'"
    )
