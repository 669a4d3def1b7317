"""User-extensible machines: add your own states and rows to an agent's loop.

:func:`extend` composes one more :class:`~loopwright.table.machine.Extension` (your states, each
with its stage handler; rows — :func:`Rule`, guards as functions or as names of the core's,
the features' or your ``guards``; existing rows redirected, guarded or removed; your budgets)
onto a machine: an agent's own composed machine (pass the agent: its sub-agents' ``transfer``
and its waiting tools' ``suspended`` rows stay), a machine, or by default the core. It is the
mechanism the built-in features use. Nothing is subclassed; the result runs
(``Agent(machine=...)``; an agent whose tree needs more features gets them composed in too),
draws (:func:`loopwright.machines.diagram`) and verifies (:func:`loopwright.machines.verify`) like a built-in
machine, and by default it is verified when built: an extension that would let a run loop
forever, get stuck or never end is refused with the report.

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

from collections.abc import Iterable, Mapping, Sequence

from ..data.errors import MachineError
from ..data.events import ToolCall
from ..data.run_state import RunState
from ..features import machine_for
from ..runtime.agent import Agent
from ..table.budgets import Budget
from ..table.machine import CORE, Extension, Guard, Handler, LoopMachine, Row, Rule, compose, extend_machine
from .verify import verify

__all__ = ["Budget", "Extension", "Rule", "extend", "veto"]


def extend(
    base: Agent | LoopMachine | None = None,
    *,
    name: str,
    states: Mapping[str, Handler] | None = None,
    rows: Sequence[Row] = (),
    rows_before: Mapping[tuple[str, str], Sequence[Row]] | None = None,
    redirect: Mapping[tuple[str, str], str] | None = None,
    require: Mapping[tuple[str, str], Sequence[Guard]] | None = None,
    remove: Iterable[tuple[str, str]] = (),
    guards: Mapping[str, Guard] | None = None,
    budgets: Sequence[Budget] = (),
    check: bool = True,
) -> LoopMachine:
    """A new machine: ``base`` (an Agent: the machine it runs on; a LoopMachine; None: the
    core) with one more extension named ``name`` (see :class:`~loopwright.table.machine.Extension`
    for what each argument does; they are applied in the order remove, redirect, require,
    rows_before, rows). With ``check`` (the default) the result must pass
    :func:`loopwright.machines.verify`; otherwise MachineError carries the report. The ``act`` stage of
    the new machine honours :func:`veto`."""
    ext = Extension(
        name=name,
        states=dict(states or {}),
        rows=tuple(rows),
        rows_before=dict(rows_before or {}),
        redirect=dict(redirect or {}),
        require=dict(require or {}),
        remove=tuple(remove),
        guards=dict(guards or {}),
        budgets=tuple(budgets),
    )
    machine = machine_for(base) if isinstance(base, Agent) else base or CORE
    if machine is CORE or machine.extensions:
        machine = compose(*machine.extensions, ext)
    else:  # a machine made by hand from rows: extend it as it is
        machine = extend_machine(machine, ext, name=name)
    if check:
        report = verify(machine)
        if not report.ok:
            raise MachineError(f"extension {name!r} breaks the loop's guarantees:\n{report}")
    return machine


# ------------------------------------------------------------------ vetoes


def veto(rs: RunState, call: ToolCall | str, reason: str) -> None:
    """Refuse one tool call of the latest reply (from a stage that runs before ``act``). The
    call is not run; ``act`` answers it with an error result ``tool 'x' was vetoed: reason``,
    in the model's call order with the step's other results. Plain data: it survives saving."""
    rs.vetoes[call if isinstance(call, str) else call.id] = reason
