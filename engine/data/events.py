"""Everything that flows through the loop: the events of a run's log (its entries' shapes and
their fast construction), and, re-exported so this stays the one path for all of it, the content
of :mod:`~loopwright.data.parts` (parts, messages, requests, replies, usage) and the fast
builders of :mod:`~loopwright.data.build`. All are frozen pydantic models with a ``type``
discriminator; each union has one ``TypeAdapter``.

Engine code builds the values it creates itself with :func:`trusted`, which skips validation
(their fields are already typed); everything a user or a model adapter passes in is validated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, JsonValue, TypeAdapter

from .build import FROZEN as _FROZEN

# re-exported: this module stays the one path for every value of the log
from .build import AllFieldsSet as AllFieldsSet
from .build import all_fields as all_fields
from .build import new_call_id as new_call_id
from .build import new_object as _new
from .build import set_dict as _set_dict
from .build import set_extra as _set_extra
from .build import set_fields_set as _set_fields_set
from .build import set_private as _set_private
from .build import share_fields_set as share_fields_set
from .build import trusted as trusted
from .parts import PART_ADAPTER as PART_ADAPTER
from .parts import ZERO_USAGE as ZERO_USAGE
from .parts import DocumentPart as DocumentPart
from .parts import ErrorInfo as ErrorInfo
from .parts import History as History
from .parts import ImagePart as ImagePart
from .parts import Instruction as Instruction
from .parts import Message as Message
from .parts import ModelRequest as ModelRequest
from .parts import ModelResponse as ModelResponse
from .parts import Part as Part
from .parts import ProviderPart as ProviderPart
from .parts import StopReason as StopReason
from .parts import TextPart as TextPart
from .parts import ThoughtPart as ThoughtPart
from .parts import ToolCall as ToolCall
from .parts import ToolChoice as ToolChoice
from .parts import ToolResult as ToolResult
from .parts import ToolSpec as ToolSpec
from .parts import Usage as Usage
from .parts import is_reply as is_reply
from .parts import kept as kept
from .parts import reply_of as reply_of
from .parts import reply_values as reply_values
from .parts import sniff_media_type as sniff_media_type

# ---------------------------------------------------------------- events

Outcome = Literal["final", "salvaged", "limit", "failed", "cancelled", "suspended", "paused", "blocked"]


class Blocked(BaseModel):
    """Why a run ended with outcome ``"blocked"``: the guard that blocked it, where it stood
    (``input``: the user's message; ``output``: the final answer; ``tool``: a tool call or its
    result) and the guard's message (``RunResult.blocked``)."""

    model_config = _FROZEN
    guard: str
    where: Literal["input", "output", "tool"]
    message: str


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
    """The user's message: text, or its parts (``loopwright.data.inputs.input_text`` gives one line)."""


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


class ToolInputDelta(EventBase):
    """A piece of a tool call's input JSON as it streams in (only from ``Runner.stream``, on models
    that stream tool input: Claude with ``eager_input_streaming`` on the tool). The pieces of one
    call joined are its input; the call itself still comes whole in ``model_responded``."""

    type: Literal["tool_input_delta"] = "tool_input_delta"
    call_id: str
    name: str
    partial_json: str


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


class ToolApproved(EventBase):
    """A person approved a waiting call with edited arguments or a note (``approve(args=..., note=...)``):
    ``args`` are those it runs with, ``asked`` the model's."""

    type: Literal["tool_approved"] = "tool_approved"
    call_id: str
    name: str
    args: dict[str, Any]
    asked: dict[str, Any]
    note: str


class ToolRetried(EventBase):
    """A tool call is tried again: ``reason`` ``"transient"`` (it raised an exception of its
    ``retry_on``: act calls it again after ``delay_s``), ``"retry_tool"`` (it raised ``RetryTool``)
    or ``"arguments"`` (its arguments did not validate): the model is told what to fix."""

    type: Literal["tool_retried"] = "tool_retried"
    call_id: str
    name: str
    attempt: int
    """The retry's number for this call (1: the first retry)."""
    reason: Literal["transient", "retry_tool", "arguments"]
    message: str
    delay_s: float


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


class ModelSwitched(EventBase):
    """The run moved to the agent's next fallback model: the model call failed for good (the
    row ``reason -> reason [has_failed_model & fallback_left]``). Steps from here on are that
    model's (``RunResult.models_used`` lists every model the run called)."""

    type: Literal["model_switched"] = "model_switched"
    from_model: str
    to_model: str
    error: ErrorInfo
    """The failure that made the switch."""


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
    | ToolInputDelta
    | ToolCalled
    | ToolAnswered
    | ToolApproved
    | ToolRetried
    | LimitReached
    | Transferred
    | Suspended
    | Resumed
    | RunFinished
    | ErrorOccurred
    | PlanUpdated
    | Observed
    | Compacted
    | ModelSwitched
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
    "Blocked",
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
    "ModelSwitched",
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
    "ToolApproved",
    "ToolCall",
    "ToolCalled",
    "ToolInputDelta",
    "ToolResult",
    "ToolRetried",
    "ToolSpec",
    "Transferred",
    "Usage",
    "make_event",
    "new_call_id",
    "sniff_media_type",
    "trusted",
]
