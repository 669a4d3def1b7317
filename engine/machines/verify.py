"""Static verification of a transition table: every run ends, no run gets stuck.

:func:`verify` checks the rules of :mod:`loopwright.table.rules` and returns a :class:`Report`
(``loopwright check module:agent`` prints it and exits 1 on any violation):

1. every state is reachable from the initial state;
2. every working (non-terminal) state can reach a terminal;
3. every cycle passes through a bounded edge: with the bounded edges removed, what is left is
   acyclic, so every run terminates by construction (each bounded edge's budget is finite);
4. every working state ends in exactly one fallback row (a row with no guards and no bound),
   so some row always matches and no run can get stuck;
5. every name in the table means something: states, guards (named functions, or names that
   resolve against :mod:`loopwright.table.guards` and the guards you pass), budgets of bounded edges
   (the machine's budgets, or the ones you pass); a terminal has no rows;
6. in a machine that waits (the ``waiting`` feature): calls held by ``act`` reach
   ``decide -> suspended`` before the loop goes on; a state of yours on act's exit that loops
   back to ``preprocess`` would carry the run past its held calls.

It works on a built :class:`~loopwright.table.machine.LoopMachine` (or an Agent: the machine it
runs on) and on raw rows that no LoopMachine would accept (``verify(rows, states=...)``), so a
broken table gets the whole report, not only the first error.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from ..data.errors import MachineError
from ..data.run_state import RunState
from ..data.stage import TERMINALS, Stage
from ..features import machine_for
from ..runtime.agent import Agent
from ..table import guards as _guards
from ..table.machine import CORE, LoopMachine
from ..table.rules import (
    RULES,
    GuardRef,
    RowLike,
    Table,
    Violation,
    check,
    describe_row,
    guard_name,
    guard_problem,
    resolve_guard,
)

__all__ = [
    "BUILTIN_GUARDS",
    "CYCLE_BUDGETS",
    "Guard",
    "GuardRef",
    "Report",
    "RowLike",
    "Violation",
    "describe_row",
    "guard_name",
    "guard_problem",
    "load_target",
    "resolve_guard",
    "verify",
]

Guard: TypeAlias = Callable[[RunState], bool]

CYCLE_BUDGETS: tuple[str, ...] = ("max_iterations", "max_model_retries", "max_transfers", "max_suspensions")
"""The budgets a bounded row may name when the machine does not say (it has no ``budgets``)."""
BUILTIN_GUARDS: dict[str, Guard] = dict(_guards.GUARDS)
"""The guards of :mod:`loopwright.table.guards`, by name: a user table may name them by string."""


@dataclass(frozen=True, slots=True)
class Report:
    """What :func:`verify` found. ``ok`` when there is no violation; ``str(report)`` reads as
    the ``loopwright check`` output."""

    machine: str
    initial: str
    terminals: tuple[str, ...]
    states: int
    rows: int
    violations: tuple[Violation, ...]
    waits: bool = False
    """The machine has waiting states (rule 6 applies)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def broken(self, rule: int) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.rule == rule)

    def __str__(self) -> str:
        lines = [f"machine {self.machine!r}: {self.states} states, {self.rows} rows"]
        for rule, text in RULES.items():
            if rule == 6 and not self.waits:
                continue
            found = self.broken(rule)
            title = text.format(initial=self.initial, terminals=", ".join(self.terminals) or "none")
            lines.append(f"  {'FAIL' if found else 'ok  '} {rule}. {title}")
            lines += [f"         - {v.message}" for v in found]
        n = len(self.violations)
        lines.append("no violations: every run of this machine ends" if not n else f"{n} violation{'s' * (n > 1)}")
        return "\n".join(lines)


def verify(
    target: Agent | LoopMachine | Sequence[RowLike] | None = None,
    *,
    states: Iterable[str] | None = None,
    terminals: Iterable[str] = TERMINALS,
    initial: str = Stage.START,
    guards: Mapping[str, Guard] | None = None,
    budgets: Iterable[str] | None = None,
    name: str = "table",
    waiting: Iterable[str] = (),
) -> Report:
    """Check the rules (module docstring) for an Agent's machine, a LoopMachine, or raw
    ``rows`` (with ``states``, ``terminals``, ``initial``, ``waiting``; ``guards`` resolves guard names).
    ``budgets``: the names a row may be bounded by (default: a machine's own ``budgets``, else
    :data:`CYCLE_BUDGETS`). With no target: the built-in plain loop."""
    if target is None:
        target = CORE
    if isinstance(target, Agent):
        target = machine_for(target)
    if isinstance(target, LoopMachine):
        rows: Sequence[RowLike] = target.rows
        states, terminals, initial, name = target.states, target.terminals, target.initial, target.name
        waiting = target.waiting
        budgets = _budgets_of(target) if budgets is None else budgets
        guards = {**target.guards, **(guards or {})}
    else:
        rows = list(target)
    table = Table.of(
        rows,
        states=_states_named(rows, str(initial)) if states is None else states,
        terminals=terminals,
        initial=initial,
        budgets=CYCLE_BUDGETS if budgets is None else budgets,
        guards={**BUILTIN_GUARDS, **(guards or {})},
        waiting=waiting,
    )
    return Report(
        machine=name,
        initial=table.initial,
        terminals=tuple(s for s in table.states if s in table.terminals)
        + tuple(sorted(table.terminals.difference(table.states))),
        states=len(table.states),
        rows=len(table.rows),
        violations=tuple(check(table)),
        waits=bool(table.waiting),
    )


def _budgets_of(machine: LoopMachine) -> Iterable[str]:
    """The budgets a machine's rows may be bounded by: its registry's cycle budgets."""
    return [b.name for b in machine.budgets.values() if b.cycle]


def _states_named(rows: Sequence[RowLike], initial: str) -> list[str]:
    """The states the rows name, in Stage order, then any others."""
    named = {end for row in rows for end in (str(row.source), str(row.dest))} | {initial}
    return [s for s in Stage if s in named] + sorted(named - set(Stage))


# ------------------------------------------------------------------ targets


def load_target(target: str) -> Agent | LoopMachine:
    """Import ``module:attr`` (attr may be dotted) naming an Agent or a LoopMachine, or a
    function of no arguments that makes one. Raises LookupError with a message for the user
    when it cannot."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise LookupError(f"{target!r} is not module:attr; name the object, e.g. myapp.agents:support")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise LookupError(
            f"{module_name!r} is not a module name; name a module importable from the current folder, "
            "dotted and without .py (myapp.agents:support), not a file path"
        )
    obj = _import(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LookupError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, Agent | LoopMachine | type):
        try:  # a factory: build the agent the way the app does
            obj = obj()
        except TypeError as exc:
            raise LookupError(f"{target} is a function that needs arguments ({exc}); name an Agent instead") from None
        except MachineError:  # the agent's machine cannot be built: its own report
            raise
        except Exception as exc:
            raise LookupError(f"{target}: calling it to make the agent failed: {_failure(exc)}") from exc
    if not isinstance(obj, Agent | LoopMachine):
        raise LookupError(f"{target} is a {type(obj).__name__}; name an Agent, a LoopMachine or a function making one")
    return obj


def _import(module_name: str) -> object:
    """The module (LookupError, in one line, if it is not found or its own code fails)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise LookupError(
            f"cannot import module {module_name!r} ({exc}); run from your project's folder or install it"
        ) from None
    except MachineError:  # the agent's machine cannot be built: its own report
        raise
    except Exception as exc:  # the module's own code failed: one line naming where and why
        raise LookupError(f"importing module {module_name!r} failed: {_failure(exc)}") from exc


def _failure(exc: BaseException) -> str:
    """``Kind: message (file, line N)``: where the user's code failed, in one line."""
    if isinstance(exc, SyntaxError):
        where, line, said = exc.filename, exc.lineno, exc.msg
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        where, line, said = (frames[-1].filename, frames[-1].lineno, str(exc)) if frames else (None, None, str(exc))
    text = f"{type(exc).__name__}: {' '.join(said.split())}"
    if where:
        relative = os.path.relpath(where)
        text += f" ({where if relative.startswith('..') else relative}, line {line})"
    return text
