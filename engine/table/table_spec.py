"""What the table rules read and report: a :class:`Table` of :class:`RowLike` rows, each broken
rule a :class:`Violation`, and how guards and rows are named in messages (and guard names
resolved to functions). Knows nothing of the engine above it, like :mod:`.rules`."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from ..data.errors import MachineError

GuardFn: TypeAlias = Callable[[Any], bool]
"""A guard function, ``(RunState) -> bool`` (this layer does not know RunState)."""
GuardRef: TypeAlias = "GuardFn | str"
"""A guard in a user table: the function, or its name."""
G = TypeVar("G", bound=Callable[..., bool])


class RowLike(Protocol):
    """What the rules read of a row: a :class:`~loopwright.extend.Row`, or a
    :class:`~loopwright.extend.Rule` whose guards may be names."""

    @property
    def source(self) -> str: ...
    @property
    def dest(self) -> str: ...
    @property
    def guards(self) -> tuple[GuardRef, ...]: ...
    @property
    def bounded_by(self) -> str | None: ...


RULES: dict[int, str] = {
    1: "every state is reachable from {initial}",
    2: "every working state can reach a terminal ({terminals})",
    3: "every cycle passes through a bounded edge, so every run terminates",
    4: "every working state ends in one fallback row, so no run gets stuck",
    5: "every state, guard and budget the table names exists",
    6: "calls held by act wait before the loop goes on",
}
"""Each rule's one-line title, as the report prints it."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``rule`` (1-5), a short ``kind``, the ``states`` and ``rows`` at fault,
    and a ``message`` that says what is wrong and what to do."""

    rule: int
    kind: str
    message: str
    states: tuple[str, ...] = ()
    rows: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """What the rules check: the ``rows`` in the order they are tried, the ``states`` (in
    report order), the ``terminals``, the ``initial`` state, the ``budgets`` a row may be
    bounded by, and the ``guards`` a row may name by string."""

    rows: tuple[RowLike, ...]
    states: tuple[str, ...]
    terminals: frozenset[str]
    initial: str
    budgets: frozenset[str]
    guards: Mapping[str, GuardFn] = field(default_factory=dict, hash=False)
    waiting: frozenset[str] = frozenset()
    """The states that pause a run until it is resumed (rule 6 applies when there are some)."""

    @classmethod
    def of(
        cls,
        rows: Iterable[RowLike],
        *,
        states: Iterable[str],
        terminals: Iterable[str],
        initial: str,
        budgets: Iterable[str],
        guards: Mapping[str, GuardFn] | None = None,
        waiting: Iterable[str] = (),
    ) -> Table:
        """A table from any iterables (names made plain strings, duplicate states dropped)."""
        return cls(
            rows=tuple(rows),
            states=tuple(dict.fromkeys(str(s) for s in states)),
            terminals=frozenset(str(t) for t in terminals),
            initial=str(initial),
            budgets=frozenset(budgets),
            guards=dict(guards or {}),
            waiting=frozenset(str(w) for w in waiting),
        )

    @property
    def working(self) -> tuple[str, ...]:
        """The states that are not terminals, in table order."""
        return tuple(s for s in self.states if s not in self.terminals)


# ------------------------------------------------------------------ guard names and rows


def guard_name(ref: GuardRef) -> str:
    """How a guard reads in messages: its name."""
    return ref if isinstance(ref, str) else str(getattr(ref, "__name__", repr(ref)))


def guard_problem(ref: GuardRef, known: Collection[str]) -> str | None:
    """Why ``ref`` is not a usable guard (None when it is). ``known``: the names a string may
    take (loopwright's guards and the user's)."""
    if isinstance(ref, str):
        if ref in known:
            return None
        close = difflib.get_close_matches(ref, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"names guard {ref!r}, which is not a guard{hint}: define `def {ref}(rs: RunState) -> bool` and pass "
            f"guards={{{ref!r}: {ref}}}, or use one of the guards loopwright.extend exports"
        )
    if not callable(ref) or getattr(ref, "__name__", "<lambda>") == "<lambda>":
        return (
            f"has guard {ref!r}: guards are named functions (def has_x(rs) -> bool) so logs and diagrams can name them"
        )
    return None


def resolve_guard(ref: G | str, known: Mapping[str, G], where: str) -> G:
    """The guard function ``ref`` stands for; MachineError naming ``where`` when there is none."""
    problem = guard_problem(ref, known)
    if problem is not None:
        raise MachineError(f"{where} {problem}")
    return known[ref] if isinstance(ref, str) else ref


def describe_row(row: RowLike) -> str:
    """``source -> dest (guards) [bounded: budget]``, as messages and reports name a row."""
    label = " & ".join(guard_name(g) for g in row.guards) or "else"
    bound = f" [bounded: {row.bounded_by}]" if row.bounded_by else ""
    return f"{row.source} -> {row.dest} ({label}){bound}"


def is_fallback(row: RowLike) -> bool:
    """A row that always fires: no guards and no bound (a bounded row stops when its budget is
    spent)."""
    return not row.guards and row.bounded_by is None
