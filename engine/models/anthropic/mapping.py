"""loopwright's messages as Messages API JSON, and Messages API replies as loopwright's.

No ``anthropic`` import: replies are read by attribute (the SDK's pydantic types) and blocks
loopwright does not interpret are kept whole as :class:`ProviderPart` (``to_dict()`` of the
SDK's block), sent back to the API unchanged.

History rules:

- Same-role turns are merged, tool results go first in their user turn, blank text is not sent,
  unsigned thinking (cut off before its signature) is not sent.
- A reply cut by ``max_tokens`` is never continued by prefill (Claude 4.6 and later refuse it,
  and no model accepts it with thinking on): a short user turn (:data:`CONTINUE`) asks the model
  to go on, both at the end of the history and between a cut turn and its continuation, so every
  request repeats the one before it as its prefix (and the cache keeps working).
- A reply the API paused (``pause_turn``, a long server tool turn) goes back last, unchanged, as
  the API asks.
- Cross-provider history: thinking goes back only as Claude made it (signed ``thinking``,
  ``redacted_thinking``); other providers' thoughts, reasoning items and signatures are not sent.
  With thinking on, the API wants the last assistant turn of a tool loop to start with Claude's
  thinking: when another provider made that turn (a fallback in the middle of a tool loop), the
  request goes without ``thinking`` (:func:`foreign_tool_turn`), as the API advises.
- Caching (``cache`` given): the last static instruction and the last block of the history carry
  ``cache_control`` (a moving breakpoint: each request reads what the one before wrote);
  dynamic instructions travel after the cached prefix, at the end of the last user turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...data.errors import ModelError
from ...data.events import (
    DocumentPart,
    ImagePart,
    Instruction,
    Message,
    ModelResponse,
    ProviderPart,
    StopReason,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
)
from .. import from_wire

PROVIDER = "anthropic"
CONTINUE = (
    "Your previous reply was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating or summarising what you already wrote."
)
"""The user turn that asks for the rest of a cut reply (never a prefill)."""
REPLY = "reply"
"""The ProviderPart kind that records how a reply ended (pause_turn, container), never sent."""
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    "model_context_window_exceeded": "max_tokens",  # cut short all the same: the loop decides
}
_CACHEABLE = frozenset({"text", "tool_use", "tool_result", "image", "document"})
SERVER_BLOCKS = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "compaction",
    }
)
"""Provider blocks this code knows to keep and send back (others are kept too, but a reply made
only of unknown ones is an error, not an empty answer)."""


def cache_control(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


# ------------------------------------------------------------------ requests


def to_system(instructions: Sequence[Instruction], ttl: str | None = None) -> list[dict[str, Any]]:
    """System blocks, in order; with ``ttl``, the last static one marks the cached prefix."""
    given = [i for i in instructions if i.text]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": i.text} for i in given]
    cached = [n for n, i in enumerate(given) if i.cache]
    if cached and ttl is not None:
        blocks[cached[-1]]["cache_control"] = cache_control(ttl)
    return blocks


def paused(message: Message) -> bool:
    """The API paused this assistant turn (``pause_turn``): it goes back as it is."""
    return any(type(p) is ProviderPart and p.kind == REPLY and p.block.get("stop_reason") == "pause_turn"
               for p in message.parts)  # fmt: skip


def to_messages(history: Sequence[Message], *, continue_cut: bool = True) -> list[dict[str, Any]]:
    """The conversation as the Messages API wants it (see the module docstring).

    ``continue_cut=False`` keeps the old shape (a cut assistant turn left last, a prefill) for
    callers that want it; loopwright itself never asks for that."""
    merged: list[dict[str, Any]] = []
    last_paused = False
    for message in history:
        content = [block for part in message.parts if (block := to_block(part)) is not None]
        if not content:
            continue
        if merged and merged[-1]["role"] == message.role:
            if message.role == "assistant" and continue_cut and not last_paused:
                merged += [_continue_turn(), {"role": "assistant", "content": content}]
            else:
                merged[-1]["content"].extend(content)
        else:
            merged.append({"role": message.role, "content": content})
        if message.role == "assistant":
            last_paused = paused(message)
    for turn in merged:  # the API wants tool_result blocks before any text in a user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    if merged and merged[-1]["role"] == "assistant":
        _end_with_assistant(merged, continue_cut and not last_paused)
    return merged


def _continue_turn() -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": CONTINUE}]}


def _end_with_assistant(merged: list[dict[str, Any]], ask: bool) -> None:
    """A history that ends with the assistant: ask for the rest, or (a paused turn) send it last
    as it is, without the trailing white space the API refuses."""
    if ask:
        merged.append(_continue_turn())
        return
    last = merged[-1]["content"][-1]
    if last["type"] == "text":  # never blank (see to_block), so never empty once stripped
        last["text"] = last["text"].rstrip()


def foreign_tool_turn(messages: list[dict[str, Any]]) -> bool:
    """The last assistant turn asked for tools without Claude's thinking before them (another
    provider made it, or thinking was off): with thinking on, the API refuses such a request
    ("a final `assistant` message must start with a thinking block")."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None or not any(b.get("type") == "tool_use" for b in last["content"]):
        return False
    return last["content"][0].get("type") not in ("thinking", "redacted_thinking")


def mark_history(messages: list[dict[str, Any]], ttl: str) -> None:
    """Put the moving cache breakpoint on the last cacheable block of the history, and a second
    one on the last block of the request before (the turns before the latest assistant turn).

    The API looks for a cached prefix at a breakpoint and up to 20 blocks before it: a step of
    12 parallel calls adds 25 blocks (12 ``tool_use``, 12 ``tool_result``, a text), so from the
    last block alone the previous request's cache is out of sight and the whole history is
    written again. The second breakpoint sits exactly where the previous request's moving one
    did, so it reads that cache (it writes nothing that was not written before). With the system
    prompt's, three of the four breakpoints the API allows."""
    last = _mark_last(messages, len(messages), ttl)
    if last is None:
        return
    for i in range(last - 1, 0, -1):  # the latest assistant turn; the request before ended just before it
        if messages[i]["role"] == "assistant":
            _mark_last(messages, i, ttl)
            return


def _mark_last(messages: list[dict[str, Any]], end: int, ttl: str) -> int | None:
    """Mark the last cacheable block of ``messages[:end]``; the index of its turn (None: none)."""
    for i in range(end - 1, -1, -1):
        for block in reversed(messages[i]["content"]):
            if block.get("type") in _CACHEABLE:
                block["cache_control"] = cache_control(ttl)
                return i
    return None


def add_dynamic(messages: list[dict[str, Any]], dynamic: list[str]) -> bool:
    """Append the dynamic instructions to the last user turn (after the cached prefix). False
    when the history does not end with a user turn (they then go into ``system``)."""
    if not dynamic or not messages or messages[-1]["role"] != "user":
        return False
    text = "\n\n".join(dynamic)
    messages[-1]["content"].append({"type": "text", "text": f"<instructions>\n{text}\n</instructions>"})
    return True


def to_block(part: Any) -> dict[str, Any] | None:
    """One part as an API content block (None: not sent)."""
    kind = type(part)
    if kind is TextPart:
        return {"type": "text", "text": part.text} if part.text.strip() else None  # the API refuses blank text
    if kind is ToolCall:
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.args}
    if kind is ToolResult:
        return {
            "type": "tool_result",
            "tool_use_id": part.call_id,
            "content": _result_content(part.content),
            "is_error": part.is_error,
        }
    if kind is ImagePart or kind is DocumentPart:
        return _media(part.model_dump(exclude_none=True))
    if kind is ThoughtPart:
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.data or ""}
        if not part.signature:  # not Claude's own (or cut off before it was signed): the API would refuse it
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if kind is ProviderPart:
        if part.provider != PROVIDER or part.kind == REPLY:
            return None
        return dict(part.block)
    return None


def _is_media(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in ("image", "document")


def _is_block(value: Any) -> bool:
    """An image, a document, or a ``search_result`` block (which goes to the API as it is)."""
    return isinstance(value, dict) and value.get("type") in ("image", "document", "search_result")


def _result_content(content: Any) -> Any:
    """A tool's result: text, or (when it holds images, documents or search results) a list of
    content blocks."""
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else [content]
    if not any(_is_block(item) for item in items):
        return json.dumps(content)
    return [_result_block(item) for item in items]


def _result_block(item: Any) -> dict[str, Any]:
    if _is_media(item):
        return _media(item)
    if isinstance(item, dict) and item.get("type") == "search_result":
        return dict(item)  # (its citations come back as search_result_location on the reply)
    return _text_block(item)


def _text_block(item: Any) -> dict[str, Any]:
    return {"type": "text", "text": item if isinstance(item, str) else json.dumps(item)}


def _media(part: dict[str, Any]) -> dict[str, Any]:
    """An image or document part (as data) as the API's block."""
    if part.get("file_id"):  # uploaded with the Files API (its beta: files-api-2025-04-14)
        source: dict[str, Any] = {"type": "file", "file_id": part["file_id"]}
    elif part.get("url"):
        source = {"type": "url", "url": part["url"]}
    elif part.get("data"):
        source = {"type": "base64", "media_type": part.get("media_type"), "data": part["data"]}
    else:
        source = {"type": "text", "media_type": "text/plain", "data": part.get("text") or ""}
    block: dict[str, Any] = {"type": part["type"], "source": source}
    if part["type"] == "document":
        if part.get("title"):
            block["title"] = part["title"]
        if part.get("citations") is not None:
            block["citations"] = {"enabled": bool(part["citations"])}
    return block


# ------------------------------------------------------------------ replies


def _plain(block: Any) -> dict[str, Any]:
    """An SDK block as the JSON the API sent (unset fields left out)."""
    to_dict = getattr(block, "to_dict", None)
    data = to_dict() if callable(to_dict) else block.model_dump(mode="json", exclude_unset=True)
    if not isinstance(data, dict):
        raise ModelError(f"the reply held a content block loopwright cannot read: {data!r:.200}", retryable=False)
    return {k: v for k, v in data.items() if v is not None}  # older SDKs fill in absent fields with None


def to_response(message: Any) -> ModelResponse:
    """A Messages API reply (streamed or not: the same type) as a ModelResponse."""
    if not hasattr(message, "content") or not hasattr(message, "usage"):
        raise ModelError(
            f"the Anthropic API answered with something that is not a message ({type(message).__name__}: "
            f"{str(message)[:200]!r}); a proxy or gateway in between may have answered instead",
            retryable=True,
        )
    stop = _STOP_REASONS.get(message.stop_reason or "")
    blocks = list(message.content)
    if stop == "max_tokens" and blocks and blocks[-1].type == "tool_use":
        blocks.pop()  # cut off mid-arguments: never run a call with half its input
    parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart] = []
    citations: list[Any] = []
    for block in blocks:
        kind = block.type
        if kind == "text":
            parts.append(from_wire.text(block.text))
            if getattr(block, "citations", None):
                citations.extend(_plain(c) for c in block.citations)
        elif kind == "tool_use":
            parts.append(from_wire.call(block.id, block.name, dict(block.input or {})))
        elif kind == "thinking":
            parts.append(from_wire.thought(text=block.thinking, signature=block.signature))
        elif kind == "redacted_thinking":
            parts.append(from_wire.thought(redacted=True, data=block.data))
        else:  # server tool use and results, compaction, container uploads, kinds newer than this code
            parts.append(ProviderPart(provider=PROVIDER, kind=str(kind), block=_plain(block)))
    _refuse_unknown_only(parts, stop)
    details = _details(message, citations)
    if message.stop_reason == "pause_turn" or details.get("container"):
        reply = {"stop_reason": message.stop_reason, "container": details.get("container")}
        parts.append(ProviderPart(provider=PROVIDER, kind=REPLY, block=reply))
    usage = message.usage
    counts = from_wire.usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        requests=1,
        cache_creation_1h_tokens=getattr(getattr(usage, "cache_creation", None), "ephemeral_1h_input_tokens", 0) or 0,
        server_tool_uses=_server_tool_uses(usage),
    )
    return from_wire.reply(parts, stop, message.model, counts, details)


def _server_tool_uses(usage: Any) -> int:
    """The server tool calls the reply was billed for (web search, web fetch, code execution...)."""
    counts = getattr(usage, "server_tool_use", None)
    if counts is None:
        return 0
    return sum(v for v in _plain(counts).values() if isinstance(v, int) and not isinstance(v, bool))


def _refuse_unknown_only(parts: list[TextPart | ThoughtPart | ToolCall | ProviderPart], stop: str | None) -> None:
    """A finished reply made only of blocks this code does not know would end the run with an
    empty answer: say so instead."""
    if stop in ("max_tokens", "pause_turn") or not parts:
        return
    unknown = [p.kind for p in parts if type(p) is ProviderPart and p.kind not in SERVER_BLOCKS]
    if unknown and all(type(p) is ProviderPart for p in parts):
        raise ModelError(
            f"the reply held only a content block of type {unknown[0]!r}, which this version of loopwright does not "
            "know (it would have ended the run with an empty answer); upgrade loopwright, or turn off the feature "
            "that produces it",
            retryable=False,
        )


def _details(message: Any, citations: list[Any]) -> dict[str, Any]:
    details: dict[str, Any] = {"id": getattr(message, "id", None)}
    if getattr(message, "stop_sequence", None):
        details["stop_sequence"] = message.stop_sequence
    if message.stop_reason == "model_context_window_exceeded":
        details["stop_reason"] = message.stop_reason
    container = getattr(message, "container", None)
    if container is not None:
        details["container"] = getattr(container, "id", None)
    server = getattr(message.usage, "server_tool_use", None)
    if server is not None:
        details["server_tool_use"] = _plain(server)
    if citations:
        details["citations"] = citations
    edits = _context_edits(message)  # the beta API: what context editing cleared
    if edits is not None:
        details["context_management"] = _plain(edits)
    return details


def _context_edits(message: Any) -> Any:
    """``getattr(message, "context_management", None)``, without asking a GA ``Message`` (which has
    no such field) through pydantic's ``__getattr__``: a failing lookup raises and catches an
    AttributeError, 1.5-3 µs, a third of a reply's conversion. A field the server sent anyway
    is among the model's extras (the SDK's models allow them), where ``__getattr__`` finds it."""
    kind = type(message)
    declared = _DECLARES_EDITS.get(kind)
    if declared is None:
        fields = getattr(kind, "model_fields", None)
        declared = _DECLARES_EDITS[kind] = fields is None or "context_management" in fields
    if declared:
        return getattr(message, "context_management", None)
    extra = message.model_extra
    return extra.get("context_management") if extra else None


_DECLARES_EDITS: dict[type, bool] = {}
"""Per reply class: it has a ``context_management`` field (or is not a pydantic model)."""


def usable(response: ModelResponse) -> bool:
    """The reply has something to keep: visible text, a tool call, signed thinking, a server block."""
    for part in response.parts:
        kind = type(part)
        if kind is TextPart and part.text.strip():  # type: ignore[union-attr]
            return True
        if kind is ToolCall or (kind is ProviderPart and part.kind != REPLY):  # type: ignore[union-attr]
            return True
        if kind is ThoughtPart and (part.signature or part.redacted):  # type: ignore[union-attr]
            return True
    return False


def last_container(history: Sequence[Message]) -> str | None:
    """The code-execution container of the latest reply that had one (reused by the next request)."""
    for message in reversed(history):
        if message.role != "assistant":
            continue
        for part in message.parts:
            if type(part) is ProviderPart and part.kind == REPLY and part.block.get("container"):
                value = part.block["container"]
                return value if isinstance(value, str) else None
    return None


# ------------------------------------------------------------------ token estimate

IMAGE_TOKENS = 1_600
"""What one image counts in :func:`estimate_tokens` (the API bills about (w*h)/750 tokens, at
most about 1,600 for an image it does not downscale further)."""


def estimate_tokens(params: dict[str, Any]) -> int:
    """A local, deliberately generous estimate of a request's input tokens: about four characters
    of its JSON (system, messages, tools) a token, an image :data:`IMAGE_TOKENS`. Cached prefixes
    count in full (a cache read is still billed, at a tenth, and counts toward ``max_total_tokens``
    as the API reports it)."""
    images = 0

    def strip(value: Any) -> Any:
        nonlocal images
        if isinstance(value, dict):
            if value.get("type") == "image":
                images += 1
                return None
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    body = strip({k: params.get(k) for k in ("system", "messages", "tools")})
    return len(json.dumps(body, separators=(",", ":"))) // 4 + images * IMAGE_TOKENS
