"""The transition table of the core loop, extensions composed onto it, and the machine.

The table is the diagram: each row is ``source -> dest if all guards hold``. Rows out of one
state are tried in order and the first whose guards all hold wins; every working state ends in
a fallback row (no guards). A row that closes a cycle is *bounded*: it names a budget, the
engine charges that budget each time the row fires, and once it is spent the row cannot fire,
whatever its guards say, so every run ends. A row into a terminal says the run's outcome.

The core (``CORE``, the plain agent)::

    start       -> preprocess
    preprocess  -> cancelled    if cancel_requested                       => cancelled
    preprocess  -> failed       if has_error                              => failed
    preprocess  -> reason
    reason      -> cancelled    if cancel_requested                       => cancelled
    reason      -> postprocess  if has_response
    reason      -> decide       if deadline_passed
    reason      -> reason       if has_retryable_model_error & retries_left   [bounded: max_model_retries]
    reason      -> reason       if has_failed_model & fallback_left           [bounded: max_fallbacks]  (the next model)
    reason      -> salvage      if request_over_token_budget & salvage_allowed  (the request was not sent)
    reason      -> done         if request_over_token_budget              => limit
    reason      -> done         if request_over_cost_budget               => limit  (the request was not sent)
    reason      -> failed                                                 => failed
    postprocess -> cancelled    if cancel_requested                       => cancelled
    postprocess -> act          if has_tool_calls
    postprocess -> decide
    act         -> cancelled    if cancel_requested                       => cancelled
    act         -> decide
    decide      -> cancelled    if cancel_requested                       => cancelled
    decide      -> done         if is_final_response                      => final
    decide      -> preprocess   if within_{iteration,tool_call,token,cost,time}_budget  [bounded: max_iterations]
    decide      -> salvage      if salvage_allowed                        (a budget is spent)
    decide      -> done                                                   => limit
    salvage     -> cancelled    if cancel_requested                       => cancelled
    salvage     -> done         if has_response                           => salvaged
    salvage     -> done                                                   => limit

A feature is an :class:`Extension`: its states and their handlers, its rows (added before a
state's fallback, or before a named row), redirected and removed rows, guards it adds to
existing rows, its budgets, its slice of run state, and a few narrow hooks. ``compose(*exts)``
builds the machine of the core with those features (cached per feature set); the built-in
features (``loopwright.features``) and a user's :func:`~loopwright.extend` use the same
mechanism. One :class:`LoopMachine` serves all concurrent runs: runs are never registered as
``transitions`` models; :meth:`LoopMachine.choose` runs each state's rows compiled into one
function that calls the condition functions of the machine's own transition objects in order
(what ``trigger`` would do, without its per-call bookkeeping;
:meth:`LoopMachine.choose_via_trigger` does the full trigger, and tests check both always agree).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from transitions import Machine

from ..data.errors import MachineError, NoTransitionError
from ..data.events import ModelRequest, ModelResponse
from ..data.limits import Limits
from ..data.run_state import RunState, register_slice
from ..data.stage import TERMINALS, Stage
from .budgets import CORE_BUDGETS, Budget, budget_of, budget_spent_by, registry
from .chooser import compile_chooser
from .guards import (  # noqa: F401 (imported here before the rows moved: kept for who imports them from here)
    GUARDS,
    cancel_requested,
    deadline_passed,
    has_error,
    has_response,
    has_retryable_model_error,
    has_tool_calls,
    is_final_response,
    request_over_token_budget,
    retries_left,
    salvage_allowed,
    within_iteration_budget,
    within_time_budget,
    within_token_budget,
    within_tool_call_budget,
)
from .rows import ACT as ACT
from .rows import CANCELLED as CANCELLED
from .rows import CORE_ROWS as CORE_ROWS
from .rows import DECIDE as DECIDE
from .rows import DEFAULT_OUTCOMES as DEFAULT_OUTCOMES
from .rows import DONE as DONE
from .rows import FAILED as FAILED
from .rows import POST as POST
from .rows import PRE as PRE
from .rows import REASON as REASON
from .rows import SALVAGE as SALVAGE
from .rows import START as START
from .rows import WITHIN_BUDGETS as WITHIN_BUDGETS
from .rows import Guard as Guard
from .rows import GuardRef as GuardRef
from .rows import Row as Row
from .rows import Rule as Rule
from .rows import abort_row as abort_row
from .rows import cancellable as cancellable
from .rows import detour as detour
from .rows import raised as raised
from .rules import Table, resolve_guard, structural
from .table_edits import apply_changes

_chooser = compile_chooser  # its name before it moved (tests import it from here)

if TYPE_CHECKING:
    from ..runtime.context import RunContext

Handler = Callable[[RunState, "RunContext"], Awaitable[None] | None]
"""A stage's work: ``async def`` (awaited), or a plain ``def`` for a stage that never waits (it
may still return an awaitable for the runner to await when, this time, it must wait)."""
TRIGGER = "advance"


def only_when_named(agent: Any) -> bool:
    """An extension's default ``applies_to``: never of itself (an agent names the extensions it
    wants: ``Agent(extensions=[...])``, or a machine made by :func:`~loopwright.extend`)."""
    return False


@dataclass(frozen=True, eq=False)
class Extension:
    """A feature composed onto the core: everything it adds, as one value.

    Rows and states:

    - ``states``: new states and their handlers ``async def h(rs, ctx) -> None``;
    - ``remove``: drop every row ``source -> dest`` for each ``(source, dest)``;
    - ``redirect``: ``{(source, dest): new_dest}`` sends those rows elsewhere (guards, bound kept);
    - ``require``: ``{(source, dest): guards}`` adds guards in front of those rows' own;
    - ``rows``: new rows; one out of a state that has rows goes just before its fallback;
    - ``rows_before``: ``{(source, dest): rows}`` puts rows just before the first such row;
    - ``waiting``: which of its states pause the run until ``Runner.resume``.

    Data: ``budgets`` (registered so rows may be ``bounded_by`` them), ``guards`` (names a
    user's rows may use), ``slice`` (a dataclass kept at ``RunState.features[name]``: made
    fresh for each run, saved with it; a slice holding requests for people offers
    ``pending_requests()``, and ``RunResult.pending`` lists them).

    Which agents it applies to: ``applies_to(agent) -> bool``. The built-in features
    (``loopwright.features.BUILT_IN``) are composed onto an agent's machine when it says True
    for the agent (``features_for`` asks each in turn: Burr-style, the feature decides, the
    composer has no ``if`` per feature). The default, :func:`only_when_named`, says False: such
    an extension is composed only when the agent names it (``Agent(extensions=[...])`` or a
    machine made by :func:`~loopwright.extend`), which is what a user's own extension wants.

    Hooks (each optional, called in extension order, always with keyword arguments, so a hook
    may grow new ones: take the keywords you use and ``**_`` for any added later):

    - ``request(*, request, rs, ctx) -> ModelRequest``: preprocess (and salvage) hand each
      pass's request through it (structlog-style processors);
    - ``response(*, response, rs, ctx) -> ModelResponse``: postprocess hands each reply through
      it before taking it in (Plan-ReAct splits tagged text into thoughts and the answer);
    - ``gate(*, call, rs, ctx) -> ToolResult | PendingRequest | None``: act asks it before it runs
      a call: a result answers the call, a request makes it wait, None lets it run;
    - ``hold(*, rs, ctx, calls, results, waits) -> str | None``: act has calls that wait; None
      means the feature keeps the step (act answers nothing yet); else why it does not, and act
      answers them with an error saying so;
    - ``pause(*, rs, ctx)``: the runner is pausing the run in one of ``waiting``;
    - ``resume(*, rs, ctx, decisions)``: ``Runner.resume`` hands over decisions (raise
      ResumeError to refuse them, changing nothing);
    - ``finish(*, rs, ctx, why)``: the run is ending: answer any calls the feature holds;
    - ``retry(*, call, tool, reason, message, attempt, ctx) -> ToolResult | float``: a call of a
      tool with ``retries=N`` failed (``reason``: ``"arguments"`` or ``"retry_tool"``: the model
      may fix it; ``"transient"``: an exception of its ``retry_on``, act's retry number
      ``attempt``): the call's answer, or the seconds to wait before act calls it again. The
      first extension with this hook decides; without one the call is answered with the error.
    """

    name: str
    states: Mapping[str, Handler] = field(default_factory=dict)
    rows: Sequence[Row] = ()
    rows_before: Mapping[tuple[str, str], Sequence[Row]] = field(default_factory=dict)
    redirect: Mapping[tuple[str, str], str] = field(default_factory=dict)
    require: Mapping[tuple[str, str], Sequence[Guard]] = field(default_factory=dict)
    remove: Sequence[tuple[str, str]] = ()
    waiting: frozenset[str] = frozenset()
    budgets: Sequence[Budget] = ()
    guards: Mapping[str, Guard] = field(default_factory=dict)
    slice: type[Any] | None = None
    request: Callable[..., ModelRequest] | None = None
    response: Callable[..., ModelResponse] | None = None
    gate: Callable[..., Any] | None = None
    hold: Callable[..., str | None] | None = None
    pause: Callable[..., None] | None = None
    resume: Callable[..., None] | None = None
    finish: Callable[..., None] | None = None
    retry: Callable[..., Any] | None = None
    applies_to: Callable[[Any], bool] = only_when_named
    """Whether an agent (a ``loopwright.Agent``, typed ``Any``: the table stands below the agent)
    gets this feature without naming it; see the class docstring."""

    def __post_init__(self) -> None:
        if self.slice is not None:
            register_slice(self.name, self.slice)

    def __repr__(self) -> str:
        return f"Extension({self.name!r})"


class LoopMachine:
    """A checked transition table and the ``transitions.Machine`` built from it.

    Usually made by :func:`compose`. ``handlers`` holds the handlers of states the core stages
    do not cover (extensions' states); ``budgets`` the budgets rows may be bounded by (default:
    the core's); ``guards`` the names rows may use for guards (besides the core's).
    """

    def __init__(
        self,
        rows: Sequence[Row] = CORE_ROWS,
        *,
        states: Iterable[str] | None = None,
        terminals: Iterable[str] = TERMINALS,
        waiting: Iterable[str] = (),
        initial: str = START,
        handlers: Mapping[str, Handler] | None = None,
        budgets: Iterable[Budget] = CORE_BUDGETS,
        guards: Mapping[str, Guard] | None = None,
        extensions: Sequence[Extension] = (),
        name: str = "agent",
    ) -> None:
        self.name = name
        self.extensions: tuple[Extension, ...] = tuple(extensions)
        self.budgets: dict[str, Budget] = registry(budgets)
        self.guards: dict[str, Guard] = {**GUARDS, **(guards or {})}
        self.rows: tuple[Row, ...] = tuple(_resolve(row, self.guards) for row in rows)
        if states is None:  # the states the rows name, in Stage order, then any others
            named = {end for row in self.rows for end in (row.source, row.dest)} | set(terminals)
            states = [s for s in Stage if s in named] + sorted(named - set(Stage))
        self.states: tuple[str, ...] = tuple(dict.fromkeys(str(s) for s in states))
        self.terminals: frozenset[str] = frozenset(str(s) for s in terminals)
        self.waiting: frozenset[str] = frozenset(str(s) for s in waiting) & set(self.states)
        self.stops: frozenset[str] = self.terminals | self.waiting
        """Where a run driven to its end stops: a terminal or a waiting state."""
        """States where the runner pauses a run until it is resumed."""
        self.initial = str(initial)
        self.handlers: dict[str, Handler] = dict(handlers or {})
        _check_table(self)
        self.machine = Machine(
            model=None,
            states=list(self.states),
            initial=self.initial,
            auto_transitions=False,
            send_event=False,
            queued=False,
            ignore_invalid_triggers=False,
        )
        for row in self.rows:
            self.machine.add_transition(TRIGGER, row.source, row.dest, conditions=list(row.guards))
        self._compiled = self._compile()
        self.choosers: dict[str, Callable[[RunState], Row]] = {
            state: compile_chooser(state, entries, self.rows_from, self.budgets)
            for state, entries in self._compiled.items()
        }
        """For each state, :meth:`choose` for that state as one function (what the runner calls)."""
        self._hooks: dict[str, tuple[Callable[..., Any], ...]] = {}
        self.hook_sets: Mapping[str, tuple[Callable[..., Any], ...]] = {hook: self.hooks(hook) for hook in HOOKS}
        """:meth:`hooks` of every hook an :class:`Extension` has, found once when the machine is
        built (a run reads them without a call: ``machine.hook_sets["finish"]``)."""
        self.resets: dict[str, tuple[str, ...]] = {
            b.name: tuple(p.name for p in self.budgets.values() if p.scope == "pass" and p.cycle)
            for b in self.budgets.values()
            if b.cycle and b.scope != "pass"
        }
        """The pass budgets whose charges a charge of each run-wide cycle budget starts again (see :meth:`charge`)."""
        self.features: frozenset[str] = frozenset(e.name for e in self.extensions)

    def _compile(self) -> dict[str, tuple[tuple[Row, tuple[Guard, ...], Budget | None], ...]]:
        """For each state, its rows paired with the guard functions of the machine's own
        transition objects (in the machine's order) and the budget that bounds the row."""
        event = self.machine.events[TRIGGER]
        compiled: dict[str, tuple[tuple[Row, tuple[Guard, ...], Budget | None], ...]] = {}
        for state in self.states:
            rows = [r for r in self.rows if r.source == state]
            transitions = event.transitions.get(state, [])
            entries = []
            for row, tr in zip(rows, transitions, strict=True):
                assert tr.dest == row.dest
                guards = tuple(cast(Guard, c.func) for c in tr.conditions)
                entries.append((row, guards, self.budgets[row.bounded_by] if row.bounded_by else None))
            compiled[state] = tuple(entries)
        return compiled

    def rows_from(self, state: str) -> tuple[Row, ...]:
        return tuple(entry[0] for entry in self._compiled.get(state, ()))

    def choose(self, state: str, rs: RunState) -> Row:
        """The first row out of ``state`` whose budget has room and whose guards all hold
        (a bounded row whose budget is spent does not fire, whatever its guards say)."""
        return self.choosers[state](rs)

    def has_room(self, row: Row, rs: RunState) -> bool:
        """Whether the engine lets ``row`` fire: its budget (if it is bounded) is not spent."""
        return row.bounded_by is None or not self.budgets[row.bounded_by].charged_out(rs)

    def charge(self, row: Row, rs: RunState) -> None:
        """Charge a bounded row's traversal to its budget (the engine calls this, and only it)."""
        name = row.bounded_by
        if name is None:
            return
        charges = rs.charges
        charges[name] = charges.get(name, 0) + 1
        for reset in self.resets.get(name, ()):
            charges[reset] = 0

    def spent_budget(self, row: Row, rs: RunState) -> Budget | None:
        """Which budget ran out when ``row`` was taken: among the rows tried before it, the
        budget of the first one whose first failing guard tests a budget, or whose own budget
        is spent while its guards all hold. A row that did not fire for another reason (its
        other guards said no: ``decide -> observe`` when no observation was due) names none,
        even if its own budget is spent. Failing that, the budget a guard of ``row`` itself says
        is spent (``reason -> salvage if request_over_token_budget``: the token budget)."""
        for earlier, guards, budget in self._compiled[row.source]:
            if earlier is row:
                spent = next((name for g in guards if (name := budget_spent_by(g)) in self.budgets), None)
                return self.budgets[spent] if spent is not None else None
            failing = next((g for g in guards if not g(rs)), None)
            if failing is None:
                if budget is not None and budget.charged_out(rs):
                    return budget
                continue
            name = budget_of(failing)
            if name is not None and name in self.budgets:
                return self.budgets[name]
        return None

    def choose_via_trigger(self, state: str, rs: RunState) -> str:
        """The destination the full ``transitions`` trigger picks (slow; for tests). The
        engine's charge check is not part of ``transitions``: it agrees with :meth:`choose` on
        states whose bounded rows have room (:meth:`has_room`)."""
        cursor = _Cursor()
        self.machine.add_model(cursor, initial=str(state))  # a plain name: transitions reads Enums by .name
        try:
            if not self.machine.events[TRIGGER].trigger(cursor, rs):
                raise NoTransitionError(f"no row out of state {state!r} matched")
            return str(cursor.state)
        finally:
            self.machine.remove_model(cursor)

    def rejected_before(self, row: Row) -> tuple[Row, ...]:
        """The rows out of ``row.source`` tried before ``row`` (their guards said no)."""
        rows = self.rows_from(row.source)
        return rows[: rows.index(row)]

    def hooks(self, name: str) -> tuple[Callable[..., Any], ...]:
        """The extensions' hooks called ``name``, in extension order (found once per machine)."""
        found = self._hooks.get(name)
        if found is None:
            found = self._hooks[name] = tuple(hook for e in self.extensions if (hook := getattr(e, name)) is not None)
        return found

    def __repr__(self) -> str:
        return f"LoopMachine({self.name!r}, {len(self.states)} states, {len(self.rows)} rows)"


HOOKS = ("request", "response", "gate", "hold", "pause", "resume", "finish", "retry")
"""The hooks of an :class:`Extension` (its fields of that name)."""


class _Cursor:
    """A throwaway ``transitions`` model with identity equality."""

    state: str


def _resolve(row: Row, known: Mapping[str, Guard]) -> Row:
    """``row`` with guard names replaced by the functions they name (MachineError if unknown)."""
    if all(not isinstance(g, str) for g in row.guards):
        return row
    guards = tuple(resolve_guard(g, known, f"row {row}") for g in row.guards)
    return Row(row.source, row.dest, guards, row.bounded_by, row.outcome, row.records_limit, row.origin)


def _check_table(m: LoopMachine) -> None:
    """The structural rules (:func:`loopwright.table.rules.structural`: fallbacks and names), and
    what only a machine that runs needs: an outcome on every row into a terminal, and a cap
    for every budget that may bound a row."""
    table = Table.of(
        m.rows,
        states=m.states,
        terminals=m.terminals,
        initial=m.initial,
        budgets=[b.name for b in m.budgets.values() if b.cycle],
        guards=m.guards,
    )
    problems = [v.message for v in structural(table)]
    problems += [
        f"row {row} enters terminal {row.dest!r} but says no outcome; give it outcome='final', 'salvaged', "
        "'limit', 'failed' or 'cancelled'"
        for row in m.rows
        if row.dest in m.terminals and row.outcome is None
    ]
    problems += [
        f"budget {b.name!r} may bound rows but has no cap: give it limit=N (Limits has no field of that name)"
        for b in m.budgets.values()
        if b.cycle and b.name not in _LIMIT_FIELDS and b.limit is None
    ]
    if problems:
        raise MachineError(f"machine {m.name!r}: " + "; ".join(problems))


_LIMIT_FIELDS = frozenset(Limits.model_fields)


# ------------------------------------------------------------------ composition


def _states(base: LoopMachine, table: Sequence[Row], ext: Extension) -> list[str]:
    taken = [s for s in ext.states if s in base.states]
    if taken:
        raise MachineError(
            f"extension {ext.name!r}: {taken} {'is' if len(taken) == 1 else 'are'} already in machine {base.name!r}; "
            "states= adds new states (pick another name)"
        )
    terminals = base.terminals
    order = [s for s in base.states if s not in terminals]
    named = [end for r in table for end in (r.source, r.dest)]
    order += [s for s in dict.fromkeys([*ext.states, *named]) if s not in order and s not in terminals]
    return order + [s for s in base.states if s in terminals]


def extend_machine(base: LoopMachine, ext: Extension, *, name: str | None = None) -> LoopMachine:
    """``base`` with ``ext`` composed onto it (not cached; :func:`compose` caches)."""
    if any(e.name == ext.name for e in base.extensions):
        raise MachineError(f"machine {base.name!r} already has an extension named {ext.name!r}")
    for b in ext.budgets:
        if not isinstance(b, Budget):
            raise MachineError(f"extension {ext.name!r}: budgets must be Budget values, got {b!r}")
    table = apply_changes(list(base.rows), ext, base.extensions)
    return LoopMachine(
        table,
        states=_states(base, table, ext),
        terminals=base.terminals,
        waiting=base.waiting | ext.waiting,
        initial=base.initial,
        handlers={**base.handlers, **ext.states},
        budgets=[*base.budgets.values(), *ext.budgets],
        guards={**base.guards, **ext.guards},
        extensions=(*base.extensions, ext),
        name=name or (f"{base.name}+{ext.name}" if base.extensions else ext.name),
    )


CORE = LoopMachine(CORE_ROWS, name="agent")
"""The plain agent's machine: the core loop and nothing else."""

_COMPOSED: dict[tuple[int, ...], tuple[tuple[Extension, ...], LoopMachine]] = {(): ((), CORE)}


def compose(*extensions: Extension) -> LoopMachine:
    """The core with ``extensions`` composed onto it, in order (cached per extension set, so
    every agent with the same features shares one machine)."""
    key = tuple(id(e) for e in extensions)
    hit = _COMPOSED.get(key)
    if hit is not None:
        return hit[1]
    machine = CORE
    for ext in extensions:
        machine = extend_machine(machine, ext)
    _COMPOSED[key] = (tuple(extensions), machine)  # the extensions are kept so their ids stay theirs
    return machine
