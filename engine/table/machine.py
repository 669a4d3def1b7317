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
    reason      -> salvage      if request_over_token_budget & salvage_allowed  (the request was not sent)
    reason      -> done         if request_over_token_budget              => limit
    reason      -> failed                                                 => failed
    postprocess -> cancelled    if cancel_requested                       => cancelled
    postprocess -> act          if has_tool_calls
    postprocess -> decide
    act         -> cancelled    if cancel_requested                       => cancelled
    act         -> decide
    decide      -> cancelled    if cancel_requested                       => cancelled
    decide      -> done         if is_final_response                      => final
    decide      -> preprocess   if within_{iteration,tool_call,token,time}_budget  [bounded: max_iterations]
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
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

from transitions import Machine

from ..data.errors import MachineError, NoTransitionError
from ..data.events import ModelRequest, ModelResponse, Outcome, ToolCall
from ..data.limits import Limits
from ..data.run_state import RunState, register_slice
from ..data.stage import TERMINALS, Stage
from .budgets import CORE_BUDGETS, Budget, budget_of, budget_spent_by, registry
from .guards import (
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
from .rules import Table, resolve_guard, structural

if TYPE_CHECKING:
    from ..runtime.context import RunContext

Guard = Callable[[RunState], bool]
GuardRef = Guard | str
Handler = Callable[[RunState, "RunContext"], Awaitable[None] | None]
"""A stage's work: ``async def`` (awaited), or a plain ``def`` for a stage that never waits (it
may still return an awaitable for the runner to await when, this time, it must wait)."""
TRIGGER = "advance"
DEFAULT_OUTCOMES: dict[str, Outcome] = {Stage.DONE: "final", Stage.CANCELLED: "cancelled", Stage.FAILED: "failed"}
"""The outcome of a row into a core terminal that says none."""


@dataclass(frozen=True, slots=True)
class Row:
    """One edge: ``source -> dest`` when every guard holds.

    ``guards`` are functions ``(RunState) -> bool`` or, in a row a user writes, their names
    (resolved when the machine is built). ``bounded_by`` names the budget this row is charged
    to (required on cycle-closing rows). ``outcome`` is the run's outcome when this row enters a
    terminal (rows into ``done``, ``cancelled``, ``failed`` default to ``final``,
    ``cancelled``, ``failed``). ``records_limit``: taking
    this row means a budget ran out, and the engine records which (the budget of the first
    bounded row out of ``source`` that could not fire)."""

    source: str
    dest: str
    guards: tuple[GuardRef, ...] = ()
    bounded_by: str | None = None
    outcome: Outcome | None = None
    records_limit: bool = False
    origin: str = field(default="core", compare=False)
    """The extension that added the row (``core`` for the core's own)."""
    label: str = field(init=False, compare=False, repr=False)
    """How the row reads in logs and diagrams: its guards joined by ``&``, or ``else``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", str(self.source))
        object.__setattr__(self, "dest", str(self.dest))
        object.__setattr__(self, "guards", tuple(self.guards))
        if self.outcome is None and self.dest in DEFAULT_OUTCOMES:
            object.__setattr__(self, "outcome", DEFAULT_OUTCOMES[self.dest])
        object.__setattr__(self, "label", " & ".join(self.guard_names) if self.guards else "else")

    @property
    def guard_names(self) -> tuple[str, ...]:
        return tuple(g if isinstance(g, str) else getattr(g, "__name__", repr(g)) for g in self.guards)

    @property
    def is_fallback(self) -> bool:
        return not self.guards and self.bounded_by is None

    def __str__(self) -> str:
        bound = f" [bounded: {self.bounded_by}]" if self.bounded_by else ""
        return f"{self.source} -> {self.dest} ({self.label}){bound}"


def Rule(
    source: str, dest: str, *guards: GuardRef, bounded_by: str | None = None, outcome: Outcome | None = None
) -> Row:
    """A row written the short way: ``Rule("review", "act", "has_tool_calls")``."""
    return Row(source, dest, guards, bounded_by, outcome)


def cancellable(stage: str) -> Row:
    """The first row out of each working stage: a cancelled run goes to ``cancelled``."""
    return Row(stage, Stage.CANCELLED, (cancel_requested,))


START, PRE, REASON, POST, ACT, DECIDE, SALVAGE = (
    Stage.START,
    Stage.PREPROCESS,
    Stage.REASON,
    Stage.POSTPROCESS,
    Stage.ACT,
    Stage.DECIDE,
    Stage.SALVAGE,
)
DONE, FAILED, CANCELLED = Stage.DONE, Stage.FAILED, Stage.CANCELLED

WITHIN_BUDGETS: tuple[Guard, ...] = (
    within_iteration_budget,
    within_tool_call_budget,
    within_token_budget,
    within_time_budget,
)
"""Every budget has room: every way back into the loop (go round, hand over) requires it."""


def detour(state: str, guards: tuple[GuardRef, ...], budget: str) -> dict[str, Any]:
    """An :class:`Extension`'s rows for a bounded side trip from decide: ``decide -> state``
    (tried before decide's loop back to preprocess, with the same budgets, then ``guards``),
    then ``state -> preprocess``; ``budget`` bounds the trip. Use as ``Extension(...,
    **detour(...))``."""
    return {
        "rows_before": {(DECIDE, PRE): [Row(DECIDE, state, (*WITHIN_BUDGETS, *guards), bounded_by=budget)]},
        "rows": [cancellable(state), Row(state, PRE)],
    }


# fmt: off
CORE_ROWS: tuple[Row, ...] = (
    Row(START,    PRE),
    cancellable(PRE),
    Row(PRE,      FAILED,    (has_error,)),
    Row(PRE,      REASON),
    cancellable(REASON),
    Row(REASON,   POST,      (has_response,)),
    Row(REASON,   DECIDE,    (deadline_passed,)),
    Row(REASON,   REASON,    (has_retryable_model_error, retries_left), bounded_by="max_model_retries"),
    Row(REASON,   SALVAGE,   (request_over_token_budget, salvage_allowed), records_limit=True),
    Row(REASON,   DONE,      (request_over_token_budget,), outcome="limit", records_limit=True),
    Row(REASON,   FAILED),
    cancellable(POST),
    Row(POST,     ACT,       (has_tool_calls,)),
    Row(POST,     DECIDE),
    cancellable(ACT),
    Row(ACT,      DECIDE),
    cancellable(DECIDE),
    Row(DECIDE,   DONE,      (is_final_response,), outcome="final"),
    Row(DECIDE,   PRE,       WITHIN_BUDGETS, bounded_by="max_iterations"),
    Row(DECIDE,   SALVAGE,   (salvage_allowed,), records_limit=True),
    Row(DECIDE,   DONE,      outcome="limit", records_limit=True),
    cancellable(SALVAGE),
    Row(SALVAGE,  DONE,      (has_response,), outcome="salvaged"),
    Row(SALVAGE,  DONE,      outcome="limit", records_limit=True),
)
"""Every row of the core loop, in the order the machine tries them."""
# fmt: on


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

    Hooks (each optional, one signature, called in extension order):

    - ``request(request, rs, ctx) -> ModelRequest``: preprocess hands each pass's request
      through it (structlog-style processors);
    - ``response(response, rs, ctx) -> ModelResponse``: postprocess hands each reply through
      it before taking it in (Plan-ReAct splits tagged text into thoughts and the answer);
    - ``gate(call, rs, ctx) -> ToolResult | PendingRequest | None``: act asks it before it runs
      a call: a result answers the call, a request makes it wait, None lets it run;
    - ``hold(rs, ctx, calls, results, waits) -> bool``: act has calls that wait; True means the
      feature keeps the step (act answers nothing yet); else act answers them with an error;
    - ``pause(rs, ctx)``: the runner is pausing the run in one of ``waiting``;
    - ``resume(rs, ctx, decisions)``: ``Runner.resume`` hands over decisions (raise
      ResumeError to refuse them, changing nothing);
    - ``finish(rs, ctx, why)``: the run is ending: answer any calls the feature holds.
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
    request: Callable[[ModelRequest, RunState, RunContext], ModelRequest] | None = None
    response: Callable[[ModelResponse, RunState, RunContext], ModelResponse] | None = None
    gate: Callable[[ToolCall, RunState, RunContext], Any] | None = None
    hold: Callable[..., str | None] | None = None
    pause: Callable[[RunState, RunContext], None] | None = None
    resume: Callable[[RunState, RunContext, Mapping[str, Any]], None] | None = None
    finish: Callable[[RunState, RunContext, str], None] | None = None

    def __post_init__(self) -> None:
        if self.slice is not None:
            register_slice(self.name, self.slice)

    def __repr__(self) -> str:
        return f"Extension({self.name!r})"


def raised(rs: RunState) -> bool:
    """The engine's abort edge: a stage or a guard raised (never chosen by the table; the
    engine takes it itself, and it is in no table)."""
    return False


_ABORT_ROWS: dict[str, Row] = {}


def abort_row(state: str) -> Row:
    """``state -> failed (raised)``: the row the engine takes when a stage or guard raises."""
    row = _ABORT_ROWS.get(state)
    if row is None:
        row = _ABORT_ROWS[state] = Row(state, FAILED, (raised,), outcome="failed", origin="engine")
    return row


_ONE_ATTRIBUTE: dict[Guard, Guard] = {
    cancel_requested: attrgetter("cancel_requested"),
    deadline_passed: attrgetter("deadline_hit"),
    has_error: attrgetter("error"),  # an ErrorInfo, a ModelResponse: pydantic models, always true
    has_response: attrgetter("response"),
}


def _fast(guard: Guard) -> Guard:
    """The core guards that return one attribute of the run state, as a C attrgetter (no
    Python frame: ``cancel_requested`` is tested at every transition); others as they are."""
    return _ONE_ATTRIBUTE.get(guard, guard)


def _chooser(
    state: str,
    entries: tuple[tuple[Row, tuple[Guard, ...], Budget | None], ...],
    rows_from: Callable[[str], tuple[Row, ...]],
) -> Callable[[RunState], Row]:
    """``choose`` for one state, compiled: its rows in order, each one ``if`` of its budget's
    room and its guards, written out as one function (no loop over rows and guards, no
    tuples unpacked: it runs at every transition). For ``decide`` of the plain loop::

        def choose_decide(rs):
            if g0_0(rs): return r0                      # decide -> cancelled if cancel_requested
            if not spent1(rs) and g1_0(rs) and ...: return r1
            ...
            return r4                                   # the fallback: no guards, no budget

    A state without a fallback that no row matches raises NoTransitionError."""
    names: dict[str, Any] = {}
    lines = ["def choose(rs):"]
    fallback = False
    for i, (row, guards, budget) in enumerate(entries):
        names[f"r{i}"] = row
        tests = []
        if budget is not None:
            names[f"spent{i}"] = budget.spent
            tests.append(f"not spent{i}(rs)")
        for j, guard in enumerate(guards):
            names[f"g{i}_{j}"] = guard
            tests.append(f"g{i}_{j}(rs)")
        if not tests:
            lines.append(f"    return r{i}")
            fallback = True
            break
        lines.append(f"    if {' and '.join(tests)}: return r{i}")
    if not fallback:

        def unmatched(rs: RunState) -> Row:
            tried = "; ".join(str(r) for r in rows_from(state)) or "none"
            raise NoTransitionError(
                f"no row out of state {state!r} matched (rows tried: {tried}); every working state "
                "must end in a fallback row with no guards"
            )

        names["unmatched"] = unmatched
        lines.append("    return unmatched(rs)")
    exec("\n".join(lines), names)  # (the code is made here from the table: names only, no values)
    chooser: Callable[[RunState], Row] = names["choose"]
    chooser.__name__ = chooser.__qualname__ = f"choose_{state}"
    return chooser


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
            state: _chooser(state, entries, self.rows_from) for state, entries in self._compiled.items()
        }
        """For each state, :meth:`choose` for that state as one function (what the runner calls)."""
        self._hooks: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._resets: dict[str, tuple[str, ...]] = {
            b.name: tuple(p.name for p in self.budgets.values() if p.scope == "pass" and p.cycle)
            for b in self.budgets.values()
            if b.cycle and b.scope != "pass"
        }
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
                guards = tuple(_fast(cast(Guard, c.func)) for c in tr.conditions)
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
        for reset in self._resets.get(name, ()):
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
    """The structural rules (:func:`loopwright.rules.structural`: fallbacks and names), and
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


def _rows_out(table: Sequence[Row], source: str) -> str:
    out = [str(r) for r in table if r.source == source]
    return f"the rows out of {source!r} are: {'; '.join(out)}" if out else f"no row leaves {source!r}"


def _matching(table: list[Row], key: tuple[str, str], ext: Extension, op: str) -> list[int]:
    """Where the rows ``key`` = (source, dest) are; MachineError naming ``op`` (how the
    extension wrote it) when there is none."""
    hits = [i for i, r in enumerate(table) if (r.source, r.dest) == key]
    if not hits:
        raise MachineError(f"extension {ext.name!r}: {op} matches no row; {_rows_out(table, key[0])}")
    return hits


def _insert_before_fallback(table: list[Row], row: Row, ext: Extension) -> None:
    out = [i for i, r in enumerate(table) if r.source == row.source]
    if not out:
        table.append(row)
        return
    last = out[-1]
    if table[last].is_fallback and row.is_fallback:
        raise MachineError(
            f"extension {ext.name!r}: row {row} would be a second fallback of {row.source!r}, which already ends in "
            f"{table[last]}; remove=[({row.source!r}, {table[last].dest!r})] first to replace it"
        )
    table.insert(last if table[last].is_fallback else last + 1, row)


def _apply(table: list[Row], ext: Extension) -> list[Row]:
    """``table`` with ``ext``'s row changes applied (remove, redirect, require, rows_before, rows)."""
    for key in ext.remove:
        hits = set(_matching(table, key, ext, f"remove={key}"))
        table = [r for i, r in enumerate(table) if i not in hits]
    for key, new_dest in ext.redirect.items():
        for i in _matching(table, key, ext, f"redirect={{{key}: {new_dest!r}}}"):
            r = table[i]
            table[i] = Row(r.source, new_dest, r.guards, r.bounded_by, None, r.records_limit, ext.name)
    for key, guards in ext.require.items():
        for i in _matching(table, key, ext, f"require={{{key}: ...}}"):
            r = table[i]
            table[i] = Row(r.source, r.dest, (*guards, *r.guards), r.bounded_by, r.outcome, r.records_limit, r.origin)
    for key, rows in ext.rows_before.items():
        at = _matching(table, key, ext, f"rows_before={{{key}: ...}}")[0]
        table[at:at] = [_own(r, ext) for r in rows]
    for row in ext.rows:
        _insert_before_fallback(table, _own(row, ext), ext)
    return table


def _own(row: Row, ext: Extension) -> Row:
    return Row(row.source, row.dest, row.guards, row.bounded_by, row.outcome, row.records_limit, ext.name)


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
    table = _apply(list(base.rows), ext)
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
