"""loopwright's messages as Gemini ``generateContent`` arguments (replies: :mod:`.gemini_replies`).

No ``google.genai`` import: requests are built as the SDK's plain-dict shapes (snake_case, the
SDK validates them).

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

from ...data.events import (
    DocumentPart,
    ImagePart,
    Message,
    ProviderPart,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
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


# ------------------------------------------------------------------ requests


def to_contents(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as ``contents`` (see the module docstring)."""
    merged: list[dict[str, Any]] = []
    order: dict[str, int] = {}
    for message in history:
        role = "model" if message.role == "assistant" else "user"
        given = message.parts
        if role == "model":
            calls = [p.id for p in given if type(p) is ToolCall]
            order = {call_id: n for n, call_id in enumerate(calls)} if calls else order
        elif any(type(p) is ToolResult for p in given):  # answers first, in the order of the calls
            given = tuple(sorted(given, key=lambda p: _rank(p, order)))
        parts = to_parts(given)
        if not parts:
            continue
        if merged and merged[-1]["role"] == role:
            if role == "model":
                merged += [_continue_turn(), {"role": role, "parts": parts}]
            else:
                merged[-1]["parts"].extend(parts)
                merged[-1]["parts"].sort(key=lambda p: "function_response" not in p)
        else:
            merged.append({"role": role, "parts": parts})
    if merged and merged[-1]["role"] == "model":
        merged.append(_continue_turn())
    return merged


def _rank(part: Any, order: dict[str, int]) -> tuple[int, int]:
    if type(part) is not ToolResult:
        return (1, 0)
    return (0, order.get(part.call_id, len(order)))


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
        return {"function_call": call}
    if kind is ToolResult:
        key = "error" if part.is_error else "result"
        response: dict[str, Any] = {"name": part.name, "response": {key: _plain_result(part.content)}}
        if not part.call_id.startswith(LOCAL_ID):
            response["id"] = part.call_id
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
