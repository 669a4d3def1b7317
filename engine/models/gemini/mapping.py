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
  the exact bytes) and the model that made it; it goes back on the same part, so signatures
  survive byte for byte. Other providers skip it, and Gemini never sees another provider's signed
  thinking. A signature another Gemini model made is dropped (the model would refuse it).
- Cross-provider history: on Gemini 3 and later, a step whose first function call carries no
  signature of this model (Claude or OpenAI made it, or another Gemini model) gets Google's
  documented placeholder (:data:`PLACEHOLDER`), as Google asks for migrated histories; without it
  the API answers 400 "Function call is missing a thought_signature".
- Tool results that hold images or PDFs: on Gemini 3 and later they go as multimodal function
  responses (``function_response.parts``, each named by a ``{"$ref": ...}`` in the response);
  older models get them as inline parts after the function responses of the same turn.
- Parts loopwright does not interpret (code execution, model-made files...) are kept whole as
  ``ProviderPart(kind="part")`` and sent back unchanged.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from ...data.errors import ConfigurationError, ModelError
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
_CHOICE = {"auto": "AUTO", "any": "ANY", "none": "NONE", "validated": "VALIDATED"}
PLACEHOLDER = b"skip_thought_signature_validator"
"""The signature Google documents for function calls the model did not make (histories migrated
from another model, calls a program injected): accepted by the Gemini API and Vertex AI."""
_MEDIA = ("image", "document")


def bare(model: str | None) -> str:
    """A model id without the ``models/`` prefix."""
    return (model or "").removeprefix("models/")


def gemini_major(model: str | None) -> int:
    """The major version of a Gemini model id (``gemini-3-flash-preview`` → 3; 0: not a Gemini id)."""
    rest = bare(model).removeprefix("gemini-")
    major = rest.split(".", 1)[0].split("-", 1)[0]
    return int(major) if major.isdigit() and rest != bare(model) else 0


# ------------------------------------------------------------------ requests


def to_contents(history: Sequence[Message], model: str | None = None) -> list[dict[str, Any]]:
    """The conversation as ``contents`` for ``model`` (see the module docstring; without a model,
    every Gemini signature goes back and no placeholder is added)."""
    strict = gemini_major(model) >= 3
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
        parts = to_parts(given, model=model, multimodal=strict)
        if not parts:
            continue
        if strict and role == "model":
            _sign_first_call(parts)
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


def _sign_first_call(parts: list[dict[str, Any]]) -> None:
    """Gemini 3 checks the first function call of each step for a signature: a step it did not
    make gets the documented placeholder."""
    first = next((p for p in parts if "function_call" in p), None)
    if first is not None and not first.get("thought_signature"):
        first["thought_signature"] = PLACEHOLDER


def _own(block: dict[str, Any], model: str | None) -> bool:
    """The signature was made by ``model`` (or by an unnamed model: histories from before the
    model was recorded, and requests mapped without a model)."""
    made_by = block.get("model")
    return model is None or not isinstance(made_by, str) or bare(made_by) == bare(model)


def _signature(block: dict[str, Any], model: str | None, out: list[dict[str, Any]]) -> bytes | None:
    """The signature a ProviderPart holds, for the part after it (None: another Gemini model's,
    or one that stands alone, which goes to ``out`` as its own part)."""
    if not _own(block, model):
        return None
    signature = base64.b64decode(str(block["signature"]))
    if block.get("alone"):
        out.append({"text": "", "thought_signature": signature})
        return None
    return signature


def to_parts(parts: Sequence[Any], *, model: str | None = None, multimodal: bool = True) -> list[dict[str, Any]]:
    """One message's parts as Gemini parts, signatures put back on the parts they signed (those
    another Gemini model made are dropped when ``model`` is given). ``multimodal``: images in
    tool results go inside the function response (Gemini 3), else after it."""
    out: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    signature: bytes | None = None
    for part in parts:
        kind = type(part)
        if kind is ProviderPart:
            if part.provider != PROVIDER:
                continue
            if part.kind == SIGNATURE:
                signature = _signature(part.block, model, out)
                continue
            if part.kind == RAW:
                block = dict(part.block)
            else:
                continue
        elif kind is ToolResult:
            block, media_parts = function_response(part, multimodal=multimodal)
            after += media_parts
        else:
            converted = to_part(part)
            if converted is None:
                continue
            block = converted
        if signature is not None:
            block["thought_signature"] = signature
            signature = None
        out.append(block)
    return out + after


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
        return function_response(part)[0]
    if kind is ImagePart or kind is DocumentPart:
        return media(part.model_dump(exclude_none=True))
    if kind is ThoughtPart:
        # Gemini's own thoughts carry no signature here (theirs travel in a ProviderPart); a signed
        # or redacted thought is another provider's and means nothing to Gemini
        if part.signature or part.redacted or not part.text:
            return None
        return {"text": part.text, "thought": True}
    return None


def function_response(part: ToolResult, *, multimodal: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tool result as a ``function_response`` part, and the media parts that go after it in
    the same turn (models before Gemini 3, which take no media inside a function response).

    An image or document in the result (the result itself, or an item of a list) is replaced by
    ``{"$ref": "<name>"}`` and sent as a ``function_response.parts`` blob of that
    ``display_name`` (Gemini 3), or as an inline part after the responses."""
    key = "error" if part.is_error else "result"
    content: Any = part.content
    items: list[Any] = content if isinstance(content, list) else [content]
    blobs: list[dict[str, Any]] = []
    if any(_is_media(i) for i in items):
        plain: list[Any] = []
        for item in items:
            if not _is_media(item):
                plain.append(item)
                continue
            name = f"{part.call_id}_{len(blobs) + 1}"
            blobs.append(_blob(item, name))
            plain.append({"$ref": name})
        content = plain if isinstance(part.content, list) else plain[0]
    response: dict[str, Any] = {"name": part.name, "response": {key: content}}
    if not part.call_id.startswith(LOCAL_ID):
        response["id"] = part.call_id
    if not blobs:
        return {"function_response": response}, []
    if multimodal:
        response["parts"] = blobs
        return {"function_response": response}, []
    return {"function_response": response}, [_unnamed(b) for b in blobs]


def _is_media(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") in _MEDIA and bool(item.get("data") or item.get("url"))


def _blob(item: dict[str, Any], name: str) -> dict[str, Any]:
    """An image or document item of a tool result as a function-response part named ``name``."""
    mime = item.get("media_type") or ("application/pdf" if item["type"] == "document" else "image/png")
    if item.get("url"):
        return {"file_data": {"file_uri": item["url"], "mime_type": mime, "display_name": name}}
    data = base64.b64decode(str(item["data"]))
    return {"inline_data": {"mime_type": mime, "data": data, "display_name": name}}


def _unnamed(blob: dict[str, Any]) -> dict[str, Any]:
    """A function-response blob as a plain part (``display_name`` belongs to function responses)."""
    key = "inline_data" if "inline_data" in blob else "file_data"
    return {key: {k: v for k, v in blob[key].items() if k != "display_name"}}


def media(part: dict[str, Any]) -> dict[str, Any]:
    """An image or document part (as data) as a Gemini part."""
    mime = part.get("media_type") or ("application/pdf" if part["type"] == "document" else "image/png")
    if part.get("url"):
        return {"file_data": {"file_uri": part["url"], "mime_type": mime}}
    if part.get("data"):
        return {"inline_data": {"mime_type": mime, "data": base64.b64decode(part["data"])}}
    title = f"{part['title']}:\n" if part.get("title") else ""
    return {"text": title + (part.get("text") or "")}


def tool_config(choice: Any, names: Sequence[str] = ()) -> dict[str, Any] | None:
    """The ``tool_config`` for a tool choice: ``"auto"``, ``"any"``, ``"none"``, ``"validated"``
    (Gemini's mode that holds calls to the schemas but lets the model answer in text), a list of
    tool names (``ANY`` limited to them: ``allowed_function_names``), or
    ``{"mode": ..., "allowed_function_names": [...]}``; None: the API's default. ``names``: the
    request's tools (a name outside them is refused: the API would answer 400)."""
    if choice is None:
        return None
    if isinstance(choice, str):
        return {"function_calling_config": {"mode": _CHOICE[choice.lower()]}}
    if isinstance(choice, list | tuple):
        choice = {"mode": "any", "allowed_function_names": list(choice)}
    mode = str(choice.get("mode", "any")).lower()
    config: dict[str, Any] = {"mode": _CHOICE[mode]}
    allowed = list(choice.get("allowed_function_names") or ())
    if allowed:
        unknown = sorted(set(allowed) - set(names))
        if unknown:
            raise ModelError(
                f"tool_choice names {', '.join(map(repr, unknown))}, which the agent has no tool of; "
                f"its tools: {', '.join(map(repr, names)) or '(none)'}. Name tools the agent has",
                retryable=False,
            )
        config["allowed_function_names"] = allowed
    return {"function_calling_config": config}


def check_tool_choice(choice: Any, where: str) -> Any:
    """A ``tool_choice`` option checked (see :func:`tool_config`); the value as given."""
    modes = sorted(_CHOICE)
    if isinstance(choice, str) and choice.lower() in _CHOICE:
        return choice
    if isinstance(choice, list | tuple) and choice and all(isinstance(n, str) for n in choice):
        return list(choice)
    if (
        isinstance(choice, dict)
        and set(choice) <= {"mode", "allowed_function_names"}
        and str(choice.get("mode", "any")).lower() in _CHOICE
        and all(isinstance(n, str) for n in choice.get("allowed_function_names") or ())
    ):
        if choice.get("allowed_function_names") and str(choice.get("mode", "any")).lower() not in ("any", "validated"):
            raise ConfigurationError(
                f"{where}: tool_choice={choice!r}: allowed_function_names goes with mode 'any' or 'validated' "
                "(the Gemini API refuses it with other modes)"
            )
        return choice
    raise ConfigurationError(
        f"{where}: tool_choice={choice!r} is not a tool choice Gemini takes; give one of {modes}, a list of tool "
        "names (mode ANY limited to them), or {'mode': 'any' | 'validated', 'allowed_function_names': [...]}"
    )


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
