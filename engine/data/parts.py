"""The content that flows through the loop: parts (text, thoughts, tool calls and results, images,
documents, provider blocks), messages, instructions, tool specs, the history, model requests and
replies, usage, errors. Frozen pydantic models with a ``type`` discriminator; provider SDK types
never appear here (the adapters translate).
"""

from __future__ import annotations

import base64
import itertools
import operator
import os
import pathlib
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal, overload

from pydantic import BaseModel, Field, JsonValue, NonNegativeInt, TypeAdapter, field_serializer

from .build import FROZEN as _FROZEN
from .build import new_call_id, new_object, set_dict, set_extra, set_fields_set, set_private, share_fields_set, trusted

# ---------------------------------------------------------------- content parts


class TextPart(BaseModel):
    """Visible text from the model or the user."""

    model_config = _FROZEN
    type: Literal["text"] = "text"
    text: str


class ThoughtPart(BaseModel):
    """The model's reasoning. Sent back unchanged on the next request where a provider
    requires it (``signature`` for signed thinking, ``redacted`` with opaque ``data``)."""

    model_config = _FROZEN
    type: Literal["thought"] = "thought"
    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None


class ToolCall(BaseModel):
    """The model asks for one tool call. ``id`` is generated when not given."""

    model_config = _FROZEN
    type: Literal["tool_call"] = "tool_call"
    id: str = Field(default_factory=new_call_id)
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResult(BaseModel):
    """The answer to one tool call, matched by ``call_id``. ``is_error`` results carry a
    message that says what went wrong, for the model to read and recover from."""

    model_config = _FROZEN
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: JsonValue
    is_error: bool = False


class ProviderPart(BaseModel):
    """A provider's own content block that loopwright does not interpret (server tool use and
    its results, web search and fetch results, code execution results, container uploads,
    compaction, citations-bearing blocks of new kinds...). Kept in the history and sent back to
    the same provider unchanged; other providers skip it. ``text`` is a readable summary."""

    model_config = _FROZEN
    type: Literal["provider"] = "provider"
    provider: str
    kind: str
    block: dict[str, JsonValue]
    text: str = ""


class ImagePart(BaseModel):
    """An image in a user turn or a tool's result: base64 ``data`` with its ``media_type``, a
    ``url``, or the ``file_id`` of a file uploaded to the provider (Anthropic's Files API).
    ``ImagePart.from_path("shot.png")`` and ``ImagePart.from_bytes(png)`` read files and bytes
    (PNG, JPEG, GIF, WebP)."""

    model_config = _FROZEN
    type: Literal["image"] = "image"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    file_id: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str | None = None) -> ImagePart:
        media_type = media_type or sniff_media_type(data)
        if media_type is None or not media_type.startswith("image/"):
            raise ValueError("ImagePart.from_bytes: not a PNG, JPEG, GIF or WebP image; give media_type=")
        return cls(media_type=media_type, data=base64.b64encode(data).decode())

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> ImagePart:
        return cls.from_bytes(pathlib.Path(path).read_bytes())


class DocumentPart(BaseModel):
    """A document (a PDF as base64 ``data`` or a ``url``, plain ``text``, or the ``file_id`` of an
    uploaded file) in a user turn or a tool's result. ``DocumentPart.from_path("report.pdf")``
    reads a file. ``citations=True`` asks the model to cite it (the citations are on the reply)."""

    model_config = _FROZEN
    type: Literal["document"] = "document"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    text: str | None = None
    title: str | None = None
    file_id: str | None = None
    citations: bool | None = None

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str | None = None, title: str | None = None) -> DocumentPart:
        media_type = media_type or sniff_media_type(data)
        if media_type != "application/pdf":
            raise ValueError("DocumentPart.from_bytes: not a PDF; give plain text as DocumentPart(text=...)")
        return cls(media_type=media_type, data=base64.b64encode(data).decode(), title=title)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> DocumentPart:
        path = pathlib.Path(path)
        return cls.from_bytes(path.read_bytes(), title=path.name)


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def sniff_media_type(data: bytes) -> str | None:
    """The media type of ``data`` by its first bytes (PNG, JPEG, GIF, WebP, PDF), or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _MAGIC if data.startswith(magic)), None)


Part = Annotated[
    TextPart | ThoughtPart | ToolCall | ToolResult | ProviderPart | ImagePart | DocumentPart,
    Field(discriminator="type"),
]
PART_ADAPTER: TypeAdapter[Part] = TypeAdapter(Part)


class Message(BaseModel):
    """One turn of the conversation. Tool results travel in ``user`` turns. ``agent`` names
    the agent whose turn it is (None for the user's own messages)."""

    model_config = _FROZEN
    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]
    agent: str | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


# ---------------------------------------------------------------- requests and responses


class Usage(BaseModel):
    """Tokens reported by the model. ``total_tokens`` counts all four kinds (they do not
    overlap: ``input_tokens`` are those neither read from nor written to a cache).

    ``cost_usd`` is what they cost in US dollars, exactly (a ``Decimal``), when the price of
    the model that answered is known (:mod:`loopwright.models.prices`); ``None`` when it is
    not: never a guess. A sum's cost is the sum of the costs, and unknown as soon as one part
    that counts any tokens or requests has an unknown cost (a usage of nothing adds nothing).

    ``cache_creation_1h_tokens`` is the part of ``cache_creation_tokens`` written with a one-hour
    lifetime (billed higher than the default five minutes); ``server_tool_uses`` counts the
    provider's own tool calls in the reply (web search, web fetch, code execution: billed per use)."""

    model_config = _FROZEN
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_tokens: NonNegativeInt = 0
    cache_creation_tokens: NonNegativeInt = 0
    requests: NonNegativeInt = 0
    cost_usd: Decimal | None = None
    cache_creation_1h_tokens: NonNegativeInt = 0
    server_tool_uses: NonNegativeInt = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_creation_tokens

    def __add__(self, other: Usage) -> Usage:
        cost, more = self.cost_usd, other.cost_usd
        if more is None:  # (the usual case without prices: both None, nothing to do)
            if cost is not None and (other.requests or other.total_tokens):
                cost = None
        elif cost is not None:
            cost += more
        elif not self.requests and not self.total_tokens:
            cost = more
        return trusted(
            Usage,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            requests=self.requests + other.requests,
            cost_usd=cost,
            cache_creation_1h_tokens=self.cache_creation_1h_tokens + other.cache_creation_1h_tokens,
            server_tool_uses=self.server_tool_uses + other.server_tool_uses,
        )


ZERO_USAGE = Usage()
"""The usage of a reply that reports none (shared: a Usage is frozen)."""


class Instruction(BaseModel):
    """A block of system instruction. ``cache`` marks a static prefix a provider may cache."""

    model_config = _FROZEN
    text: str
    cache: bool = False


class ToolSpec(BaseModel):
    """What the model is told about one tool.

    ``strict``: the provider holds the model's arguments to ``input_schema`` exactly (strict tool
    use; None: the agent's ``strict_tools``, else off). ``provider``: extra fields of the tool's
    definition per provider, merged in by that provider's adapter alone, e.g.
    ``{"anthropic": {"defer_loading": True}}``; a definition there with a ``type`` is a tool the
    provider defines (Claude's ``{"type": "bash_20250124", "name": "bash"}``) and is sent instead
    of the name, description and schema."""

    model_config = _FROZEN
    name: str
    description: str
    input_schema: dict[str, Any]
    strict: bool | None = None
    provider: dict[str, dict[str, Any]] = {}


ToolChoice = Literal["auto", "any", "none"]


class History(Sequence[Message]):
    """The first ``n`` messages of a run's history, read-only: what one request was sent with.

    A run's history is append-only (a feature that rewrites earlier turns, like compaction,
    puts a new list in its place), so a view of its first ``n`` messages never changes: a
    request keeps showing what was sent when it was made, however the run goes on, and making
    one costs the same whatever the length of the history."""

    __slots__ = ("_items", "n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self.n = len(items) if n is None else n
        """How many messages of the history this view shows (its ``len``, read without a call)."""

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._items[: self.n][index]
        n = self.n
        at = index + n if index < 0 else index
        if not 0 <= at < n:
            raise IndexError(f"history index {index} out of range (the request holds {n} messages)")
        return self._items[at]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self.n)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[i] for i in range(self.n - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History | list | tuple):
            return len(other) == self.n and all(a == b for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({list(self)!r})"


class ModelRequest(BaseModel):
    """What the reason stage sends to the model.

    ``messages`` is a read-only :class:`History` view of the run's history as it was when the
    request was made (a snapshot, O(1) to make); a request built by hand may hold a list.
    """

    model_config = _FROZEN
    instructions: tuple[Instruction, ...] = ()
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    tokens_left: int | None = None
    """What is left of the run's ``max_total_tokens`` (None: no token budget). A model may
    refuse to send a request larger than that instead of overspending."""
    output_schema: dict[str, Any] | None = None
    """The JSON schema the final answer must match (the agent's ``output_type``; set by the
    structured-output feature). An adapter whose API constrains output to a schema sends it;
    the others read the instruction the feature adds beside it."""

    @field_serializer("messages", mode="wrap")
    def _messages_as_list(self, value: Sequence[Message], handler: Any) -> Any:
        return handler(value if type(value) is list else list(value))


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]


class ModelResponse(BaseModel):
    """One reply of the model: parts in the order the model produced them, and usage."""

    model_config = _FROZEN
    parts: tuple[ToolCall | TextPart | ThoughtPart | ProviderPart, ...] = ()
    """(A tool call first: pydantic's smart union returns at the first member a part is an instance
    of, and tries each member before it against the part as a mapping, an ABC isinstance check
    in Python; a tool loop's replies are mostly calls. Which member a part becomes does not
    depend on the order: every member has its own ``type``, and only a call has a ``name``.)"""
    usage: Usage = ZERO_USAGE
    stop_reason: StopReason | None = None
    model: str | None = None
    details: dict[str, JsonValue] = Field(default_factory=dict)
    """What else the provider said of this reply (message id, stop sequence, container,
    citations, server tool use counts), as plain data."""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def thoughts(self) -> list[ThoughtPart]:
        return [p for p in self.parts if isinstance(p, ThoughtPart)]


USAGE_COUNTS = operator.itemgetter(*Usage.model_fields)
"""A usage's field values in field order (from its ``__dict__``): :func:`usage_counts`."""
_USAGE_NAMES = tuple(Usage.model_fields)


def usage_counts(usage: Usage) -> Usage | tuple[Any, ...]:
    """What the event log keeps of a reply's usage: its field values in field order and its
    fields set last (shared: a validated usage's own ``set`` is swapped for the shared one of
    its names, as :func:`kept` does), a flat tuple of 112 bytes where the ``Usage`` object and
    its ``__dict__`` take 352 (the reply is not kept once the run moves on, so the log would be
    its only holder); ``ZERO_USAGE`` (shared) and any other type than ``Usage`` as themselves.
    :func:`usage_of` makes the equal ``Usage`` again. ``states/reason.py`` writes this out."""
    if usage is ZERO_USAGE or type(usage) is not Usage:
        return usage
    share_fields_set(usage)  # (a validated usage's own set: the shared one of its names, as ``kept`` makes it)
    return USAGE_COUNTS(usage.__dict__) + (usage.__pydantic_fields_set__,)  # type: ignore[no-any-return]  # noqa: RUF005


def usage_of(kept: Usage | tuple[Any, ...]) -> Usage:
    """The ``Usage`` :func:`usage_counts` kept (equal to it, with the same fields set)."""
    if type(kept) is not tuple:
        return kept  # type: ignore[return-value]
    obj = new_object(Usage)
    set_dict(obj, dict(zip(_USAGE_NAMES, kept, strict=False)))  # (the fields set, last, is not a field)
    set_fields_set(obj, kept[-1])
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def reply_values(response: ModelResponse) -> tuple[Any, ...]:
    """A reply's field values in field order (``parts, usage, stop_reason, model, details``),
    ``details`` None when empty, ``usage`` as :func:`usage_counts` keeps it: what the event log
    keeps of a past reply (its parts are the history's; the reply object itself, with its
    ``__dict__``, is not kept alive)."""
    fields = response.__dict__
    usage = usage_counts(fields["usage"])
    return fields["parts"], usage, fields["stop_reason"], fields["model"], fields["details"] or None


def reply_of(values: tuple[Any, ...]) -> ModelResponse:
    """The reply :func:`reply_values` gave the values of (every field set)."""
    parts, usage, stop_reason, model, details = values
    return trusted(
        ModelResponse, parts=parts, usage=usage_of(usage), stop_reason=stop_reason, model=model, details=details or {}
    )


def is_reply(values: tuple[Any, ...], response: ModelResponse) -> bool:
    """Whether a ``model_responded`` entry's values (the reply, or :func:`reply_values`) are
    those of ``response``."""
    if len(values) == 1:
        return values[0] is response
    return values[0] is response.parts and reply_values(response) == values


class ErrorInfo(BaseModel):
    """An error kept in a run's state and result (plain data, so it survives a JSON round trip)."""

    model_config = _FROZEN
    kind: str
    message: str
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None
    """Seconds the provider asked to wait before a retry (its ``Retry-After``), if it said."""
    partial: str | None = None
    """The text a reply had when the model's context window filled up and cut it
    (:class:`~loopwright.ContextWindowError`): the answer salvage keeps if its call cannot fit."""


def kept(response: ModelResponse) -> ModelResponse:
    """``response`` as the history keeps it: its own, its usage's and its parts' fields sets
    (a ``set`` of 216 bytes in each validated instance) swapped for shared immutable ones with
    the same names — the same values, a third less memory for a kept reply."""
    if type(response.__pydantic_fields_set__) is set:  # else: kept already (a reply replayed)
        share_fields_set(response)
        if response.usage is not ZERO_USAGE:
            share_fields_set(response.usage)
        for part in response.parts:
            share_fields_set(part)
    return response
