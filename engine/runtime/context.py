"""RunContext: what stages and tools get besides the run state, and the run's event log.

Events are recorded compactly: an entry is the event's class, time, stage, iteration, agent
and own fields, and the pydantic event is built only when someone reads it
(``RunResult.events``) or an event observer is watching (a stream, a sink, a log). A run that
nobody watches pays for no event object.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..data.errors import ConfigurationError
from ..data.events import (
    EVENT_BY_TYPE,
    EVENT_CLASSES,
    EVENT_FIELDS,
    EVENT_TYPE,
    EventBase,
    ModelResponded,
    StateEntered,
    ToolCall,
    ToolCalled,
    event_values,
    make_event,
    reply_of,
)
from ..data.limits import Limits
from ..data.run_state import RunState
from ..table.budgets import Budget
from .nesting import Up, up_of

if TYPE_CHECKING:
    from .agent import Agent, AgentTree

_clock = time.time
CURRENT_CALL: ContextVar[str | None] = ContextVar("loopwright_call_id", default=None)
"""The id of the tool call in progress in this task (``ctx.call_id``)."""

LogEntry = Any
"""An event as recorded, one of:

- a built event (once someone read it);
- a ``Row``: the transition taken (a ``StateEntered`` into ``row.dest``), at the iteration and
  agent of the entry before it;
- ``(row, iteration, agent)``: a transition where either changed;
- a ``ToolCall``: a ``tool_called`` event of that call, at the stage, iteration and agent of
  the entry before it (:meth:`RunContext.record_call`: the call is frozen and the history
  keeps it, so the log keeps nothing of its own for it);
- ``(kind, *values)``: any other event, ``kind`` its ``type`` string, its own field values in
  ``EVENT_FIELDS[cls]`` order, at the stage, iteration and agent of the entry before it (a
  ``tool_called`` recorded where its place changed holds the call itself,
  ``(..., "tool_called", call)``, the log pointing at it rather than copying three fields;
  a ``model_responded`` may hold the reply's five field values instead of the reply,
  ``("model_responded", parts, usage, stop_reason, model, details or None)``
  (:func:`~loopwright.events.reply_values`): the parts are the history's, and the reply
  object, its ``__dict__`` and its empty ``details`` are not kept alive once the run moves
  on, a third of what a past iteration would otherwise keep; :func:`own_values` reads them);
- ``(iteration, kind, *values)``: the same where only the iteration changed (a pass's first
  model request: no tuple for the place);
- ``((stage, iteration, agent), kind, *values)``: the same where the stage or agent changed.

An event is named by its ``type`` string, not its class: a tuple of strings and numbers is
one the garbage collector stops tracking, so a finished run's log costs it nothing to walk.

The times are kept apart, one float each in an array. So a transition costs the log 16 bytes,
another event one flat tuple, and events() rebuilds every field exactly in one pass.
"""


_TOOL_CALLED = EVENT_TYPE[ToolCalled]
_MODEL_RESPONDED = EVENT_TYPE[ModelResponded]

Where = tuple[str, int, str]
"""(stage, iteration, agent): where in the run an entry was recorded."""


class EventLog:
    """One run's events in ``seq`` order, built on demand. ``base`` is the ``seq`` before the
    first entry (a resumed run continues its numbering); ``start`` the (stage, iteration,
    agent) before it; ``stage``, ``iteration`` and ``agent`` those of the latest entry."""

    __slots__ = ("agent", "base", "entries", "iteration", "run_id", "stage", "start", "times")

    def __init__(self, run_id: str, base: int, stage: str = "", iteration: int = 0, agent: str = "") -> None:
        self.run_id = run_id
        self.base = base
        self.entries: list[LogEntry] = []
        self.times = array("d")
        self.start = (stage, iteration, agent)
        self.stage, self.iteration, self.agent = stage, iteration, agent

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, event: Any) -> None:
        """Append an event built elsewhere (one recorded by a durable executor, replayed)."""
        self.entries.append(event)
        self.times.append(event.time)
        self.stage, self.iteration, self.agent = event.state, event.iteration, event.agent

    def latest(self) -> Any:
        """The latest event, built and kept (the log's own stage, iteration and agent are
        the latest entry's)."""
        i = len(self.entries) - 1
        entry = self.entries[i]
        if isinstance(entry, EventBase):
            return entry
        event = self.entries[i] = make_event(*self._parts(i, entry, self.stage, self.iteration, self.agent))
        return event

    def events(self) -> list[Any]:
        """Every event, built (and kept) in one pass."""
        entries = self.entries
        for i, entry, stage, iteration, agent in self._walk(0, self.start):
            if not isinstance(entry, EventBase):
                entries[i] = make_event(*self._parts(i, entry, stage, iteration, agent))
        return list(entries)

    def records(self, start: int, at: Where) -> tuple[list[Any], Where]:
        """The events from entry ``start`` on, each as its built event (if one was built) or a
        plain dict of all its fields (JSON-ready but for nested models; nothing is built or
        kept), and the (stage, iteration, agent) after the last. ``at`` is that before
        ``start`` (``log.start`` for 0): a reader that saves events as they come (a store)
        keeps it between calls, so each call costs only the new entries."""
        out: list[Any] = []
        for i, entry, stage, iteration, agent in self._walk(start, at):
            at = (stage, iteration, agent)
            if isinstance(entry, EventBase):
                out.append(entry)
                continue
            cls, run_id, seq, time, state, _, _, fields = self._parts(i, entry, stage, iteration, agent)
            out.append({"type": EVENT_CLASSES[cls][0], "run_id": run_id, "seq": seq, "time": time, "state": state,
                        "iteration": iteration, "agent": agent, **fields})  # fmt: skip
        return out, at

    def flat(self, start: int, at: Where) -> Iterator[tuple[int, Any, str, int, str, tuple[Any, ...]]]:
        """The entries from ``start`` as ``(i, cls, stage, iteration, agent, values)``, its
        own field values in ``EVENT_FIELDS[cls]`` order (``("source", "guard")`` for a
        ``StateEntered``); an event built already as ``(i, event, ...)`` with values ``()``.
        Nothing is built: what a store writes as it goes. ``at`` as for :meth:`records`."""
        for i, entry, stage, iteration, agent in self._walk(start, at):
            if isinstance(entry, EventBase):
                yield i, entry, stage, iteration, agent, ()
                continue
            cls, values = _decoded(entry)
            yield i, cls, stage, iteration, agent, values

    def _walk(self, start: int, at: Where) -> Iterator[tuple[int, LogEntry, str, int, str]]:
        """Each entry from ``start`` with the stage, iteration and agent it was recorded at."""
        stage, iteration, agent = at
        entries = self.entries
        for i in range(start, len(entries)):
            entry = entries[i]
            if isinstance(entry, EventBase):
                stage, iteration, agent = entry.state, entry.iteration, entry.agent
            elif not isinstance(entry, tuple):
                if type(entry) is not ToolCall:  # a transition (a tool call keeps its place)
                    stage = entry.dest
            else:
                first = entry[0]
                if type(first) is tuple:  # an event where the stage or agent changed
                    stage, iteration, agent = first
                elif type(first) is int:  # an event where the iteration changed
                    iteration = first
                elif type(first) is not str:  # a transition where the iteration or agent changed
                    stage, iteration, agent = first.dest, entry[1], entry[2]
            yield i, entry, stage, iteration, agent

    def _parts(self, i: int, entry: LogEntry, stage: str, iteration: int, agent: str) -> tuple[Any, ...]:
        """``make_event``'s arguments for entry ``i`` (not a built event)."""
        cls, values = _decoded(entry)
        fields = dict(zip(EVENT_FIELDS[cls], values, strict=True))
        return cls, self.run_id, self.base + i + 1, self.times[i], stage, iteration, agent, fields


def _decoded(entry: LogEntry) -> tuple[Any, tuple[Any, ...]]:
    """The class and own field values of a compact entry (not a built event); a transition's
    are ``StateEntered``'s, its source and guard (the ``stage`` it is read at is its dest)."""
    if type(entry) is ToolCall:
        return ToolCalled, (entry.id, entry.name, entry.args)
    first = entry[0] if isinstance(entry, tuple) else entry
    if type(first) is str:
        return EVENT_BY_TYPE[first], own_values(first, entry[1:])
    if type(first) is tuple or type(first) is int:  # an event where its place changed
        return EVENT_BY_TYPE[entry[1]], own_values(entry[1], entry[2:])
    return StateEntered, (first.source, first.label)


def own_values(kind: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """An entry's values as the event's own fields (a ``tool_called`` kept as its call: the
    call's id, name and arguments; a ``model_responded`` kept as the reply's field values:
    the reply, rebuilt)."""
    if kind == _TOOL_CALLED and len(values) == 1:
        call = values[0]
        return call.id, call.name, call.args
    if kind == _MODEL_RESPONDED and len(values) == 5:
        return (reply_of(values),)
    return values


class RunContext:
    """What stages and tools get besides the run state.

    Tools that declare a ``ctx`` parameter receive this: ``ctx.run_id``, ``ctx.agent`` (the
    active agent), ``ctx.agents`` (every agent of the tree by name), ``ctx.state`` (the session
    state, shared by the whole run), ``ctx.credentials`` (supplied on resume, never saved),
    ``ctx.limits`` (the active agent's own limits, or the run's when it has none) and ``ctx.run_state``.
    """

    __slots__ = (
        "agent",
        "budgets",
        "call_ids",
        "credentials",
        "decisions",
        "features",
        "gates",
        "holds",
        "interrupt",
        "limits",
        "link",
        "log",
        "model_scopes",
        "offered",
        "offered_of",
        "on_result",
        "request_hooks",
        "response_hooks",
        "run_id",
        "run_state",
        "state",
        "store",
        "stream_deltas",
        "tool_names",
        "tool_scopes",
        "tools_named",
        "tree",
        "up",
        "watchers",
    )

    def __init__(
        self,
        tree: AgentTree,
        run_state: RunState,
        *,
        watchers: Sequence[Callable[[Any], None]] = (),
        stream_deltas: bool = False,
        features: frozenset[str] = frozenset(),
        hooks: Callable[[str], tuple[Callable[..., Any], ...]] | None = None,
        budgets: Mapping[str, Budget] | None = None,
    ) -> None:
        self.tree = tree
        self.run_state = run_state
        self.run_id = run_state.run_id
        self.state = run_state.state
        self.decisions: dict[str, Any] = {}
        """Decisions handed to ``resume`` for pending calls (never saved with the run state)."""
        self.credentials: dict[str, Any] = {}
        """Credentials supplied on resume, by key (never saved with the run state)."""
        self.features = features
        """The names of the features of the run's machine."""
        self.budgets: Mapping[str, Budget] = budgets or {}
        """The budgets of the run's machine, by name."""
        found = hooks or (lambda _name: ())
        self.request_hooks = found("request")
        """The features' request processors (preprocess and salvage apply them in order)."""
        self.response_hooks = found("response")
        """The features' reply processors (postprocess applies them in order)."""
        self.gates = found("gate")
        """The features' per-call gates (act asks them before running a call)."""
        self.holds = found("hold")
        """The features that may keep a step whose calls wait."""
        self.tools_named: Any = None
        self.tool_names: tuple[str, ...] = ()
        """The names of the tool specs ``tools_named``: those of the latest request the model was
        sent (``reason`` reuses them; ``call_model`` sets them when ``before_model`` replaced it)."""
        self.offered: frozenset[str] = frozenset()
        self.offered_of: tuple[str, ...] | None = None
        """``offered`` is ``set(offered_of)``, kept while ``tool_names`` is ``offered_of``: a call to
        a tool not offered in the request is answered with an error, not run (``calls._check``)."""
        self.link: Any = None
        self.up: Up | None = up_of(run_state)
        """This run's link to the runs above it, when it was started in a tool of another run
        (:mod:`loopwright.nesting`: its model and tool calls are checked against their budgets)."""
        """This run as the parent of runs started in its tools (``nesting.link``, made at first use)."""
        self.interrupt: BaseException | None = None
        """A KeyboardInterrupt a tool raised: the run ends cancelled, then the runner re-raises it."""
        self.stream_deltas = stream_deltas
        self.log = EventLog(
            run_state.run_id, run_state.seq, run_state.stage, run_state.iteration, run_state.active_agent
        )
        self.watchers: tuple[Callable[[Any], None], ...] = tuple(watchers)
        """Called with every event as it is emitted (the runner's event observers)."""
        self.tool_scopes: tuple[Callable[[Any], Any], ...] = ()
        """Context managers entered around each tool call (per-run observers' ``tool_scope``)."""
        self.model_scopes: tuple[Callable[[Any], Any], ...] = ()
        """Context managers entered around each model call (per-run observers' ``model_scope``)."""
        self.on_result: Callable[..., Awaitable[None]] | None = None
        """Awaited with ``(call, result, ctx)`` as each tool call that ran is answered (a store keeps it)."""
        self.call_ids: set[str] | None = None
        self.store: Any = None
        """The store of the runner driving the run (None without): a stage that runs nested runs
        of its own (a workflow agent's steps) checkpoints them there."""
        """Every tool call id of the run so far (made on first use: :mod:`loopwright.model_call`)."""
        self.agent: Agent = tree.agents.get(run_state.active_agent, tree.root)
        self.limits: Limits = self.agent.own_limits or tree.root.limits
        """The active agent's limits: its own, or (when it has none) the run's."""

    @property
    def agents(self) -> dict[str, Agent]:
        return self.tree.agents

    @property
    def call_id(self) -> str | None:
        """The id of the tool call being run (in a tool, ``before_tool`` or ``after_tool``)."""
        return CURRENT_CALL.get()

    @property
    def idempotency_key(self) -> str:
        """``run_id:call_id``: the same across a crash and resume, so payment or email APIs
        that take an idempotency key do the call's work once. Read it while a tool call runs
        (in the tool, ``before_tool`` or ``after_tool``); elsewhere there is no call to key,
        and reading it is a :class:`~loopwright.ConfigurationError`."""
        call_id = CURRENT_CALL.get()
        if call_id is None:
            raise ConfigurationError(
                "ctx.idempotency_key is the key of the tool call in progress, and no tool call is running; "
                "read it inside a tool (or before_tool/after_tool), or use ctx.run_id"
            )
        return f"{self.run_id}:{call_id}"

    def switch_agent(self, name: str) -> None:
        """Make ``name`` the active agent (a transfer)."""
        self.agent = self.tree.agents[name]
        self.limits = self.agent.own_limits or self.tree.root.limits

    def tell_latest(self) -> None:
        """Hand the latest entry, built, to the watchers (the runner records a transition
        itself, :meth:`Run._take`, then calls this when someone watches)."""
        self._tell(self.log.latest())

    def emit(self, cls: type[EventBase], *values: Any, **fields: Any) -> None:
        """Record one event of ``cls``, stamped with the run's next seq, the time, stage,
        iteration and active agent; hand it to the watchers, if any, as a built event.

        Its own fields are given by name, or positionally, all of them in ``EVENT_FIELDS[cls]``
        order: ``ctx.emit(ToolCalled, call.id, call.name, call.args)`` (a wrong count is a
        TypeError naming the fields)."""
        own = EVENT_FIELDS[cls]
        if fields or len(values) != len(own):
            if values:
                raise TypeError(f"emit({cls.__name__}, ...): give all of {list(own)} in order, or names")
            values = tuple([fields[k] for k in own]) if fields.keys() == set(own) else event_values(cls, fields)
        self.record(cls, *values)

    def record(self, cls: type[EventBase], *values: Any) -> None:
        """:meth:`emit` on the hot path: every one of the event's own fields, positionally, in
        ``EVENT_FIELDS[cls]`` order, unchecked (no keyword dict is built; the event-log property
        test builds every event the engine records this way). A ``ToolCalled`` may be given
        its call alone, ``record(ToolCalled, call)``, and a ``ModelResponded`` its reply's
        five field values (:func:`~loopwright.events.reply_values`; see :func:`own_values`)."""
        rs, log = self.run_state, self.log
        rs.seq += 1
        if rs.stage == log.stage and rs.active_agent == log.agent:
            if rs.iteration == log.iteration:
                log.entries.append((EVENT_TYPE[cls],) + values)  # noqa: RUF005 (cheaper than unpacking: no list built)
            else:
                log.iteration = rs.iteration
                log.entries.append((rs.iteration, EVENT_TYPE[cls], *values))
        else:
            where = log.stage, log.iteration, log.agent = rs.stage, rs.iteration, rs.active_agent
            log.entries.append((where, EVENT_TYPE[cls], *values))
        log.times.append(_clock())
        if self.watchers:
            self._tell(log.latest())

    def record_call(self, call: ToolCall) -> None:
        """``record(ToolCalled, call)``, kept as the call itself where the stage, iteration
        and agent are those of the entry before (the usual case: no tuple for the log)."""
        rs, log = self.run_state, self.log
        if rs.stage != log.stage or rs.active_agent != log.agent or rs.iteration != log.iteration:
            self.record(ToolCalled, call)
            return
        rs.seq += 1
        log.entries.append(call)
        log.times.append(_clock())
        if self.watchers:
            self._tell(log.latest())

    def _tell(self, event: Any) -> None:
        for watcher in self.watchers:
            watcher(event)
