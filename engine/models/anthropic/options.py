"""Option checks and beta helpers of :class:`~loopwright.models.anthropic.AnthropicModel`:
a ``thinking`` config the model would refuse, the ``FutureWarning`` for a deprecated or retired
model (its facts, or the installed SDK's own list), and the compaction blocks of the beta endpoint,
whose encrypted content is noted as it streams and put back on the final message so it goes back to
the API verbatim. Part of the Anthropic adapter, so it may import ``anthropic``.
"""

from __future__ import annotations

import datetime
import re
import warnings
from typing import Any

import anthropic

from ...data.errors import ConfigurationError
from .facts import CURRENT, ModelFacts, base_id

SDK_DEPRECATED: dict[str, str] = dict(getattr(anthropic.resources.messages.messages, "DEPRECATED_MODELS", {}))
"""The models this SDK release lists as deprecated, with their end-of-life day."""


def check_thinking(model: str, facts: ModelFacts, thinking: Any, where: str) -> None:
    """Refuse a ``thinking`` config the model answers with 400 on every call (model facts)."""
    if not isinstance(thinking, dict):
        return
    if thinking.get("type") == "disabled" and not facts.thinking_off:
        raise ConfigurationError(
            f"{where}: {model} cannot turn thinking off (the API answers thinking={{'type': 'disabled'}} "
            "with 400); leave thinking out, or pick a model that can run without it"
        )
    if "budget_tokens" in thinking and not facts.budget_tokens:
        raise ConfigurationError(
            f"{where}: {model} takes no budget_tokens in thinking (adaptive thinking only; the API answers "
            "400); use thinking={'type': 'adaptive'} and bound a reply with max_tokens"
        )


def warn_if_deprecated(model: str, end_of_life: str | None) -> None:
    """Warn (``FutureWarning``) when ``model`` is deprecated or retired, by its facts or the SDK's list."""
    end_of_life = end_of_life or SDK_DEPRECATED.get(model) or SDK_DEPRECATED.get(base_id(model))
    if not end_of_life:
        return
    day = _day(end_of_life)
    if day is not None and day < datetime.date.today():
        what = f"{model} reached end of life on {end_of_life} (retired): requests to it fail."
    else:
        what = f"{model} is deprecated and reaches end of life on {end_of_life}: requests to it will then fail."
    warnings.warn(f"{what} Move to a current model, e.g. AnthropicModel({CURRENT!r})", FutureWarning, stacklevel=3)


def _day(text: str) -> datetime.date | None:
    """``"June 30th, 2026"`` (the SDK's spelling) as a date; None if it is spelled otherwise."""
    try:
        return datetime.datetime.strptime(re.sub(r"(\d)(st|nd|rd|th)", r"\1", text), "%B %d, %Y").date()
    except ValueError:
        return None


def keep_sealed(event: Any, sealed: dict[int, str]) -> None:
    """Note a compaction block's encrypted content as it streams (see :func:`reseal`)."""
    if event.type == "content_block_delta" and event.delta.type == "compaction_delta":
        encrypted = getattr(event.delta, "encrypted_content", None)
        if encrypted:
            sealed[event.index] = encrypted


def reseal(message: Any, sealed: dict[int, str]) -> None:
    """Put back the encrypted content of compaction blocks that the SDK's stream accumulator
    dropped (releases before 2.x keep only the summary): it must go back to the API verbatim."""
    for index, encrypted in sealed.items():
        block = message.content[index]
        if getattr(block, "encrypted_content", None) is None:
            block.encrypted_content = encrypted


FILES_BETA = "files-api-2025-04-14"
"""The beta a request needs when it names a file uploaded with the Files API."""


def uses_files(messages: list[dict[str, Any]]) -> bool:
    """Some block of ``messages`` (the API's, as mapped) names an uploaded file: an image or a
    document whose source is ``{"type": "file"}`` (in a user turn or in a tool's result there), or
    a ``container_upload``. Only user turns hold such blocks; other blocks cost one lookup."""
    for turn in messages:
        content = turn["content"]
        if turn["role"] == "user" and type(content) is list:
            for block in content:
                if block.get("type") in _MAY_NAME_A_FILE and _names_a_file(block):
                    return True
    return False


_MAY_NAME_A_FILE = frozenset({"image", "document", "tool_result", "container_upload"})


def _names_a_file(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "container_upload":
        return True
    if kind == "tool_result":
        inner = block.get("content")
        return type(inner) is list and any(
            isinstance(item, dict) and item.get("type") in _MAY_NAME_A_FILE and _names_a_file(item) for item in inner
        )
    source = block.get("source")
    return isinstance(source, dict) and source.get("type") == "file"


def with_beta(params: dict[str, Any], name: str) -> None:
    """Add ``name`` to the request's ``anthropic-beta`` header (once, after the user's own)."""
    headers = params.get("extra_headers", {})
    given = [n for n in headers.get("anthropic-beta", "").split(",") if n]
    if name not in given:
        params["extra_headers"] = {**headers, "anthropic-beta": ",".join([*given, name])}
