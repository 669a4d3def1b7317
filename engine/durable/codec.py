"""The durable codec: a run's head, messages, tool results, events, decisions and result as bytes.

One module for every durable runner: the checkpointer (:mod:`loopwright.durable.checkpoint`) and
the DBOS runner's steps (:mod:`loopwright.integrations.dbos.step`) write and read through it. The
JSON is the models' own (``model_dump_json``); some are written from the objects' ``__dict__``s
(:func:`plain_message`, :func:`plain_response`): the same bytes, a third of the cost (tested).
The compact form of a checkpoint's body (its events) is :mod:`loopwright.stores.compact`'s.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .. import features as _features  # the built-in features' run-state slices, to load saved states
from ..data.decisions import Approve, Deny
from ..data.events import (
    EVENT_ADAPTER,
    DocumentPart,
    EventBase,
    ImagePart,
    Message,
    ModelResponse,
    ProviderPart,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    Usage,
)
from ..data.result import RunResult
from ..data.run_state import SAVED_FIELDS, RunState, slice_adapter
from ..data.values import clean_text
from ..stores.base import FULL_HEAD_EVERY

if TYPE_CHECKING:
    from ..stores.base import SavedRun

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
"""A message's JSON, both ways."""
RESULT: TypeAdapter[ToolResult] = TypeAdapter(ToolResult)
"""A tool result's JSON, both ways."""

# ---------------------------------------------------------------- heads

_saved_fields = operator.attrgetter(*SAVED_FIELDS)
_HOT = ("stage", "seq", "iteration", "attempt", "tool_calls_made")
"""Head fields a head of changes always carries (small, and most change at every checkpoint)."""
_REPLACED = ("usage", "response", "text")
"""Head fields a head of changes carries when they are not the object they were (a reply, its
text and the usage are replaced at every model call)."""
_IN_PLACE = ("state", "vetoes", "charges", "turn_start")
"""Head fields a run changes in place (dicts): a head of changes carries each unless it is
empty and was empty."""
_COLD = tuple(
    name for name in SAVED_FIELDS if name not in {*_HOT, *_REPLACED, *_IN_PLACE, "messages", "trace", "features"}
)
"""The others (replaced, rarely): compared as one tuple, then one by one if that differs."""
_cold_fields = operator.attrgetter(*_COLD)

_FLAT: frozenset[type[Any]] = frozenset({TextPart, ThoughtPart, ToolCall, ToolResult, ProviderPart, ImagePart,
                                         DocumentPart, Usage})  # fmt: skip
"""Models whose JSON is their ``__dict__``'s (no model fields, aliases, or serializers of their
own; tested): a checkpoint hands those dicts to ``to_json``, a third of the cost of the models'
serializers (a part is a member of a union there)."""


def plain_message(message: Any) -> Any:
    """``message`` as ``to_json`` writes it fastest (the same JSON as its own serializer's)."""
    if type(message) is not Message:
        return message
    return {"role": message.role, "parts": [p.__dict__ if type(p) in _FLAT else p for p in message.parts],
            "agent": message.agent}  # fmt: skip


def plain_response(response: Any) -> Any:
    """``response`` (a reply) as ``to_json`` writes it fastest (the same JSON as its own serializer's)."""
    if type(response) is not ModelResponse:
        return response
    out = dict(response.__dict__)
    out["parts"] = [p.__dict__ if type(p) in _FLAT else p for p in response.parts]
    usage = response.usage
    if type(usage) is Usage:
        out["usage"] = usage.__dict__
    return out


_SLICE_JSON: dict[str, tuple[Callable[[Any], bytes], bytes]] = {}
"""By feature: its slice's serializer and its JSON key (a slice's class never changes: see
``register_slice``)."""


def features_json(features: Mapping[str, Any]) -> bytes:
    """The features' slices as JSON (``RunState.features`` as a saved state holds it)."""
    if not features:
        return b"{}"
    out: list[bytes] = []
    for name, value in features.items():
        known = _SLICE_JSON.get(name)
        if known is None:
            known = _SLICE_JSON[name] = (slice_adapter(name).serializer.to_json, to_json(name) + b":")
        out.append(known[1] + known[0](value))
    return b"{" + b",".join(out) + b"}"


def head_json(rs: RunState) -> bytes:
    """The run's state without its history (``messages`` and ``trace`` empty)."""
    return whole_head(_saved_fields(rs), features_json(rs.features))


def whole_head(values: tuple[Any, ...], features: bytes) -> bytes:
    """The whole head of the saved fields' ``values`` and the features' slices as JSON."""
    saved = dict(zip(SAVED_FIELDS, values, strict=True))
    saved["messages"] = saved["trace"] = ()
    del saved["features"]
    saved["response"] = plain_response(saved["response"])
    usage = saved["usage"]
    if type(usage) is Usage:
        saved["usage"] = usage.__dict__
    return to_json(saved)[:-1] + b',"features":' + features + b"}"


def rebuild(saved: SavedRun) -> RunState:
    """A RunState from a store's head, messages and trace (a slice of a feature of your own
    loads once the module that defines the feature is imported)."""
    assert _features.BUILT_IN_MACHINES
    rs = RunState.from_json(saved.head)
    rs.messages = [
        MESSAGE.validate_json(m) if isinstance(m, bytes) else MESSAGE.validate_python(m) for m in saved.messages
    ]
    rs.trace = list(saved.trace)
    return rs


class HeadWriter:
    """One worker's heads: the whole head at its first checkpoint and every
    :data:`~loopwright.stores.base.FULL_HEAD_EVERY`-th after it, else a head of changes."""

    __slots__ = ("before", "wholes")

    def __init__(self) -> None:
        self.before: tuple[Any, ...] = ()
        """At the previous checkpoint (none before the first): the cold fields, the replaced
        ones, which dicts changed in place were not empty, and the features' slices as JSON."""
        self.wholes = -1
        """Checkpoints since the last whole head (modulo FULL_HEAD_EVERY)."""

    def __call__(self, rs: RunState) -> bytes:  # noqa: C901 (every checkpoint's: each field's case written out)
        """The whole head at this worker's first checkpoint and every FULL_HEAD_EVERY-th after
        it; between those, the fields that changed since the previous checkpoint (see
        ``_HOT``, ``_REPLACED``, ``_IN_PLACE`` and ``_COLD``; the history is in the bodies)."""
        features = features_json(rs.features)
        cold = _cold_fields(rs)
        usage, response, text = rs.usage, rs.response, rs.text
        state, vetoes, charges, turn_start = rs.state, rs.vetoes, rs.charges, rs.turn_start
        held = (bool(state), bool(vetoes), bool(charges), bool(turn_start))
        before = self.before
        self.before = (cold, usage, response, text, held, features)
        self.wholes = (self.wholes + 1) % FULL_HEAD_EVERY
        if not before or not self.wholes:
            return whole_head(_saved_fields(rs), features)
        was_cold, was_usage, was_response, was_text, was_held, was_features = before
        head: dict[str, Any] = {"~": 1, "stage": rs.stage, "seq": rs.seq, "iteration": rs.iteration,
                                "attempt": rs.attempt, "tool_calls_made": rs.tool_calls_made}  # fmt: skip
        if usage is not was_usage:
            head["usage"] = usage.__dict__ if type(usage) is Usage else usage
        if response is not was_response:
            head["response"] = plain_response(response)
        if text is not was_text:
            head["text"] = text
        if state or was_held[0]:
            head["state"] = state
        if vetoes or was_held[1]:
            head["vetoes"] = vetoes
        if charges or was_held[2]:
            head["charges"] = charges
        if turn_start or was_held[3]:
            head["turn_start"] = turn_start
        if cold != was_cold:
            head.update((name, now) for name, now, was in zip(_COLD, cold, was_cold, strict=True) if now is not was)
        if features == was_features:
            return to_json(head)
        return to_json(head)[:-1] + b',"features":' + features + b"}"


# ---------------------------------------------------------------- what JSON cannot hold


def body_json(body: Any) -> bytes:
    """A checkpoint's body as JSON; one that holds what JSON cannot (a lone surrogate in a
    streamed delta of model text, which no other value cleans) is written as :func:`storable_json`
    makes it, so the run goes on and its store can read it back."""
    try:
        return to_json(body)
    except PydanticSerializationError:
        return storable_json(body)


def storable_json(value: Any) -> bytes:
    """``value`` as JSON whatever it holds: each lone surrogate replaced by U+FFFD (as in any
    value a run saves: :func:`loopwright.data.values.clean_text`) and each value that is no JSON
    value (a client, a connection) by a marker naming its type."""
    return to_json(_cleaned(to_jsonable_python(value, fallback=_unsaveable)))


def storable_state(state: dict[str, Any]) -> dict[str, Any]:
    """A run's ``state`` as :func:`storable_json` writes it (what a failed run's last checkpoint keeps)."""
    kept: dict[str, Any] = json.loads(storable_json(state))
    return kept


def _unsaveable(value: Any) -> str:
    return f"<{type(value).__name__}: not saved>"


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cleaned(v) for v in value]
    return value


# ---------------------------------------------------------------- messages, results, events


def message_json(message: Message) -> str:
    """One message as JSON text (a DBOS step's record)."""
    return MESSAGE.dump_json(message).decode()


def load_message(data: bytes | str | Any) -> Message:
    """A message from its JSON (bytes or text) or from parsed JSON."""
    if isinstance(data, bytes | str):
        return MESSAGE.validate_json(data)
    return MESSAGE.validate_python(data)


def result_body(answered: ToolResult) -> bytes:
    """A tool result as a store keeps it."""
    return answered.__pydantic_serializer__.to_json(answered)


def result_text(answered: ToolResult) -> str:
    """A tool result as JSON text (a DBOS event's value)."""
    return RESULT.dump_json(answered).decode()


def load_result(data: bytes | str) -> ToolResult:
    """A tool result from its JSON."""
    return RESULT.validate_json(data)


def event_json(record: Any) -> str:
    """One logged event as JSON text (a built event, or the plain dict ``EventLog.records`` gives)."""
    return record.model_dump_json() if isinstance(record, EventBase) else to_json(record).decode()


def load_event(data: str | bytes) -> EventBase:
    """An event from its JSON."""
    event: EventBase = EVENT_ADAPTER.validate_json(data)
    return event


# ---------------------------------------------------------------- decisions


def decisions_message(decisions: Mapping[str, Any]) -> dict[str, Any]:
    """Decisions as a JSON-able message (``approve()``, ``deny(reason)`` or a value)."""
    out: dict[str, Any] = {}
    for call_id, d in decisions.items():
        out[call_id] = (
            {**d.model_dump(exclude_defaults=True), "type": d.type}
            if isinstance(d, Approve | Deny)
            else {"type": "value", "value": d}
        )
    return out


def decisions_from_message(
    data: Mapping[str, Any], credential_calls: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The decisions of :func:`decisions_message`'s message (a value for a call of
    ``credential_calls`` is left out: it was never stored)."""
    out: dict[str, Any] = {}
    for call_id, d in data.items():
        kind = d.get("type")
        if kind == "approve":
            out[call_id] = Approve.model_validate(d)
        elif kind == "deny":
            out[call_id] = Deny(reason=d.get("reason", ""))
        elif call_id not in credential_calls:
            out[call_id] = d["value"]
    return out


def encode_decisions(decisions: Mapping[str, Any]) -> bytes:
    """Decisions as stored with a claim (credentials are not stored: a marker only)."""
    return json.dumps(decisions_message(decisions), sort_keys=True, default=str).encode()


def decode_decisions(data: bytes, credential_calls: set[str]) -> dict[str, Any]:
    """The decisions a claim stored (:func:`encode_decisions`)."""
    return decisions_from_message(json.loads(data), credential_calls)


# ---------------------------------------------------------------- a run's result


def run_result_json(result: RunResult) -> str:
    """A RunResult as JSON text, its run state included (a DBOS workflow's output)."""
    data = json.loads(result.model_dump_json())
    data["run_state"] = result.run_state.to_json().decode()
    return json.dumps(data)


def run_result_from_json(text: str) -> RunResult:
    """A RunResult from :func:`run_result_json`'s text (events included)."""
    data = json.loads(text)
    rs = RunState.from_json(data.pop("run_state"))
    events = data.pop("events", [])
    result = RunResult.model_validate({**data, "run_state": rs})
    result.__dict__["events"] = [EVENT_ADAPTER.validate_python(e) for e in events]
    return result
