"""Which models and request options :class:`~loopwright.models.openai.OpenAIModel` takes:
the model ids this ``openai`` SDK release names, which of them are reasoning models (and the
sampling options those refuse), and the check of options against the SDK's own ``create``
arguments. Imported by :mod:`.openai_model` (which checks the SDK is installed).
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

from openai.resources.chat.completions import AsyncCompletions
from openai.resources.responses import AsyncResponses
from openai.types.shared import ChatModel, ResponsesModel

from ...data.errors import ConfigurationError

CURRENT = "gpt-5.5"
"""The model the docs and the error messages name (in the SDK's ``ChatModel`` list)."""


def _literals(alias: Any) -> list[str]:
    """The string literals a typing alias (a Literal, or a Union of them) names, in order."""
    out: list[str] = []
    for arg in typing.get_args(alias):
        if isinstance(arg, str):
            out.append(arg)
        elif arg is not str:
            out.extend(_literals(arg))
    return out


KNOWN_MODELS: tuple[str, ...] = tuple(dict.fromkeys(_literals(ChatModel) + _literals(ResponsesModel)))
"""Every model id this ``openai`` SDK release names (``ChatModel`` and ``ResponsesModel``)."""
_REASONING = re.compile(r"^(o\d|gpt-5|gpt-6|codex)")
SAMPLING = frozenset(
    {"temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias"}
)
"""Sampling options OpenAI's reasoning models refuse (the API answers 400)."""


def _params_of(method: Any) -> frozenset[str]:
    return frozenset(inspect.signature(method).parameters) - {"self", "extra_headers", "extra_query", "timeout"}


_SDK_PARAMS: dict[str, frozenset[str]] = {
    "responses": _params_of(AsyncResponses.create),
    "chat": _params_of(AsyncCompletions.create),
}
_OWNED: dict[str, frozenset[str]] = {
    "responses": frozenset(
        {"model", "input", "instructions", "stream", "stream_options", "tool_choice", "max_output_tokens"}
    ),
    "chat": frozenset(
        {
            "model",
            "messages",
            "stream",
            "stream_options",
            "tool_choice",
            "n",
            "max_completion_tokens",
            "max_tokens",
            "functions",
            "function_call",
        }
    ),
}
"""Arguments loopwright sets itself from the agent and the request (``max_tokens=`` sets the limit)."""


def is_reasoning(model: str) -> bool:
    """An OpenAI reasoning model (o-series, gpt-5 and later, but not the ``-chat`` ones)."""
    return bool(_REASONING.match(model)) and "chat" not in model


SERVER_STATE = ("previous_response_id", "conversation")
"""Responses options that make the server hold the conversation: refused, since loopwright sends
the whole history itself (both at once would put the context on the server twice)."""


def checked_options(options: dict[str, Any], where: str, *, api: str, model: str, reasoning: bool) -> dict[str, Any]:
    """``options`` with unknown names, sampling options a reasoning model refuses, and the
    server-side conversation options (:data:`SERVER_STATE`), refused."""
    stateful = sorted(name for name in options if name in SERVER_STATE)
    if stateful:
        raise ConfigurationError(
            f"{where} got {', '.join(stateful)}: loopwright sends the whole conversation with every request "
            "(store=False, reasoning items carried back), so a server-side conversation would hold the context "
            "twice and be billed twice; leave it out (a run's history is its state: save and resume it with "
            "a store)"
        )
    valid = _SDK_PARAMS[api] - _OWNED[api]
    unknown = sorted(set(options) - valid)
    if unknown:
        owned = [name for name in unknown if name in _OWNED[api]]
        hint = f" ({', '.join(owned)}: set by loopwright itself; use max_tokens= for the output limit)" if owned else ""
        raise ConfigurationError(
            f"{where} got unknown option(s) {', '.join(map(repr, unknown))} for api={api!r}{hint}; "
            f"valid options: {', '.join(sorted(valid))}"
        )
    refused = sorted(name for name in options if name in SAMPLING and reasoning)
    if refused:
        raise ConfigurationError(
            f"{model} is a reasoning model and refuses {', '.join(refused)} (the API would answer 400); "
            f"leave {'it' if len(refused) == 1 else 'them'} out, or steer it with reasoning=... "
            f"(valid options: {', '.join(sorted(valid - SAMPLING))})"
        )
    return dict(options)
