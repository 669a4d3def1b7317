"""loopwright's messages as Gemini ``generateContent`` arguments, and Gemini replies as loopwright's.

No ``google.genai`` import: requests are built as the SDK's plain-dict shapes (snake_case, the
SDK validates them), replies are read by attribute (the SDK's pydantic types).

- Roles: ``assistant`` is Gemini's ``model``. Same-role turns are merged; a cut model turn and
  its continuation get a short user turn between them (:data:`CONTINUE`), and a history that
  ends with the model asks it to continue the same way (never a prefill).
- Function calls: ``ToolCall`` ⇄ ``function_call`` (the API's ``id`` kept where it sent one; a
  call without one gets a local id that is never sent back). Tool results are
  ``function_response`` parts, first in their user turn and in the order of the calls.
- Thought signatures: a part the API signed is preceded in the history by a
  ``ProviderPart(provider="gemini", kind="thought_signature")`` holding the signature (base64 of
  the exact bytes); it goes back on the same part, so signatures survive byte for byte. Other
  providers skip it, and Gemini never sees another provider's signed thinking.
- Parts loopwright does not interpret (code execution, model-made files...) are kept whole as
  ``ProviderPart(kind="part")`` and sent back unchanged.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from ..data.errors import ModelError
from ..data.events import (
    DocumentPart,
    ImagePart,
    Message,
    ModelResponse,
    ProviderPart,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    Usage,
    new_call_id,
)

PROVIDER = "gemini"
SIGNATURE = "thought_signature"
RAW = "part"
LOCAL_ID = "gemini_local_"
"""Prefix of the ids loopwright gives function calls the API sent without one (never sent back)."""
CONTINUE = (
    "Your previous reply was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating or summarising what you already wrote."
)
STRUCTURED_PREFIX = (
    "When you give your final answer (not while you still call tools), reply with only one JSON "
    "object, no other text, that validates against this JSON schema:\n"
)
"""How the structured_output feature's instruction begins (pinned by a test): its schema is sent
as ``response_json_schema`` where the model can take it (see :func:`native_schema`)."""
_CHOICE = {"auto": "AUTO", "any": "ANY", "none": "NONE"}
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
    }
)
"""Finish reasons that mean the API stopped (or withheld) the reply on a policy."""


# ------------------------------------------------------------------ requests


def to_contents(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as ``contents`` (see the module docstring)."""
    merged: list[dict[str, Any]] = []
    for message in history:
        role = "model" if message.role == "assistant" else "user"
        parts = to_parts(message.parts)
        if not parts:
            continue
        if merged and merged[-1]["role"] == role:
            if role == "model":
                merged += [_continue_turn(), {"role": role, "parts": parts}]
            else:
                merged[-1]["parts"].extend(parts)
        else:
            merged.append({"role": role, "parts": parts})
    order: dict[Any, int] = {}
    for turn in merged:
        if turn["role"] == "model":
            calls = [p["function_call"] for p in turn["parts"] if "function_call" in p]
            order = {c.pop("_call"): n for n, c in enumerate(calls)}
        else:  # function responses first, in the order of the calls of the turn before
            turn["parts"].sort(key=lambda p: _rank(p, order))
        for part in turn["parts"]:
            if "function_response" in part:
                part["function_response"].pop("_call", None)
    if merged and merged[-1]["role"] == "model":
        merged.append(_continue_turn())
    return merged


def _rank(part: dict[str, Any], order: dict[Any, int]) -> tuple[int, int]:
    response = part.get("function_response")
    if response is None:
        return (1, 0)
    return (0, order.get(response.get("_call"), len(order)))


def _continue_turn() -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": CONTINUE}]}


def to_parts(parts: Sequence[Any]) -> list[dict[str, Any]]:
    """One message's parts as Gemini parts, signatures put back on the parts they signed."""
    out: list[dict[str, Any]] = []
    signature: bytes | None = None
    for part in parts:
        kind = type(part)
        if kind is ProviderPart:
            if part.provider != PROVIDER:
                continue
            if part.kind == SIGNATURE:
                signature = base64.b64decode(str(part.block["signature"]))
                if part.block.get("alone"):
                    out.append({"text": "", "thought_signature": signature})
                    signature = None
                continue
            if part.kind == RAW:
                block = dict(part.block)
            else:
                continue
        else:
            converted = to_part(part)
            if converted is None:
                continue
            block = converted
        if signature is not None:
            block["thought_signature"] = signature
            signature = None
        out.append(block)
    return out


def to_part(part: Any) -> dict[str, Any] | None:
    """One loopwright part as a Gemini part (None: not sent)."""
    kind = type(part)
    if kind is TextPart:
        return {"text": part.text} if part.text else None
    if kind is ToolCall:
        call: dict[str, Any] = {"name": part.name, "args": part.args}
        if not part.id.startswith(LOCAL_ID):
            call["id"] = part.id
        call["_call"] = part.id  # (for ordering the answers; removed by to_contents)
        return {"function_call": call}
    if kind is ToolResult:
        key = "error" if part.is_error else "result"
        response: dict[str, Any] = {"name": part.name, "response": {key: _plain_result(part.content)}}
        if not part.call_id.startswith(LOCAL_ID):
            response["id"] = part.call_id
        response["_call"] = part.call_id
        return {"function_response": response}
    if kind is ImagePart or kind is DocumentPart:
        return media(part.model_dump(exclude_none=True))
    if kind is ThoughtPart:
        # Gemini's own thoughts carry no signature here (theirs travel in a ProviderPart); a signed
        # or redacted thought is another provider's and means nothing to Gemini
        if part.signature or part.redacted or not part.text:
            return None
        return {"text": part.text, "thought": True}
    return None


def _plain_result(content: Any) -> Any:
    """A tool's result as JSON the API takes (images in a result are described, not sent)."""
    if isinstance(content, list) and any(
        isinstance(i, dict) and i.get("type") in ("image", "document") for i in content
    ):
        return [
            f"[{i['type']} omitted]" if isinstance(i, dict) and i.get("type") in ("image", "document") else i
            for i in content
        ]
    return content


def media(part: dict[str, Any]) -> dict[str, Any]:
    """An image or document part (as data) as a Gemini part."""
    mime = part.get("media_type") or ("application/pdf" if part["type"] == "document" else "image/png")
    if part.get("url"):
        return {"file_data": {"file_uri": part["url"], "mime_type": mime}}
    if part.get("data"):
        return {"inline_data": {"mime_type": mime, "data": base64.b64decode(part["data"])}}
    title = f"{part['title']}:\n" if part.get("title") else ""
    return {"text": title + (part.get("text") or "")}


def tool_config(choice: str | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    return {"function_calling_config": {"mode": _CHOICE[choice]}}


def native_schema(instructions: Sequence[Any]) -> tuple[list[Any], dict[str, Any] | None]:
    """The instructions without the structured_output feature's JSON request, and its schema
    (None when the request has no such instruction)."""
    for n, instruction in enumerate(instructions):
        if instruction.text.startswith(STRUCTURED_PREFIX):
            try:
                schema = json.loads(instruction.text[len(STRUCTURED_PREFIX) :])
            except ValueError:
                return list(instructions), None
            if isinstance(schema, dict):
                return [*instructions[:n], *instructions[n + 1 :]], schema
    return list(instructions), None


# ------------------------------------------------------------------ replies


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def read_parts(raw_parts: Sequence[Any]) -> list[TextPart | ThoughtPart | ToolCall | ProviderPart]:
    """SDK parts (by attribute) as loopwright parts, each signature in a ProviderPart before its part."""
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
            parts.append(ProviderPart(provider=PROVIDER, kind=SIGNATURE, block=block))
        if call is not None:
            call_id = call.id or f"{LOCAL_ID}{new_call_id()}"
            parts.append(ToolCall(id=call_id, name=call.name or "", args=dict(call.args or {})))
        elif text is not None:
            if text == "":
                continue
            parts.append(ThoughtPart(text=text) if getattr(raw, "thought", None) else TextPart(text=text))
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
        return Usage(requests=1), 0
    prompt = getattr(metadata, "prompt_token_count", None) or 0
    cached = getattr(metadata, "cached_content_token_count", None) or 0
    tool_prompt = getattr(metadata, "tool_use_prompt_token_count", None) or 0
    candidates = getattr(metadata, "candidates_token_count", None) or 0
    thoughts = getattr(metadata, "thoughts_token_count", None) or 0
    usage = Usage(
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
    if finish == "MAX_TOKENS":
        stop = "max_tokens"
    elif finish in BLOCKED:
        blocked = blocked_categories(safety)
        if not usable_parts(parts):
            shown = f" ({', '.join(blocked)})" if blocked else ""
            why = f": {finish_message}" if finish_message else ""
            raise ModelError(
                f"the Gemini API withheld the reply: finish_reason {finish}{shown}{why}. Rephrase the request, or "
                "change safety_settings where the policy allows it",
                retryable=False,
            )
        details["blocked"] = blocked
        stop = "refusal"
    elif finish == "MALFORMED_FUNCTION_CALL" or finish == "UNEXPECTED_TOOL_CALL":
        why = f": {finish_message}" if finish_message else ""
        raise ModelError(
            f"the model produced a function call the Gemini API could not read (finish_reason {finish}{why}); "
            "a retry usually helps",
            retryable=True,
        )
    elif any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    else:
        stop = "end_turn"
    return ModelResponse(parts=tuple(parts), stop_reason=stop, model=model, usage=usage, details=details)


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
