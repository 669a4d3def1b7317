"""A model from a one-word spec, as the CLI's ``--model`` takes it: ``"openai:gpt-5.5"``,
``"anthropic:claude-sonnet-5-5"``, ``"gemini:gemini-..."``. A bare id is read by its prefix
(``claude-`` is Anthropic, ``gpt-`` / ``o3`` and the like OpenAI, ``gemini-`` Gemini).

``base_url`` points the provider's SDK at another server: for ``openai:`` it also switches to
Chat Completions (``api="chat"``), the wire format OpenAI-compatible servers (Ollama, vLLM, LM
Studio, OpenRouter, a LiteLLM proxy) speak. Each adapter's SDK is imported only when its spec is
used; a missing extra is one line naming ``pip install 'loopwright[...]'``.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

from ..data.errors import ConfigurationError
from .base import Model

PROVIDERS = ("anthropic", "openai", "gemini")
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
"""The environment variable each provider's key is read from."""
_BARE = (
    (re.compile(r"^claude-"), "anthropic"),
    (re.compile(r"^(gpt-|o\d|chatgpt-|codex-)"), "openai"),
    (re.compile(r"^gemini-"), "gemini"),
)


def parse_spec(spec: str) -> tuple[str, str]:
    """``(provider, model_id)`` of a spec; ConfigurationError naming the valid forms."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"a model spec is provider:model_id, e.g. openai:gpt-5.5; got {spec!r}")
    provider, sep, model_id = spec.strip().partition(":")
    if sep:
        provider = provider.lower()
        if provider not in PROVIDERS:
            raise ConfigurationError(
                f"unknown provider {provider!r} in model spec {spec!r}; use one of "
                f"{', '.join(p + ':MODEL' for p in PROVIDERS)}"
            )
        if not model_id:
            raise ConfigurationError(f"the model spec {spec!r} names no model; e.g. {provider}:MODEL_ID")
        return provider, model_id
    for pattern, found in _BARE:
        if pattern.match(provider):
            return found, provider
    raise ConfigurationError(
        f"cannot tell the provider of model {spec!r}; write it as provider:model_id "
        f"({', '.join(p + ':' + spec for p in PROVIDERS)})"
    )


def _import(provider: str, module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(f"loopwright.models.{module}"), name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("loopwright"):
            raise ConfigurationError(
                f"{provider}: models need {name} (loopwright.models.{module}), which this version of loopwright "
                f"does not have; upgrade loopwright"
            ) from None
        raise ConfigurationError(f"{provider}: models need pip install 'loopwright[{provider}]'") from None
    except ImportError as exc:  # the adapter's own one-line message about its missing SDK
        raise ConfigurationError(str(exc)) from None


def model_from_spec(spec: str, base_url: str | None = None) -> Model:
    """The model ``spec`` names (see the module docstring)."""
    provider, model_id = parse_spec(spec)
    if provider == "openai":
        openai_model = _import("openai", "openai", "OpenAIModel")
        model: Model = openai_model(model_id, api="chat" if base_url else "responses", base_url=base_url)
        return model
    if provider == "anthropic":
        anthropic_model = _import("anthropic", "anthropic", "AnthropicModel")
        if base_url is None:
            model = anthropic_model(model_id)
            return model
        import anthropic

        model = anthropic_model(model_id, client=lambda: anthropic.AsyncAnthropic(base_url=base_url))
        return model
    gemini_model = _import("gemini", "gemini", "GeminiModel")
    model = gemini_model(model_id) if base_url is None else gemini_model(model_id, base_url=base_url)
    return model


def model_with_key(spec: str, base_url: str | None = None) -> Model:
    """:func:`model_from_spec`, after checking that the provider's key is set (a local server
    given by ``base_url`` needs none): the CLI's ``--model``. A missing key is a
    ConfigurationError naming the environment variable."""
    provider, _ = parse_spec(spec)
    key = KEYS[provider]
    found = os.environ.get(key) or (provider == "gemini" and os.environ.get("GOOGLE_API_KEY"))
    if not found and base_url is None and not (provider == "openai" and os.environ.get("OPENAI_BASE_URL")):
        if provider == "anthropic":
            raise ConfigurationError(
                "needs an Anthropic API key: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy), "
                "or drop --model to run on the scripted model."
            )
        raise ConfigurationError(f"{spec} needs an API key: set {key}, or give --base-url for a local server")
    return model_from_spec(spec, base_url)
