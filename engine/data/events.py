"""Everything that flows through the loop: content parts, messages, requests, responses, usage
and events. All are frozen pydantic models with a ``type`` discriminator; each union has one
``TypeAdapter``. Provider SDK types never appear here (the adapters translate).

Engine code builds the values it creates itself with :func:`trusted`, which skips validation
(their fields are already typed); everything a user or a model adapter passes in is validated.
"""

from __future__ import annotations

import base64
import itertools
import os
import pathlib
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, JsonValue, NonNegativeInt, TypeAdapter, field_serializer

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_PROCESS_PREFIX = os.urandom(4).hex()
_call_counter = itertools.count(1)


def new_call_id() -> str:
    """A tool-call id unique in this process and, by its random prefix, across processes."""
    return f"call_{_PROCESS_PREFIX}{next(_call_counter):06x}"


M = TypeVar("M", bound=BaseModel)
_new = object.__new__


class AllFieldsSet(frozenset[str]):
    """A ``__pydantic_fields_set__`` shared by many instances: every trusted instance of one
    class (all its fields are set), or kept replies with the same fields given (:func:`kept`).
    Immutable, so sharing is safe; a copy (what ``model_copy`` takes before it adds the
    updated names) is a fresh mutable set."""

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)


_FIELDS_SET: dict[type[BaseModel], AllFieldsSet] = {}
_SHARED_SETS: dict[frozenset[str], AllFieldsSet] = {}


def all_fields(cls: type[BaseModel]) -> AllFieldsSet:
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = AllFieldsSet(cls.model_fields)
    return fields_set


def trusted(cls: type[M], **fields: Any) -> M:
    """Build ``cls`` from fields the engine already typed, without validation.

    Every field must be given (defaults are not filled in). This is ~3x cheaper than
    validating and is used on the hot path only for values the engine itself creates.
    """
    obj = _new(cls)
    _set_dict(obj, fields)
    _set_fields_set(obj, _FIELDS_SET.get(cls) or all_fields(cls))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def kept(response: ModelResponse) -> ModelResponse:
    """``response`` as the history keeps it: its own, its usage's and its parts' fields sets
    (a ``set`` of 216 bytes in each validated instance) swapped for shared immutable ones with
    the same names — the same values, a third less memory for a kept reply."""
    if type(response.__pydantic_fields_set__) is set:  # else: kept already (a reply replayed)
        _share_fields_set(response)
        if response.usage is not ZERO_USAGE:
            _share_fields_set(response.usage)
        for part in response.parts:
            _share_fields_set(part)
    return response


def _share_fields_set(obj: BaseModel) -> None:
    own = obj.__pydantic_fields_set__
    if type(own) is set:
        key = frozenset(own)
        shared = _SHARED_SETS.get(key)
        if shared is None:
            shared = _SHARED_SETS[key] = AllFieldsSet(key)
        _set_fields_set(obj, shared)


# BaseModel's own slots, set through their descriptors (a quarter cheaper than object.__setattr__)
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


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
    """An image in a user turn or a tool's result: base64 ``data`` with its ``media_type``, or a
    ``url``. ``ImagePart.from_path("shot.png")`` and ``ImagePart.from_bytes(png)`` read files and
    bytes (PNG, JPEG, GIF, WebP)."""

    model_config = _FROZEN
    type: Literal["image"] = "image"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None

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
    """A document (a PDF as base64 ``data`` or a ``url``, or plain ``text``) in a user turn or a
    tool's result. ``DocumentPart.from_path("report.pdf")`` reads a file."""

    model_config = _FROZEN
    type: Literal["document"] = "document"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    text: str | None = None
    title: str | None = None

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
    """Tokens reported by the model. ``total_tokens`` counts all four kinds."""

    model_config = _FROZEN
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_tokens: NonNegativeInt = 0
    cache_creation_tokens: NonNegativeInt = 0
    requests: NonNegativeInt = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_creation_tokens

    def __add__(self, other: Usage) -> Usage:
        return trusted(
            Usage,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            requests=self.requests + other.requests,
        )


ZERO_USAGE = Usage()
"""The usage of a reply that reports none (shared: a Usage is frozen)."""


class Instruction(BaseModel):
    """A block of system instruction. ``cache`` marks a static prefix a provider may cache."""

    model_config = _FROZEN
    text: str
    cache: bool = False


class ToolSpec(BaseModel):
    """What the model is told about one tool."""

    model_config = _FROZEN
    name: str
    description: str
    input_schema: dict[str, Any]


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

    @field_serializer("messages", mode="wrap")
    def _messages_as_list(self, value: Sequence[Message], handler: Any) -> Any:
        return handler(value if type(value) is list else list(value))


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]


class ModelResponse(BaseModel):
    """One reply of the model: parts in the order the model produced them, and usage."""

    model_config = _FROZEN
    parts: tuple[TextPart | ThoughtPart | ToolCall | ProviderPart, ...] = ()
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


def reply_values(response: ModelResponse) -> tuple[Any, ...]:
    """A reply's field values in field order (``parts, usage, stop_reason, model, details``),
    ``details`` None when empty: what the event log keeps of a past reply (its parts are the
    history's; the reply object itself, with its ``__dict__``, is not kept alive)."""
    fields = response.__dict__
    return fields["parts"], fields["usage"], fields["stop_reason"], fields["model"], fields["details"] or None


def reply_of(values: tuple[Any, ...]) -> ModelResponse:
    """The reply :func:`reply_values` gave the values of (every field set)."""
    parts, usage, stop_reason, model, details = values
    return trusted(ModelResponse, parts=parts, usage=usage, stop_reason=stop_reason, model=model, details=details or {})


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


# ---------------------------------------------------------------- events

Outcome = Literal["final", "salvaged", "limit", "failed", "cancelled", "suspended", "paused"]


class PendingRequest(BaseModel):
    """A tool call waiting on the outside world: a ``confirmation`` (approve or deny it), a
    ``credential`` (supply it, the tool is called again), or a ``result`` (a long-running
    tool's result, supplied as it is)."""

    model_config = _FROZEN
    call_id: str
    tool: str
    args: dict[str, Any]
    kind: Literal["confirmation", "credential", "result"]
    detail: str = ""
    credential_key: str | None = None


class EventBase(BaseModel):
    """What every event carries. Match on the subclasses (``isinstance(e, ToolCalled)``) or on
    ``type``, the snake_case of the class name (``"tool_called"``); event ``type`` values never
    equal a content part's (``ToolCall`` is ``"tool_call"``)."""

    model_config = _FROZEN
    run_id: str
    seq: int
    time: float
    state: str
    iteration: int
    agent: str
    """The active agent (it changes on a transfer)."""


class RunStarted(EventBase):
    type: Literal["run_started"] = "run_started"
    input: str | tuple[Part, ...]
    """The user's message: text, or its parts (``loopwright.inputs.input_text`` gives one line)."""


class StateEntered(EventBase):
    type: Literal["state_entered"] = "state_entered"
    source: str
    guard: str | None


class ModelRequested(EventBase):
    type: Literal["model_requested"] = "model_requested"
    attempt: int
    message_count: int
    tool_names: tuple[str, ...]


class ModelResponded(EventBase):
    type: Literal["model_responded"] = "model_responded"
    response: ModelResponse


class TextDelta(EventBase):
    """A piece of model text as it streams in (only from ``Runner.stream`` on streaming models)."""

    type: Literal["text_delta"] = "text_delta"
    text: str
    thought: bool


class ToolCalled(EventBase):
    type: Literal["tool_called"] = "tool_called"
    call_id: str
    name: str
    args: dict[str, Any]


class ToolAnswered(EventBase):
    type: Literal["tool_answered"] = "tool_answered"
    call_id: str
    name: str
    content: JsonValue
    is_error: bool
    duration_s: float


class LimitReached(EventBase):
    type: Literal["limit_reached"] = "limit_reached"
    limit: str
    value: float
    used: float


class Transferred(EventBase):
    type: Literal["transferred"] = "transferred"
    from_agent: str
    to_agent: str
    task: str


class Suspended(EventBase):
    type: Literal["suspended"] = "suspended"
    pending: tuple[PendingRequest, ...]
    wait_deadline: float | None


class Resumed(EventBase):
    type: Literal["resumed"] = "resumed"
    decided: tuple[str, ...]
    timed_out: bool


class RunFinished(EventBase):
    type: Literal["run_finished"] = "run_finished"
    outcome: Outcome
    output: str | None
    error: ErrorInfo | None


class ErrorOccurred(EventBase):
    """Something went wrong (a model call failed, a reply was cut short). Whether the run
    retries is the table's choice: the ``state_entered`` event that follows shows it."""

    type: Literal["error_occurred"] = "error_occurred"
    error: ErrorInfo


class Paused(EventBase):
    """``Runner.pause`` stopped the run at a transition; ``state`` is the stage it runs next."""

    type: Literal["paused"] = "paused"


class PlanUpdated(EventBase):
    """The planner wrote or updated the run's plan (``Agent(planner=Planner())``)."""

    type: Literal["plan_updated"] = "plan_updated"
    steps: tuple[dict[str, Any], ...]
    """Each step as ``{"description": ..., "status": ...}``."""
    complete: bool


class Observed(EventBase):
    """The observer looked at the recent steps (``Agent(observer=Observer())``)."""

    type: Literal["observed"] = "observed"
    verdict: str
    """``ok``, ``loop``, ``stall`` or ``drift``."""
    correction: str | None


class Compacted(EventBase):
    """Older turns of the history were replaced by a summary (``Agent(compaction=Compaction())``)."""

    type: Literal["compacted"] = "compacted"
    replaced: int
    """Messages replaced by the summary."""
    kept: int
    """Messages kept verbatim after it."""
    summary: str


Event = Annotated[
    RunStarted
    | StateEntered
    | ModelRequested
    | ModelResponded
    | TextDelta
    | ToolCalled
    | ToolAnswered
    | LimitReached
    | Transferred
    | Suspended
    | Resumed
    | RunFinished
    | ErrorOccurred
    | PlanUpdated
    | Observed
    | Compacted
    | Paused,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def _event_classes() -> dict[type[EventBase], tuple[str, AllFieldsSet]]:
    """Each event class's ``type`` value and shared fields-set, computed once."""
    found: dict[type[EventBase], tuple[str, AllFieldsSet]] = {}
    pending: list[type[EventBase]] = [EventBase]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if "type" in sub.model_fields:
                found[sub] = (sub.model_fields["type"].default, all_fields(sub))
    return found


EVENT_CLASSES = _event_classes()
EVENT_TYPE: dict[type[EventBase], str] = {cls: kind for cls, (kind, _) in EVENT_CLASSES.items()}
"""Each event class's ``type`` string (what the compact event log names an event by)."""
EVENT_BY_TYPE: dict[str, type[EventBase]] = {kind: cls for cls, kind in EVENT_TYPE.items()}
"""Each event ``type`` string's class."""

_BASE_FIELDS = frozenset(EventBase.model_fields) | {"type"}
EVENT_FIELDS: dict[type[EventBase], tuple[str, ...]] = {
    cls: tuple(name for name in cls.model_fields if name not in _BASE_FIELDS) for cls in EVENT_CLASSES
}
"""Each event class's own fields, in declaration order: ``RunContext.emit`` takes their values
positionally in this order."""


def event_values(cls: type[EventBase], fields: dict[str, Any]) -> tuple[Any, ...]:
    """An event's own field values by name, in :data:`EVENT_FIELDS` order (defaults filled in);
    a name the event does not have is a TypeError naming the ones it has."""
    own = EVENT_FIELDS[cls]
    unknown = fields.keys() - set(own)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)}; its fields are {list(own)}")
    model_fields = cls.model_fields
    return tuple(fields[name] if name in fields else model_fields[name].get_default(call_default_factory=True)
                 for name in own)  # fmt: skip


def make_event(
    cls: type[EventBase], run_id: str, seq: int, time: float, state: str, iteration: int, agent: str, fields: Any
) -> Any:
    """Build one event the engine recorded, without validation (its fields are typed by the
    engine). ``fields`` is the event's own fields as a dict; it becomes the event's ``__dict__``."""
    kind, fields_set = EVENT_CLASSES[cls]
    fields.update(type=kind, run_id=run_id, seq=seq, time=time, state=state, iteration=iteration, agent=agent)
    event = _new(cls)
    _set_dict(event, fields)
    _set_fields_set(event, fields_set)
    _set_extra(event, None)
    _set_private(event, None)
    return event


__all__ = [
    "EVENT_ADAPTER",
    "EVENT_FIELDS",
    "Compacted",
    "DocumentPart",
    "ErrorInfo",
    "ErrorOccurred",
    "Event",
    "EventBase",
    "History",
    "ImagePart",
    "Instruction",
    "LimitReached",
    "Message",
    "ModelRequest",
    "ModelRequested",
    "ModelResponded",
    "ModelResponse",
    "Observed",
    "Outcome",
    "Part",
    "Paused",
    "PendingRequest",
    "PlanUpdated",
    "ProviderPart",
    "Resumed",
    "RunFinished",
    "RunStarted",
    "StateEntered",
    "Suspended",
    "TextDelta",
    "TextPart",
    "ThoughtPart",
    "ToolAnswered",
    "ToolCall",
    "ToolCalled",
    "ToolResult",
    "ToolSpec",
    "Transferred",
    "Usage",
    "make_event",
    "new_call_id",
    "sniff_media_type",
    "trusted",
]
