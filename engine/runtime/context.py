"""RunContext: what stages and tools get besides the run state. The run's event log, and the
shapes of its entries, are :mod:`loopwright.data.event_log`'s (re-exported here)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from ..data.errors import ConfigurationError
from ..data.event_log import EventLog as EventLog
from ..data.event_log import LogEntry as LogEntry
from ..data.event_log import Where as Where
from ..data.event_log import own_values as own_values
from ..data.events import EVENT_FIELDS, EVENT_TYPE, EventBase, ToolCall, event_values
from ..data.limits import Limits
from ..data.run_state import RunState
from ..table.budgets import Budget
from .nesting import Up, up_of

if TYPE_CHECKING:
    from .agent import Agent, AgentTree

_clock = time.time
DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's dependencies (``runner.run(text, deps=...)``): ``RunContext[MyDeps]``."""
CURRENT_CALL: ContextVar[str | None] = ContextVar("loopwright_call_id", default=None)
"""The id of the tool call in progress in this task (``ctx.call_id``)."""


class RunContext(Generic[DepsT]):
    """What stages and tools get besides the run state.

    Tools that declare a ``ctx`` parameter receive this: ``ctx.run_id``, ``ctx.agent`` (the
    active agent), ``ctx.agents`` (every agent of the tree by name), ``ctx.state`` (the session
    state, shared by the whole run), ``ctx.credentials`` (supplied on resume, never saved),
    ``ctx.deps`` (the run's dependencies: ``runner.run(text, deps=...)``, never saved; type it
    as ``RunContext[MyDeps]``), ``ctx.limits`` (the active agent's own limits, or the run's when
    it has none) and ``ctx.run_state``.
    """

    __slots__ = (
        "agent",
        "budgets",
        "call_ids",
        "credentials",
        "decisions",
        "deps",
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
        "retry_hooks",
        "run_id",
        "run_state",
        "state",
        "store",
        "stream_deltas",
        "told",
        "tool_names",
        "tool_scopes",
        "tools_named",
        "tree",
        "up",
        "watchers",
    )

    def __init__(  # noqa: PLR0915 (one assignment per slot, each with what it holds)
        self,
        tree: AgentTree,
        run_state: RunState,
        *,
        watchers: Sequence[Callable[[Any], None]] = (),
        stream_deltas: bool = False,
        features: frozenset[str] = frozenset(),
        hooks: Callable[[str], tuple[Callable[..., Any], ...]] | None = None,
        budgets: Mapping[str, Budget] | None = None,
        deps: DepsT = None,  # type: ignore[assignment]
    ) -> None:
        self.tree = tree
        # the run's dependencies (``runner.run(text, deps=...)``, again on ``resume``): any object
        # (a database client, an HTTP session, settings); never saved with the state or an event
        self.deps: DepsT = deps
        self.run_state = run_state
        self.run_id = run_state.run_id
        self.state = run_state.state
        self.decisions: dict[str, Any] = {}
        """Decisions handed to ``resume`` for pending calls (never saved with the run state)."""
        self.credentials: dict[str, Any] = {}
        """Credentials supplied on resume, by key (never saved with the run state)."""
        self.told: dict[str, str] | None = None  # told the model with an approved call's result (an edit, a note)
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
        self.retry_hooks = found("retry")
        """The features that decide what a failed call of a tool with retries gets (the first)."""
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
        (:mod:`loopwright.runtime.nesting`: its model and tool calls are checked against their budgets)."""
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
        """Every tool call id of the run so far (made on first use: :mod:`loopwright.runtime.model_call`)."""
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
        five field values (:func:`~loopwright.data.events.reply_values`; see :func:`own_values`).
        The log's usual case (the place of the entry before) is written here, the entry's shape
        :class:`EventLog`'s own (``EventLog.record``: every other case)."""
        rs = self.run_state
        rs.seq += 1
        log = self.log
        stage, iteration, agent = rs.stage, rs.iteration, rs.active_agent
        if stage == log.stage and iteration == log.iteration and agent == log.agent:
            log.entries.append((EVENT_TYPE[cls], *values))
            log.times.append(_clock())
        else:
            log.record(stage, iteration, agent, EVENT_TYPE[cls], values)
        if self.watchers:
            self._tell(log.latest())

    def record_call(self, call: ToolCall) -> None:
        """``record(ToolCalled, call)``, kept as the call itself where the stage, iteration
        and agent are those of the entry before (the usual case, written here: no tuple for the
        log; ``EventLog.record_call`` the others)."""
        rs = self.run_state
        rs.seq += 1
        log = self.log
        stage, iteration, agent = rs.stage, rs.iteration, rs.active_agent
        if stage == log.stage and iteration == log.iteration and agent == log.agent:
            log.entries.append(call)
            log.times.append(_clock())
        else:
            log.record_call(stage, iteration, agent, call)
        if self.watchers:
            self._tell(log.latest())

    def _tell(self, event: Any) -> None:
        for watcher in self.watchers:
            watcher(event)
