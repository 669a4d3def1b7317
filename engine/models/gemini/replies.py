"""Gemini replies (streamed or not) as loopwright's :class:`ModelResponse`: parts, thought
signatures (each in a ``ProviderPart`` before the part it signs, see :mod:`.gemini_mapping`),
stop reasons, usage, and policy blocks said clearly. No ``google.genai`` import: the SDK's
pydantic types are read by attribute."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ...data.errors import ModelError
from ...data.events import ModelResponse, ProviderPart, StopReason, TextPart, ThoughtPart, ToolCall, Usage, new_call_id
from .. import from_wire
from .mapping import LOCAL_ID, PROVIDER, RAW, SIGNATURE

BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "LANGUAGE",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        "ESCALATION",
    }
)
"""Finish reasons that mean the API stopped (or withheld) the reply on a policy: text it let
through ends the step as a refusal; nothing at all fails the call (not retryable)."""
ENDED = frozenset({"STOP"})
"""The model finished (an empty reply is retried: it would end the run with no answer)."""
CUT = frozenset({"MAX_TOKENS", "CONTINUATION"})
"""The reply was cut by a token limit: kept, and the model is asked to continue."""
RETRIED: dict[str, str] = {
    "FINISH_REASON_UNSPECIFIED": "the API gave no reason for ending the reply",
    "OTHER": "the API stopped the reply for a reason it did not say",
    "MALFORMED_FUNCTION_CALL": "the model produced a function call the Gemini API could not read",
    "UNEXPECTED_TOOL_CALL": "the model called a function that is not declared or not allowed here",
    "MALFORMED_RESPONSE": "the model's reply was malformed",
    "TOO_MANY_TOOL_CALLS": (
        "the model made too many calls to the API's own tools in one request (its server-side tool loop stopped "
        "before an answer); if it persists, give fewer built-in tools or a narrower task"
    ),
    "IMAGE_OTHER": "the image generation stopped for a reason the API did not say",
    "NO_IMAGE": "the model was expected to generate an image but did not",
}
"""Finish reasons a new attempt may get past: the call fails retryable, naming the reason."""
FAILED: dict[str, str] = {
    "MISSING_THOUGHT_SIGNATURE": (
        "the request lacks a thought signature the model needs; the history was edited or comes from another "
        "model without its signatures. Keep the ProviderPart(kind='thought_signature') parts in the history"
    ),
    "PUP_LIMITED_DISABLED": (
        "the account is limited or disabled for violations of Google's Prohibited Use Policy; see the Google AI "
        "Studio console"
    ),
}
"""Finish reasons the same request cannot get past: the call fails, not retryable."""
FINISH_REASONS = frozenset(ENDED | CUT | BLOCKED | set(RETRIED) | set(FAILED))
"""Every finish reason this code knows (a test holds it to the SDK's ``FinishReason``)."""


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def read_parts(
    raw_parts: Sequence[Any], model: str | None = None
) -> list[TextPart | ThoughtPart | ToolCall | ProviderPart]:
    """SDK parts (by attribute) as loopwright parts, each signature in a ProviderPart before its
    part (naming ``model``, the model that made it, when given)."""
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart] = []
    for raw in raw_parts:
        signature = getattr(raw, "thought_signature", None)
        call = getattr(raw, "function_call", None)
        text = getattr(raw, "text", None)
        if call is None and text is None and raw_dict(raw) == {}:
            continue
        alone = call is None and text == "" and signature is not None
        if signature:
            block: dict[str, Any] = {"signature": _b64(signature)}
            if alone:
                block["alone"] = True
            if model:
                block["model"] = model.removeprefix("models/")
            parts.append(ProviderPart(provider=PROVIDER, kind=SIGNATURE, block=block))
        if call is not None:
            call_id = call.id or f"{LOCAL_ID}{new_call_id()}"
            parts.append(from_wire.call(call_id, call.name or "", dict(call.args or {})))
        elif text is not None:
            if text == "":
                continue
            parts.append(from_wire.thought(text=text) if getattr(raw, "thought", None) else from_wire.text(text))
        else:
            block = raw_dict(raw)
            block.pop("thought_signature", None)
            kind = next(iter(block), "part")
            parts.append(ProviderPart(provider=PROVIDER, kind=RAW, block=block, text=f"[{kind}]"))
    return parts


def raw_dict(raw: Any) -> dict[str, Any]:
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", exclude_none=True)
        return data if isinstance(data, dict) else {}
    return dict(raw) if isinstance(raw, dict) else {}


def usage_of(metadata: Any) -> tuple[Usage, int]:
    """The reply's usage as loopwright counts it, and its thought tokens (within output)."""
    if metadata is None:
        return from_wire.usage(requests=1), 0
    prompt = getattr(metadata, "prompt_token_count", None) or 0
    cached = getattr(metadata, "cached_content_token_count", None) or 0
    tool_prompt = getattr(metadata, "tool_use_prompt_token_count", None) or 0
    candidates = getattr(metadata, "candidates_token_count", None) or 0
    thoughts = getattr(metadata, "thoughts_token_count", None) or 0
    usage = from_wire.usage(
        input_tokens=max(prompt - cached, 0) + tool_prompt,
        output_tokens=candidates + thoughts,
        cache_read_tokens=cached,
        requests=1,
    )
    return usage, thoughts


def finish_name(value: Any) -> str | None:
    if value is None:
        return None
    name = getattr(value, "name", None) or getattr(value, "value", None) or str(value)
    return str(name).removeprefix("FinishReason.")


def to_response(
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart],
    finish: str | None,
    metadata: Any,
    *,
    model: str | None,
    response_id: str | None,
    safety: Any = None,
    finish_message: str | None = None,
) -> ModelResponse:
    """A finished reply (streamed replies are assembled first) as a ModelResponse."""
    usage, thoughts = usage_of(metadata)
    details: dict[str, Any] = {"id": response_id, "finish_reason": finish}
    if thoughts:
        details["thoughts_tokens"] = thoughts
    stop: StopReason | None
    why = f": {finish_message}" if finish_message else ""
    if finish in CUT:
        stop = "max_tokens"
    elif finish in BLOCKED:
        blocked = blocked_categories(safety)
        if not usable_parts(parts):
            shown = f" ({', '.join(blocked)})" if blocked else ""
            raise ModelError(
                f"the Gemini API withheld the reply: finish_reason {finish}{shown}{why}. Rephrase the request, or "
                "change safety_settings where the policy allows it",
                retryable=False,
            )
        details["blocked"] = blocked
        stop = "refusal"
    elif finish in RETRIED:
        raise ModelError(f"{RETRIED[finish]} (finish_reason {finish}{why}); a retry usually helps", retryable=True)
    elif finish in FAILED:
        raise ModelError(f"{FAILED[finish]} (finish_reason {finish}{why})", retryable=False)
    elif finish is not None and finish not in ENDED:
        raise ModelError(
            f"the Gemini API ended the reply with finish_reason {finish}{why}, which this version of loopwright does "
            "not know (it would have ended the run with an empty answer); upgrade loopwright",
            retryable=True,
        )
    elif any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    elif not usable_parts(parts):
        raise ModelError(
            f"the Gemini API answered with an empty reply (finish_reason {finish}{why}: no text and no function call); "
            "a retry usually helps",
            retryable=True,
        )
    else:
        stop = "end_turn"
    return from_wire.reply(parts, stop, model, usage, details)


def blocked_categories(ratings: Any) -> list[str]:
    out = []
    for rating in ratings or ():
        if getattr(rating, "blocked", None):
            out.append(finish_name(getattr(rating, "category", None)) or "?")
    return [name.removeprefix("HarmCategory.") for name in out]


def usable_parts(parts: Sequence[Any]) -> bool:
    """The reply has something to keep: visible text, a function call, a provider part."""
    for part in parts:
        kind = type(part)
        if kind is TextPart and part.text.strip():
            return True
        if kind is ToolCall or (kind is ProviderPart and part.kind == RAW):
            return True
    return False


def merge_chunk(merged: list[Any], chunk_parts: Sequence[Any]) -> None:
    """Add one streamed chunk's SDK parts to ``merged``: text continues the text part before it
    (same ``thought`` flag, not yet signed) and a signature arriving on it (or on an empty text
    piece of its own) signs that part, so
    the assembled parts equal the non-streamed reply's."""
    for raw in chunk_parts:
        text = getattr(raw, "text", None)
        last = merged[-1] if merged else None
        if (
            text is not None
            and getattr(raw, "function_call", None) is None
            and last is not None
            and getattr(last, "text", None) is not None
            and getattr(last, "function_call", None) is None
            and (text == "" or bool(getattr(last, "thought", None)) == bool(getattr(raw, "thought", None)))
            and not getattr(last, "thought_signature", None)
        ):
            update: dict[str, Any] = {"text": last.text + text}
            if getattr(raw, "thought_signature", None):
                update["thought_signature"] = raw.thought_signature
            merged[-1] = last.model_copy(update=update)
        else:
            merged.append(raw)


def blocked_prompt(reply: Any) -> None:
    feedback = getattr(reply, "prompt_feedback", None)
    reason = getattr(feedback, "block_reason", None)
    if reason is None:
        return
    message = getattr(feedback, "block_reason_message", None)
    why = f": {message}" if message else ""
    raise ModelError(
        f"the Gemini API blocked the prompt (block_reason {finish_name(reason)}{why}); nothing was generated. "
        "Rephrase the request, or change safety_settings where the policy allows it",
        retryable=False,
    )


class Assembly:
    """A streamed reply put together chunk by chunk (see :func:`merge_chunk`)."""

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.last: Any = None
        self.candidate: Any = None
        self.finish: Any = None
        self.usage: Any = None

    def add(self, chunk: Any) -> Any:
        """Take one chunk; its parts (for the deltas)."""
        self.last = chunk
        self.usage = chunk.usage_metadata or self.usage
        if not chunk.candidates:
            return ()
        self.candidate = candidate = chunk.candidates[0]
        self.finish = candidate.finish_reason or self.finish
        raw = (candidate.content.parts if candidate.content else None) or ()
        merge_chunk(self.parts, raw)
        return raw

    def response(self, model: str, made_by: str | None = None) -> ModelResponse:
        last, candidate = self.last, self.candidate
        if last is None:
            raise ModelError("the reply stream held no chunks (a proxy or gateway may have answered)", retryable=True)
        if self.finish is None:
            blocked_prompt(last)
            raise ModelError(
                "the reply stream ended before the reply was complete (no finish_reason); the partial reply was "
                "discarded",
                retryable=True,
            )
        return to_response(
            read_parts(self.parts, made_by),
            finish_name(self.finish),
            self.usage,
            model=last.model_version or model,
            response_id=last.response_id,
            safety=candidate.safety_ratings if candidate is not None else None,
            finish_message=candidate.finish_message if candidate is not None else None,
        )
