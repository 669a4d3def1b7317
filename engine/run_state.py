"""The state of one run: plain data that round-trips through JSON, and the per-run context.

``RunState`` is a slotted dataclass with identity equality: two runs with equal fields are
still two runs. Stages read and write it; guards only read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, TypeAdapter

from .events import (
    AllFieldsSet,
    ErrorInfo,
    Message,
    ModelRequest,
    ModelResponse,
    Outcome,
    PendingRequest,
    ToolResult,
    Usage,
    _Event,
    all_fields,
)
from .limits import LimitName, Limits
from .stage import Stage

if TYPE_CHECKING:
    from .agent import Agent


@dataclass(eq=False, slots=True)
class RunState:
    """Everything a run knows. Saved as JSON with :meth:`to_json`, loaded with :meth:`from_json`."""

    run_id: str
    agent: str
    """The agent the run started with (the root of its tree)."""
    limits: Limits
    input: str
    active_agent: str = ""
    """The agent whose turn it is; changes on a transfer."""
    stage: str = Stage.START
    iteration: int = 0
    """Passes through ``reason`` so far (the salvage call is not counted)."""
    attempt: int = 0
    """Model calls made in the current pass through ``reason`` (1 + retries)."""
    tool_calls_made: int = 0
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)
    request: ModelRequest | None = None
    response: ModelResponse | None = None
    """The latest model reply; cleared when a model call starts."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """Results of the latest ``act``, in the model's call order."""
    model_error: ErrorInfo | None = None
    """The latest model call's error; cleared when a model call starts."""
    error: ErrorInfo | None = None
    """The error that ends (or, for salvage, marred) the run."""
    limit: LimitName | None = None
    """The budget that stopped the loop, once one has."""
    salvaged: bool = False
    text: str | None = None
    """Visible text of the latest reply (thought parts excluded), continuations joined."""
    continuing: bool = False
    """The latest reply was cut short (max_tokens, pause_turn) and will be continued."""
    outcome: Outcome | None = None
    output: str | None = None
    deadline: float | None = None
    """Wall-clock time (``time.time()``) by which the run must end, from ``timeout_s``."""
    deadline_hit: bool = False
    cancel_requested: bool = False
    state: dict[str, JsonValue] = field(default_factory=dict)
    """Session state: instruction placeholders read it, tools read and write it via ``ctx``."""
    trace: list[str] = field(default_factory=list)
    seq: int = 0
    transfer_to: str | None = None
    """A transfer the model asked for in the latest act (cleared by the transfer stage)."""
    transfer_task: str = ""
    transfers: list[tuple[str, str]] = field(default_factory=list)
    """Transfers taken so far, as (from agent, to agent)."""
    branch_start: dict[str, int] = field(default_factory=dict)
    """For agents with the isolated history policy: where their branch of the history starts."""
    vetoes: dict[str, str] = field(default_factory=dict)
    """Tool calls of the latest reply refused before ``act`` (call id -> reason): ``act``
    answers each with an error result instead of running it."""
    pending: list[PendingRequest] = field(default_factory=list)
    """Tool calls waiting on the outside world (the run suspends while any are left)."""
    step_results: list[ToolResult | None] = field(default_factory=list)
    """While calls are pending: the step's results so far, in call order (None: not yet)."""
    suspensions: int = 0
    wait_deadline: float | None = None
    time_left: float | None = None
    """While suspended: what was left of ``timeout_s`` (the clock stops while a run waits)."""

    def __post_init__(self) -> None:
        if not self.active_agent:
            self.active_agent = self.agent

    def to_json(self) -> bytes:
        return RUN_STATE_ADAPTER.dump_json(self)

    @classmethod
    def from_json(cls, data: str | bytes) -> RunState:
        return RUN_STATE_ADAPTER.validate_json(data)


RUN_STATE_ADAPTER: TypeAdapter[RunState] = TypeAdapter(RunState)

_clock = time.time


class RunContext:
    """What stages and tools get besides the run state.

    Tools that declare a ``ctx`` parameter receive this: ``ctx.run_id``, ``ctx.agent`` (the
    active agent), ``ctx.agents`` (every agent of the tree by name), ``ctx.state`` (the session
    state, shared by the whole run), ``ctx.credentials`` (supplied on resume, never saved) and
    ``ctx.run_state``.
    """

    __slots__ = (
        "agent",
        "agents",
        "can_wait",
        "credentials",
        "decisions",
        "run_id",
        "run_state",
        "sink",
        "state",
        "stream_deltas",
    )

    def __init__(
        self,
        agent: Agent,
        run_state: RunState,
        sink: Callable[[Any], None],
        *,
        stream_deltas: bool = False,
        agents: dict[str, Agent] | None = None,
    ) -> None:
        self.agents: dict[str, Agent] = agents if agents is not None else {agent.name: agent}
        self.decisions: dict[str, Any] = {}
        """Decisions handed to ``resume`` for pending calls (never saved with the run state)."""
        self.credentials: dict[str, Any] = {}
        """Credentials supplied on resume, by key (never saved with the run state)."""
        self.can_wait = False
        """The run's machine has a waiting state (set by the runner)."""
        self.agent = self.agents.get(run_state.active_agent, agent)
        self.run_state = run_state
        self.run_id = run_state.run_id
        self.state = run_state.state
        self.sink = sink
        self.stream_deltas = stream_deltas

    def emit(self, cls: type[_Event], **fields: Any) -> None:
        """Build one event of ``cls`` stamped with the run's id, next seq, time, stage, iteration
        and agent, and hand it to the sink (the result's event list, and the stream).
        Hot path: fields are typed by the caller, so the event is built as :func:`trusted` does."""
        rs = self.run_state
        rs.seq += 1
        kind, fields_set = _EVENT_CLASSES[cls]
        fields.update(
            type=kind,
            run_id=rs.run_id,
            seq=rs.seq,
            time=_clock(),
            state=rs.stage,
            iteration=rs.iteration,
            agent=rs.active_agent,
        )
        event = _new(cls)
        _set(event, "__dict__", fields)
        _set(event, "__pydantic_fields_set__", fields_set)
        _set(event, "__pydantic_extra__", None)
        _set(event, "__pydantic_private__", None)
        self.sink(event)


_new = object.__new__
_set = object.__setattr__


def _event_classes() -> dict[type[_Event], tuple[str, AllFieldsSet]]:
    """Each event class's ``type`` value and shared fields-set, computed once."""
    found: dict[type[_Event], tuple[str, AllFieldsSet]] = {}
    pending: list[type[_Event]] = [_Event]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if "type" in sub.model_fields:
                found[sub] = (sub.model_fields["type"].default, all_fields(sub))
    return found


_EVENT_CLASSES = _event_classes()
