"""The transition table, and the machine built from it.

The table is the diagram: each row is ``source -> dest if all guards hold``. Rows out of one
state are tried in order and the first whose guards all hold wins; every working state ends in
a fallback row (no guards). Rows that close a cycle are *bounded*: they name the budget whose
counter guards them, so every run ends by construction.

::

    start       -> preprocess
    preprocess  -> cancelled    if cancel_requested
    preprocess  -> failed       if has_error
    preprocess  -> reason
    reason      -> cancelled    if cancel_requested
    reason      -> postprocess  if has_response
    reason      -> decide       if deadline_passed
    reason      -> reason       if has_retryable_model_error & retries_left   [bounded: max_model_retries]
    reason      -> failed
    postprocess -> cancelled    if cancel_requested
    postprocess -> act          if has_tool_calls
    postprocess -> decide
    act         -> cancelled    if cancel_requested
    act         -> decide
    decide      -> cancelled    if cancel_requested
    decide      -> suspended    if has_pending_requests & within_suspension_budget
                                                                  [bounded: max_suspensions] (waiting)
    decide      -> done         if is_final_response
    decide      -> transfer     if transfer_requested & within_transfer_budget & not_ping_pong
                                   & within_{iteration,tool_call,token,time}_budget
                                                                  [bounded: max_transfers]  (multi-agent)
    decide      -> preprocess   if no_transfer_requested & within_{iteration,tool_call,token,time}_budget
                                                                  [bounded: max_iterations]
    decide      -> salvage      if salvage_allowed
    decide      -> done
    salvage     -> cancelled    if cancel_requested
    salvage     -> done
    transfer    -> cancelled    if cancel_requested                                      (multi-agent)
    transfer    -> preprocess                                                            (multi-agent)
    suspended   -> cancelled    if cancel_requested                                      (waiting)
    suspended   -> act          (the run was resumed: act settles the waiting calls)     (waiting)

Rows marked with a feature belong to the loop variants that have it: ``multi_agent`` (an
agent tree, with ``transfer``) and ``waiting`` (tools that wait for a confirmation, a
credential or a long-running result, with ``suspended``: a waiting state, where the runner
pauses until ``Runner.resume``). :data:`VARIANTS` holds the built-in machines; an agent gets
the one its definition needs (:func:`machine_for`).

One :class:`LoopMachine` is built per table (the built-in one is shared by every agent that does
not extend it) and serves all concurrent runs: runs are never registered as ``transitions``
models. The machine is a real ``transitions.Machine`` built from the rows; :meth:`choose`
walks that machine's own transition objects in order and calls their condition functions
directly, which is what ``trigger`` would do, without its per-call event bookkeeping
(:meth:`choose_via_trigger` does the full trigger, and tests check both always agree).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from transitions import Machine

from .agent import Agent
from .errors import MachineError, NoTransitionError
from .guards import (
    cancel_requested,
    deadline_passed,
    has_error,
    has_pending_requests,
    has_response,
    has_retryable_model_error,
    has_tool_calls,
    is_final_response,
    no_transfer_requested,
    not_ping_pong,
    retries_left,
    salvage_allowed,
    transfer_requested,
    within_iteration_budget,
    within_suspension_budget,
    within_time_budget,
    within_token_budget,
    within_tool_call_budget,
    within_transfer_budget,
)
from .limits import Limits
from .run_state import RunState
from .stage import TERMINALS, WAITING, Stage

Guard = Callable[[RunState], bool]
TRIGGER = "advance"
_BUDGETS = frozenset(Limits.model_fields)


@dataclass(frozen=True, slots=True)
class Row:
    """One edge: ``source -> dest`` when every guard holds. ``bounded_by`` names the budget
    whose counter bounds how often this edge can be taken (required on cycle-closing edges)."""

    source: str
    dest: str
    guards: tuple[Guard, ...] = ()
    bounded_by: str | None = None
    feature: str | None = None
    """The loop variant feature this row belongs to (None: every variant)."""
    label: str = field(init=False, compare=False, repr=False)
    """How the row reads in logs and diagrams: its guards joined by ``&``, or ``else``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", str(self.source))
        object.__setattr__(self, "dest", str(self.dest))
        object.__setattr__(self, "guards", tuple(self.guards))
        object.__setattr__(self, "label", " & ".join(self.guard_names) if self.guards else "else")

    @property
    def guard_names(self) -> tuple[str, ...]:
        return tuple(getattr(g, "__name__", repr(g)) for g in self.guards)

    @property
    def is_fallback(self) -> bool:
        return not self.guards

    def __str__(self) -> str:
        bound = f" [bounded: {self.bounded_by}]" if self.bounded_by else ""
        return f"{self.source} -> {self.dest} ({self.label}){bound}"


def cancellable(stage: str, feature: str | None = None) -> Row:
    """The first row out of each working stage: a cancelled run goes to ``cancelled``."""
    return Row(stage, Stage.CANCELLED, (cancel_requested,), feature=feature)


START, PRE, REASON, POST, ACT, DECIDE, SALVAGE, TRANSFER = (
    Stage.START,
    Stage.PREPROCESS,
    Stage.REASON,
    Stage.POSTPROCESS,
    Stage.ACT,
    Stage.DECIDE,
    Stage.SALVAGE,
    Stage.TRANSFER,
)
MULTI = "multi_agent"
WAIT = "waiting"
SUSPENDED = Stage.SUSPENDED
DONE, FAILED, CANCELLED = Stage.DONE, Stage.FAILED, Stage.CANCELLED

WITHIN_BUDGETS: tuple[Guard, ...] = (
    within_iteration_budget,
    within_tool_call_budget,
    within_token_budget,
    within_time_budget,
)
"""Every budget has room: both ways back into the loop (go round, hand over) require it."""

# fmt: off
TABLE: tuple[Row, ...] = (
    Row(START,    PRE),
    cancellable(PRE),
    Row(PRE,      FAILED,    (has_error,)),
    Row(PRE,      REASON),
    cancellable(REASON),
    Row(REASON,   POST,      (has_response,)),
    Row(REASON,   DECIDE,    (deadline_passed,)),
    Row(REASON,   REASON,    (has_retryable_model_error, retries_left), bounded_by="max_model_retries"),
    Row(REASON,   FAILED),
    cancellable(POST),
    Row(POST,     ACT,       (has_tool_calls,)),
    Row(POST,     DECIDE),
    cancellable(ACT),
    Row(ACT,      DECIDE),
    cancellable(DECIDE),
    Row(DECIDE,   SUSPENDED, (has_pending_requests, within_suspension_budget),
        bounded_by="max_suspensions", feature=WAIT),
    Row(DECIDE,   DONE,      (is_final_response,)),
    Row(DECIDE,   TRANSFER,  (transfer_requested, within_transfer_budget, not_ping_pong, *WITHIN_BUDGETS),
        bounded_by="max_transfers", feature=MULTI),
    Row(DECIDE,   PRE,       (no_transfer_requested, *WITHIN_BUDGETS), bounded_by="max_iterations"),
    Row(DECIDE,   SALVAGE,   (salvage_allowed,)),
    Row(DECIDE,   DONE),
    cancellable(SALVAGE),
    Row(SALVAGE,  DONE),
    cancellable(TRANSFER, MULTI),
    Row(TRANSFER, PRE,       feature=MULTI),
    cancellable(SUSPENDED, WAIT),
    Row(SUSPENDED, ACT,      feature=WAIT),
)
"""Every row of the built-in loop, in the order the machine tries them."""
# fmt: on


def rows_for(*features: str) -> tuple[Row, ...]:
    """The rows of the variant with ``features`` (rows of no feature are in every variant)."""
    return tuple(r for r in TABLE if r.feature is None or r.feature in features)


class LoopMachine:
    """A checked transition table and the ``transitions.Machine`` built from it.

    ``handlers`` supplies the stage handlers of states the built-in stages do not cover (an
    extension's own states); the runner checks every working state has one.
    """

    def __init__(
        self,
        rows: Sequence[Row] = TABLE,
        *,
        states: Iterable[str] | None = None,
        terminals: Iterable[str] = TERMINALS,
        waiting: Iterable[str] = WAITING,
        initial: str = START,
        handlers: Mapping[str, Callable[..., Any]] | None = None,
        name: str = "agent",
    ) -> None:
        self.name = name
        self.rows: tuple[Row, ...] = tuple(rows)
        if states is None:  # the states the rows name, in Stage order, then any others
            named = {end for row in self.rows for end in (row.source, row.dest)} | set(terminals)
            states = [s for s in Stage if s in named] + sorted(named - set(Stage))
        self.states: tuple[str, ...] = tuple(dict.fromkeys(str(s) for s in states))
        self.terminals: frozenset[str] = frozenset(str(s) for s in terminals)
        self.waiting: frozenset[str] = frozenset(str(s) for s in waiting) & set(self.states)
        """States where the runner pauses a run until it is resumed."""
        self.initial = str(initial)
        self.handlers: dict[str, Callable[..., Any]] = dict(handlers or {})
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

    def _compile(self) -> dict[str, tuple[tuple[Row, tuple[Guard, ...]], ...]]:
        """For each state, its rows paired with the guard functions of the machine's own
        transition objects, in the machine's order."""
        event = self.machine.events[TRIGGER]
        compiled: dict[str, tuple[tuple[Row, tuple[Guard, ...]], ...]] = {}
        for state in self.states:
            rows = [r for r in self.rows if r.source == state]
            transitions = event.transitions.get(state, [])
            pairs: list[tuple[Row, tuple[Guard, ...]]] = []
            for row, tr in zip(rows, transitions, strict=True):
                assert tr.dest == row.dest
                # the condition functions are the Row's own guards, handed to transitions as given
                pairs.append((row, tuple(cast(Guard, c.func) for c in tr.conditions)))
            compiled[state] = tuple(pairs)
        return compiled

    def rows_from(self, state: str) -> tuple[Row, ...]:
        return tuple(row for row, _ in self._compiled.get(state, ()))

    def choose(self, state: str, rs: RunState) -> Row:
        """The first row out of ``state`` whose guards all hold for ``rs``."""
        for row, guards in self._compiled[state]:
            for guard in guards:
                if not guard(rs):
                    break
            else:
                return row
        tried = "; ".join(str(r) for r in self.rows_from(state)) or "none"
        raise NoTransitionError(
            f"no row out of state {state!r} matched (rows tried: {tried}); every working state "
            "must end in a fallback row with no guards"
        )

    def choose_via_trigger(self, state: str, rs: RunState) -> str:
        """The destination the full ``transitions`` trigger picks (slow; for tests)."""
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

    def __repr__(self) -> str:
        return f"LoopMachine({self.name!r}, {len(self.states)} states, {len(self.rows)} rows)"


class _Cursor:
    """A throwaway ``transitions`` model with identity equality."""

    state: str


def _check_table(m: LoopMachine) -> None:
    known = set(m.states)
    if m.initial not in known:
        raise MachineError(f"initial state {m.initial!r} is not among the states {sorted(known)}")
    if not m.terminals <= known:
        raise MachineError(f"terminal states {sorted(m.terminals - known)} are not among the states; add them")
    by_source: dict[str, list[Row]] = {}
    for row in m.rows:
        for end in (row.source, row.dest):
            if end not in known:
                raise MachineError(f"row {row} names state {end!r}, which is not a state; add it to states=")
        if row.source in m.terminals:
            raise MachineError(f"row {row} leaves terminal state {row.source!r}; a terminal has no outgoing rows")
        for guard in row.guards:
            if not callable(guard) or getattr(guard, "__name__", "<lambda>") == "<lambda>":
                raise MachineError(
                    f"row {row.source} -> {row.dest} has guard {guard!r}: guards are named functions "
                    "(def has_x(rs) -> bool) so logs and diagrams can name them"
                )
        if row.bounded_by is not None and row.bounded_by not in _BUDGETS:
            raise MachineError(
                f"row {row} is bounded by {row.bounded_by!r}, which is not a budget; use one of {sorted(_BUDGETS)}"
            )
        by_source.setdefault(row.source, []).append(row)
    for state in m.states:
        if state in m.terminals:
            continue
        rows = by_source.get(state)
        if not rows:
            raise MachineError(f"working state {state!r} has no outgoing rows; add a fallback row {state} -> ...")
        fallbacks = [i for i, r in enumerate(rows) if r.is_fallback]
        if not fallbacks or fallbacks[0] != len(rows) - 1:
            where = "has none" if not fallbacks else f"has one at position {fallbacks[0] + 1} of {len(rows)}"
            raise MachineError(
                f"state {state!r} must end in exactly one fallback row (a row with no guards) and it "
                f"{where}; rows after a fallback can never fire, and without one a run can get stuck"
            )


class RowCoverage:
    """Counts the rows runs take, per machine, while ``enabled`` (off by default: the runner
    pays one attribute check per transition)."""

    def __init__(self) -> None:
        self.enabled = False
        self.taken: Counter[tuple[int, Row]] = Counter()
        self.machines: dict[int, LoopMachine] = {}

    def reset(self) -> None:
        self.taken.clear()
        self.machines.clear()

    def hit(self, machine: LoopMachine, row: Row) -> None:
        self.machines[id(machine)] = machine
        self.taken[(id(machine), row)] += 1

    def missing(self, machine: LoopMachine) -> list[Row]:
        return [r for r in machine.rows if (id(machine), r) not in self.taken]


coverage = RowCoverage()
DEFAULT_MACHINE = LoopMachine(rows_for(), name="agent")
"""The plain loop, shared by every single agent that does not bring its own machine."""
MULTI_AGENT_MACHINE = LoopMachine(rows_for(MULTI), name="multi_agent")
"""The loop of an agent tree: adds the ``transfer`` state."""
WAITING_MACHINE = LoopMachine(rows_for(WAIT), name="waiting")
"""The loop of an agent whose tools may wait: adds the ``suspended`` state."""
MULTI_AGENT_WAITING_MACHINE = LoopMachine(rows_for(MULTI, WAIT), name="multi_agent_waiting")
VARIANTS: dict[str, LoopMachine] = {
    m.name: m for m in (DEFAULT_MACHINE, MULTI_AGENT_MACHINE, WAITING_MACHINE, MULTI_AGENT_WAITING_MACHINE)
}


def machine_for(agent: Agent) -> LoopMachine:
    """The machine an agent runs on: its own, or the built-in variant its definition needs."""
    if agent.machine is not None:
        return agent.machine
    tree = list(agent.root.walk())
    multi = any(a.sub_agents for a in tree)
    waits = any(t.can_wait for a in tree for t in a.tools.values())
    if multi and waits:
        return MULTI_AGENT_WAITING_MACHINE
    return MULTI_AGENT_MACHINE if multi else WAITING_MACHINE if waits else DEFAULT_MACHINE
