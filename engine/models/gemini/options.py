"""Which options :class:`~loopwright.models.gemini.GeminiModel` takes: the
``GenerateContentConfig`` fields of the installed ``google-genai`` less those loopwright sets
itself or cannot take, and the check of a model's options and an agent's ``model_settings``
against them. Imported by :mod:`.gemini_model` (which checks the SDK is installed).
"""

from __future__ import annotations

from typing import Any

from google.genai import types as genai_types
from pydantic import BaseModel

from ...data.errors import ConfigurationError
from .mapping import check_tool_choice

_OWNED = frozenset({"system_instruction", "tool_config", "automatic_function_calling", "http_options"})
"""Config fields loopwright sets itself from the agent and the request."""
_REFUSED = {
    "candidate_count": "loopwright reads one candidate a reply",
    "should_return_http_response": "loopwright reads the parsed reply",
}
_CONFIG_FIELDS = frozenset(genai_types.GenerateContentConfig.model_fields)
OPTIONS = frozenset((_CONFIG_FIELDS - _OWNED - set(_REFUSED)) | {"parallel_tool_calls", "tool_choice"})
"""Names ``GeminiModel(**options)`` and an agent's ``model_settings`` may use."""


def checked_options(options: dict[str, Any], where: str) -> dict[str, Any]:
    """``options`` checked against :data:`OPTIONS` (the wrong ones named, the valid ones listed), with a
    pydantic model given as a response schema turned into its JSON schema."""
    wrong = sorted(set(options) - OPTIONS)
    if wrong:
        unknown = [repr(n) for n in wrong if n not in _OWNED and n not in _REFUSED]
        owned = [repr(n) for n in wrong if n in _OWNED]
        refused = [f"{n!r} ({_REFUSED[n]})" for n in wrong if n in _REFUSED]
        said = [
            *([f"unknown option(s) {', '.join(unknown)}"] if unknown else []),
            *(
                [f"option(s) loopwright sets itself from the agent and the request: {', '.join(owned)}"]
                if owned
                else []
            ),
            *([f"option(s) loopwright cannot take: {'; '.join(refused)}"] if refused else []),
        ]
        raise ConfigurationError(f"{where} got {'; and '.join(said)}; valid options: {', '.join(sorted(OPTIONS))}")
    if options.get("parallel_tool_calls", True) is not True:
        raise ConfigurationError(
            f"{where}: parallel_tool_calls={options['parallel_tool_calls']!r} cannot be expressed: the Gemini API "
            "has no switch for parallel function calls (the model may call several functions in one reply; "
            "loopwright answers them all, in order). Leave parallel_tool_calls out, or describe the order in "
            "the instructions"
        )
    options = {k: v for k, v in options.items() if k != "parallel_tool_calls"}
    if "tool_choice" in options:
        options["tool_choice"] = check_tool_choice(options["tool_choice"], where)
    for key in ("response_schema", "response_json_schema"):
        value = options.get(key)
        if isinstance(value, type) and issubclass(value, BaseModel):
            options["response_json_schema"] = value.model_json_schema()
            options.setdefault("response_mime_type", "application/json")
            if key == "response_schema":
                del options["response_schema"]
    return options
