"""The state of one run: plain data that round-trips through JSON.

``RunState`` is a slotted dataclass with identity equality: two runs with equal fields are
still two runs. Stages read and write it; guards only read it.

What is saved (:meth:`RunState.to_json`) is the core's fields and, under ``features``, one
small dataclass per feature of the run's machine (its *slice*: ``features["waiting"]`` holds
the pending requests, ``features["multi_agent"]`` the transfers). Four fields are never
saved, because they are not the run's to keep: ``limits`` and ``turn_limits`` come from the
agents (a saved state cannot raise its own budgets), ``request`` is rebuilt by ``preprocess``
from the history (saving it would store the history twice), and ``legs`` (the events of the
earlier legs of a run resumed in this process) is a record, not state: a run resumed from JSON
carries its events from the resume on, and a store keeps them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, get_type_hints

from pydantic import JsonValue, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_json
from typing_extensions import TypedDict

from .errors import ConfigurationError, ResumeError
from .events import ZERO_USAGE, ErrorInfo, Message, ModelRequest, ModelResponse, Outcome, Part, Usage
from .limits import Limits
from .signing import sign, unsign
from .stage import Stage

SCHEMA_VERSION = 1
"""The version of the saved form; :meth:`RunState.from_json` refuses others."""


@dataclass(eq=False, slots=True)
class RunState:
    """Everything a run knows. Saved as JSON with :meth:`to_json`, loaded with :meth:`from_json`."""

    run_id: str
    agent: str
    """The agent the run started with (the root of its tree)."""
    input: str | tuple[Part, ...]
    """The user's message: text, or parts (text, images, documents; :mod:`loopwright.data.inputs`)."""
    active_agent: str = ""
    """The agent whose turn it is; changes on a transfer."""
    stage: str = Stage.START
    trace: list[str] = field(default_factory=list)
    """The states visited, in order."""
    seq: int = 0
    """Events emitted so far (the next event's ``seq`` is one more)."""
    iteration: int = 0
    """Passes through ``reason`` so far (the salvage call is not counted)."""
    attempt: int = 0
    """Model calls made in the current pass through ``reason`` (1 + retries)."""
    tool_calls_made: int = 0
    usage: Usage = ZERO_USAGE  # (shared: a Usage is frozen; adding makes a new one)
    messages: list[Message] = field(default_factory=list)
    response: ModelResponse | None = None
    """The latest model reply; cleared when a model call starts."""
    text: str | None = None
    """Visible text of the latest reply (thought parts excluded), continuations joined."""
    continuing: bool = False
    """The latest reply was cut short (max_tokens, pause_turn) and will be continued."""
    model_error: ErrorInfo | None = None
    """The latest model call's error; cleared when a model call starts."""
    error: ErrorInfo | None = None
    """The error that ends (or, for salvage, marred) the run."""
    limit: str | None = None
    """The budget that stopped the loop, once one has."""
    outcome: Outcome | None = None
    output: str | None = None
    deadline: float | None = None
    """Wall-clock time (``time.time()``) by which the run must end, from ``timeout_s``."""
    deadline_hit: bool = False
    cancel_requested: bool = False
    state: dict[str, JsonValue] = field(default_factory=dict)
    """Session state: instruction placeholders read it, tools read and write it via ``ctx``."""
    vetoes: dict[str, str] = field(default_factory=dict)
    """Tool calls of the latest reply refused before ``act`` (call id -> reason): ``act``
    answers each with an error result instead of running it."""
    charges: dict[str, int] = field(default_factory=dict)
    """Traversals of bounded rows so far, by budget: written by the engine only."""
    turn_start: dict[str, float] = field(default_factory=dict)
    """Turn budgets' counters when the active agent took over (for its own ``limits=``)."""
    fallbacks: dict[str, int] = field(default_factory=dict)
    """The model each agent is on, when it is not its own ``model``: agent name -> n, for its
    ``fallback_models[n - 1]`` (written by ``reason`` when the run takes the fallback row; a
    resumed run goes on with that model). Replaced, never changed in place."""
    models_used: list[str] = field(default_factory=list)
    """Every model the run called, by name, in the order it first called them. Replaced, never
    changed in place."""
    next_model: str | None = None
    """The model the fallback row would switch to, when the latest model call failed in a way the
    active agent's ``fallback_models`` cover (retryable, or a kind its ``fallback_on`` lists);
    cleared when a model call starts."""
    features: dict[str, Any] = field(default_factory=dict)
    """Each feature's slice of the run state, by feature name."""
    schema_version: int = SCHEMA_VERSION
    # ---- not saved
    limits: Limits = field(default_factory=Limits)
    """The run's budgets: the root agent's limits (set by the runner, never loaded)."""
    turn_limits: Limits | None = None
    """The active agent's own limits, when it is not the root and has some (set by the runner)."""
    request: ModelRequest | None = None
    """The request of this pass (built by preprocess; not saved)."""
    legs: tuple[Any, ...] = ()
    """The event logs of the run's earlier legs in this process, each ended by a suspension or
    a pause (``RunResult.events`` joins them to the current leg's; not saved: a saved state
    stays small, and a store keeps every event itself)."""

    model_in_use: Any = None
    """The model object the latest call went to (not saved: ``reason`` adds a model to
    ``models_used`` when the call goes to another one)."""

    def __post_init__(self) -> None:
        if not self.active_agent:
            self.active_agent = self.agent

    def to_json(self, *, key: bytes | None = None) -> bytes:
        """The saved form; with ``key``, signed (HMAC-SHA256, :mod:`loopwright.data.signing`)."""
        saved = {name: getattr(self, name) for name in SAVED_FIELDS}
        saved["features"] = {name: slice_adapter(name).dump_python(value) for name, value in self.features.items()}
        try:
            data: bytes = _SAVED_ADAPTER.dump_json(saved)
        except PydanticSerializationError as exc:
            raise ConfigurationError(not_json_state(self.state) or str(exc)) from None
        return data if key is None else sign(data, key)

    @classmethod
    def from_json(cls, data: str | bytes, *, key: bytes | None = None) -> RunState:
        """A run state saved with :meth:`to_json`. Its budgets are not in it: the runner that
        resumes it supplies them from the agent. With ``key``, its signature is checked first."""
        if key is not None:
            data = unsign(data, key)
        version = _VERSION_ADAPTER.validate_json(data).get("schema_version")
        if version != SCHEMA_VERSION:
            raise ConfigurationError(
                f"this run state was saved with schema version {version}, and this loopwright reads version "
                f"{SCHEMA_VERSION}; resume it with the loopwright version that saved it"
            )
        try:
            raw = _SAVED_ADAPTER.validate_json(data)
            saved: dict[str, Any] = dict(raw)
            saved["features"] = {name: slice_adapter(name).validate_python(v) for name, v in raw["features"].items()}
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err['input']!r})"[:300]
                for err in exc.errors(include_url=False)[:5]
            )
            raise ResumeError(f"this saved run state does not hold together: {problems}") from None
        return cls(**saved)


FRESH_FIELDS = ("run_id", "agent", "input", "stage", "state", "trace", "active_agent", "messages", "features", "limits")
"""The fields :func:`fresh_run_state` takes, in its order; the others get their defaults."""


def _fresh_maker() -> Callable[..., RunState]:
    """``fresh_run_state``: ``RunState(**dict(zip(FRESH_FIELDS, values)))`` for a non-empty
    ``active_agent``, its slots set in one generated function (the dataclass's ``__init__``
    with keywords and ``__post_init__`` take twice its time: a run's set-up makes one)."""
    lines = [f"def fresh_run_state({', '.join(FRESH_FIELDS)}):", "    rs = _new(RunState)"]
    namespace: dict[str, Any] = {"_new": object.__new__, "RunState": RunState}
    for f in fields(RunState):
        if f.name in FRESH_FIELDS:
            value = f.name
        elif f.default_factory is not MISSING:
            value = namespace[f"_make_{f.name}"] = f.default_factory  # type: ignore[assignment]
            value = f"_make_{f.name}()"
        else:
            namespace[f"_default_{f.name}"] = f.default
            value = f"_default_{f.name}"
        lines.append(f"    rs.{f.name} = {value}")
    lines.append("    return rs")
    exec("\n".join(lines), namespace)  # (the dataclass's own way to make an __init__)
    made: Callable[..., RunState] = namespace["fresh_run_state"]
    return made


fresh_run_state = _fresh_maker()
"""A new run's state: ``fresh_run_state(run_id, agent, input, stage, state, trace, active_agent,
messages, features, limits)`` (positional, in :data:`FRESH_FIELDS` order, ``active_agent`` not
empty) equals ``RunState`` made with those fields by name (``Runner.new_run``)."""

_NOT_SAVED = frozenset({"limits", "turn_limits", "request", "legs", "model_in_use"})
SAVED_FIELDS = tuple(f.name for f in fields(RunState) if f.name not in _NOT_SAVED)
_hints = get_type_hints(RunState)
_SavedRunState = TypedDict(  # type: ignore[misc]
    "_SavedRunState", {name: (dict[str, Any] if name == "features" else _hints[name]) for name in SAVED_FIELDS}
)
_SAVED_ADAPTER: TypeAdapter[Any] = TypeAdapter(_SavedRunState)
_VERSION_ADAPTER: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
"""Reads only the version first, so a state of another shape is refused by its version."""

_SLICES: dict[str, tuple[type[Any], TypeAdapter[Any]]] = {}


def register_slice(feature: str, cls: type[Any]) -> None:
    """Declare the dataclass a feature keeps under ``RunState.features[feature]`` (so saved
    states load it back). Called when an Extension with a slice is made."""
    known = _SLICES.get(feature)
    if known is not None and known[0] is not cls:
        raise ConfigurationError(
            f"two features named {feature!r} keep different run-state slices ({known[0].__name__} and "
            f"{cls.__name__}); give one of them another name"
        )
    if known is None:
        _SLICES[feature] = (cls, TypeAdapter(cls))


def slice_adapter(feature: str) -> TypeAdapter[Any]:
    known = _SLICES.get(feature)
    if known is None:
        raise ConfigurationError(
            f"the run state has a slice for feature {feature!r}, which no loaded extension declares; import the "
            "module that defines it before loading the state"
        )
    return known[1]


def not_json_state(state: dict[str, Any]) -> str | None:
    """Why the session state cannot be saved (a key whose value is no JSON value: a client, a
    connection), pointing to ``deps``; None when every value is JSON."""
    for key, value in state.items():
        try:
            to_json(value)
        except PydanticSerializationError:
            return (
                f"session state key {key!r} holds a {type(value).__name__}, which cannot be saved: the run's state "
                "is saved as JSON (to_json, a store, a suspension) and holds JSON values only; pass live objects "
                "(clients, connections, settings) as the run's dependencies instead, runner.run(text, deps=...), "
                "read as ctx.deps and never saved (hand them again to resume(..., deps=...))"
            )
    return None
