"""RunContext: what stages and tools get besides the run state, and the run's event log.

Events are recorded compactly: an entry is the event's class, time, stage, iteration, agent
and own fields, and the pydantic event is built only when someone reads it
(``RunResult.events``) or an event observer is watching (a stream, a sink, a log). A run that
nobody watches pays for no event object.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .budgets import Budget
from .events import EventBase, make_event
from .limits import Limits
from .run_state import RunState

if TYPE_CHECKING:
    from .agent import Agent, AgentTree

_clock = time.time

LogEntry = Any
"""An event as recorded: the built event, or ``(cls, time, stage, iteration, agent, field names,
field values)``; the names are one shared tuple per shape of event."""
_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


class EventLog:
    """One run's events in ``seq`` order, built on demand. ``base`` is the ``seq`` before the
    first entry (a resumed run continues its numbering)."""

    __slots__ = ("base", "entries", "run_id")

    def __init__(self, run_id: str, base: int) -> None:
        self.run_id = run_id
        self.base = base
        self.entries: list[LogEntry] = []

    def __len__(self) -> int:
        return len(self.entries)

    def event(self, i: int) -> Any:
        """The ``i``-th event (built and kept the first time it is asked for)."""
        entry = self.entries[i]
        if isinstance(entry, EventBase):
            return entry
        cls, at, stage, iteration, agent, keys, values = entry
        event = make_event(
            cls, self.run_id, self.base + i + 1, at, stage, iteration, agent, dict(zip(keys, values, strict=True))
        )
        self.entries[i] = event
        return event

    def events(self) -> list[Any]:
        return [self.event(i) for i in range(len(self.entries))]


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
        "credentials",
        "decisions",
        "features",
        "gates",
        "holds",
        "interrupt",
        "limits",
        "log",
        "request_hooks",
        "run_id",
        "run_state",
        "state",
        "stream_deltas",
        "tree",
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
        self.gates = found("gate")
        """The features' per-call gates (act asks them before running a call)."""
        self.holds = found("hold")
        self.interrupt: BaseException | None = None
        """A KeyboardInterrupt a tool raised: the run ends cancelled, then the runner re-raises it."""
        """The features that may keep a step whose calls wait."""
        self.stream_deltas = stream_deltas
        self.log = EventLog(run_state.run_id, run_state.seq)
        self.watchers: list[Callable[[Any], None]] = list(watchers)
        """Called with every event as it is emitted (the runner's event observers)."""
        self.agent: Agent = tree.agents.get(run_state.active_agent, tree.root)
        self.limits: Limits = self.agent.own_limits or tree.root.limits
        """The active agent's limits: its own, or (when it has none) the run's."""

    @property
    def agents(self) -> dict[str, Agent]:
        return self.tree.agents

    def switch_agent(self, name: str) -> None:
        """Make ``name`` the active agent (a transfer)."""
        self.agent = self.tree.agents[name]
        self.limits = self.agent.own_limits or self.tree.root.limits

    def emit(self, cls: type[EventBase], **fields: Any) -> None:
        """Record one event of ``cls``, stamped with the run's next seq, the time, stage,
        iteration and active agent; hand it to the watchers, if any, as a built event."""
        rs = self.run_state
        rs.seq += 1
        keys = tuple(fields)
        entry = (cls, _clock(), rs.stage, rs.iteration, rs.active_agent, _KEYS.setdefault(keys, keys),
                 tuple(fields.values()))  # fmt: skip
        entries = self.log.entries
        entries.append(entry)
        if self.watchers:
            event = self.log.event(len(entries) - 1)
            for watcher in tuple(self.watchers):
                watcher(event)
