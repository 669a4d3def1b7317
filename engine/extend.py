"""User-extensible machines: add your own states and rows to an agent's loop.

:func:`extend` takes a machine (the plain loop by default) and returns a new
:class:`~loopwright.machine.LoopMachine` with your states (each with its stage handler), rows
(:class:`Rule`: guards as functions, or as names resolved against :mod:`loopwright.guards` and
your ``guards``), existing rows redirected to a new state, and rows removed. Nothing is
subclassed; the result runs (``Agent(machine=...)``), draws (:func:`loopwright.diagram`) and
verifies (:func:`loopwright.verify`) like a built-in machine, and by default it is verified
when built: an extension that would let a run loop forever, get stuck or never end is refused
with the report.

The worked example, a guardrail between ``postprocess`` and ``act`` that vetoes tool calls::

    async def review(rs: RunState, ctx: RunContext) -> None:
        for call in rs.response.tool_calls if rs.response else ():
            if call.name in FORBIDDEN:
                veto(rs, call, "deleting accounts needs a human")

    reviewed = extend(
        name="reviewed",
        states={"review": review},
        redirect={("postprocess", "act"): "review"},   # postprocess -> review if has_tool_calls
        rows=[Rule("review", "cancelled", "cancel_requested"), Rule("review", "act")],
    )

A vetoed call still gets its answer: ``act`` answers it with an error result naming the reason,
in the model's call order in the same turn as the calls it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from .errors import MachineError
from .events import ToolCall
from .machine import DEFAULT_MACHINE, LoopMachine, Row
from .run_state import RunContext, RunState
from .verify import BUILTIN_GUARDS, Guard, GuardRef, describe_row, resolve_guard, verify

Handler: TypeAlias = Callable[[RunState, RunContext], Awaitable[None]]


class Rule:
    """A row to add: ``Rule("review", "act", "has_tool_calls", bounded_by=None)``. Guards are
    functions ``(RunState) -> bool`` or their names; a rule with no guards is its state's
    fallback. ``bounded_by`` names the budget whose guard bounds a cycle-closing rule."""

    __slots__ = ("bounded_by", "dest", "guards", "source")

    def __init__(self, source: str, dest: str, *guards: GuardRef, bounded_by: str | None = None) -> None:
        self.source = str(source)
        self.dest = str(dest)
        self.guards: tuple[GuardRef, ...] = guards
        self.bounded_by = bounded_by

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rule) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (self.source, self.dest, self.guards, self.bounded_by)

    def __repr__(self) -> str:
        return f"Rule({describe_row(self)})"

    def to_row(self, guards: Mapping[str, Guard] | None = None) -> Row:
        """The :class:`Row` this rule stands for (guard names resolved; MachineError when one
        is unknown)."""
        known = {**BUILTIN_GUARDS, **(guards or {})}
        where = f"rule {describe_row(self)}"
        return Row(self.source, self.dest, tuple(resolve_guard(g, known, where) for g in self.guards), self.bounded_by)


def extend(
    base: LoopMachine = DEFAULT_MACHINE,
    *,
    name: str,
    states: Mapping[str, Handler] | None = None,
    rows: Sequence[Row | Rule] = (),
    redirect: Mapping[tuple[str, str], str] | None = None,
    remove: Iterable[tuple[str, str]] = (),
    guards: Mapping[str, Guard] | None = None,
    check: bool = True,
) -> LoopMachine:
    """A new machine: ``base`` with these changes, applied in this order:

    - ``remove``: drop every row ``source -> dest`` for each ``(source, dest)``;
    - ``redirect``: ``{(source, dest): new_dest}`` sends those rows (guards and bound kept) to
      ``new_dest`` instead;
    - ``rows``: add rows. A row out of a state that already has rows goes just before that
      state's fallback (so the fallback stays last); rows out of new states keep your order;
    - ``states``: the new states, each with its handler ``async def h(rs, ctx) -> None``.

    ``guards`` lets rules name your own guard functions. With ``check`` (the default) the
    result must pass :func:`loopwright.verify`; otherwise MachineError carries the report.
    The ``act`` stage of the new machine honours :func:`veto`.
    """
    new_states = dict(states or {})
    taken = [s for s in new_states if s in base.states]
    if taken:
        raise MachineError(
            f"extension {name!r}: {taken} {'is' if len(taken) == 1 else 'are'} already in machine {base.name!r}; "
            "states= adds new states (pick another name)"
        )
    table = list(base.rows)
    for source, dest in remove:
        kept = [r for r in table if (r.source, r.dest) != (source, dest)]
        if len(kept) == len(table):
            raise MachineError(
                f"extension {name!r}: remove={(source, dest)} matches no row; {_rows_out(table, source)}"
            )
        table = kept
    for (source, dest), new_dest in (redirect or {}).items():
        hits = [i for i, r in enumerate(table) if (r.source, r.dest) == (source, dest)]
        if not hits:
            raise MachineError(
                f"extension {name!r}: redirect={{{(source, dest)}: {new_dest!r}}} matches no row; "
                f"{_rows_out(table, source)}"
            )
        for i in hits:
            r = table[i]
            table[i] = Row(r.source, new_dest, r.guards, r.bounded_by, r.feature)
    for item in rows:
        row = item.to_row(guards) if isinstance(item, Rule) else item
        out = [i for i, r in enumerate(table) if r.source == row.source]
        if not out:
            table.append(row)
            continue
        last = out[-1]
        if table[last].is_fallback and row.is_fallback:
            raise MachineError(
                f"extension {name!r}: row {row} would be a second fallback of {row.source!r}, which already ends in "
                f"{table[last]}; remove=[({row.source!r}, {table[last].dest!r})] first to replace it"
            )
        table.insert(last if table[last].is_fallback else last + 1, row)
    terminals = base.terminals
    order = [s for s in base.states if s not in terminals]
    named = [end for r in table for end in (r.source, r.dest)]
    order += [s for s in dict.fromkeys([*new_states, *named]) if s not in order and s not in terminals]
    order += [s for s in base.states if s in terminals]
    handlers: dict[str, Callable[..., Any]] = {**base.handlers, **new_states}
    waiting: dict[str, Any] = {"waiting": base.waiting} if hasattr(base, "waiting") else {}
    machine = LoopMachine(
        table, states=order, terminals=terminals, initial=base.initial, handlers=handlers, name=name, **waiting
    )
    if check:
        report = verify(machine)
        if not report.ok:
            raise MachineError(f"extension {name!r} breaks the loop's guarantees:\n{report}")
    return machine


def _rows_out(table: Sequence[Row], source: str) -> str:
    out = [str(r) for r in table if r.source == source]
    return f"the rows out of {source!r} are: {'; '.join(out)}" if out else f"no row leaves {source!r}"


# ------------------------------------------------------------------ vetoes


def veto(rs: RunState, call: ToolCall | str, reason: str) -> None:
    """Refuse one tool call of the latest reply (from a stage that runs before ``act``). The
    call is not run; ``act`` answers it with an error result ``tool 'x' was vetoed: reason``,
    in the model's call order with the step's other results. Plain data: it survives saving."""
    rs.vetoes[call if isinstance(call, str) else call.id] = reason
