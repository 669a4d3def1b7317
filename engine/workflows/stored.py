"""A workflow run's children as a store keeps them: which runs each of its states ran, and their
events read back (for its trace page: :mod:`loopwright.cli.trace_children` draws them, the dev
UI's ``/runs/{id}/trace`` serves them).

A workflow's state runs its children as runs of their own, named after the workflow's run
(:mod:`loopwright.workflows.children`): ``r1.research`` (a sequence's step), ``r1.critic.2``
(the third round of a loop), ``r1.tests`` (a parallel's branch, run in ``fan_out``),
``r1.each.4`` (the fifth item of a map, run in ``each``). The workflow's machine says which
state runs which agent (its ``composites``) and its events say which states ran and in which
round, so :func:`slots` names every child a run had, and a child that is itself a workflow has
children of its own, named the same way under its own id.

:func:`stored_children` reads them all. A store that lists the runs under a run
(``store.children``: :class:`~loopwright.stores.SQLiteStore`,
:class:`~loopwright.stores.PostgresStore`, a :class:`~loopwright.stores.StoreWrapper` around
one) gives every item of a map, an item that never started (refused, its store write failed)
hiding none after it; a store of the user's own without it is probed: a map's items are read
until the first missing one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.events import EVENT_ADAPTER, Event
from ..runtime.agent import Agent
from ..stores.base import children_of
from ..table.machine import LoopMachine


@dataclass(frozen=True, slots=True)
class Slot:
    """A child a workflow run had: the state that ran it, its run id (a map: the prefix of its
    items' ids), the machine it ran on, and the workflow's event that entered the state."""

    state: str
    label: str
    run_id: str
    machine: LoopMachine
    seq: int
    items: bool = False


def composites_of(machine: LoopMachine) -> Mapping[str, Sequence[tuple[str, LoopMachine]]]:
    """A workflow machine's states that run children (empty for an agent's machine)."""
    found: Mapping[str, Sequence[tuple[str, LoopMachine]]] = getattr(machine, "composites", None) or {}
    return found


def slots(machine: LoopMachine, events: Sequence[Any], run_id: str) -> list[Slot]:
    """The children the workflow run ``run_id`` (``events``, on ``machine``) ran, in order."""
    composites = composites_of(machine)
    if not composites:
        return []
    kind = machine.name.partition(":")[0]
    back = {(r.source, r.dest) for r in machine.rows if r.bounded_by == "loop_repeats"}
    rounds, seen, found = 0, set(), []
    for e in events:
        if e.type != "state_entered":
            continue
        if (e.source, e.state) in back:
            rounds += 1
        for label, child in composites.get(e.state, ()):
            if kind == "map":
                slot = Slot(e.state, label, f"{run_id}.{e.state}", child, e.seq, items=True)
            elif kind == "loop":
                slot = Slot(e.state, f"{label} · round {rounds + 1}", f"{run_id}.{e.state}.{rounds}", child, e.seq)
            elif kind == "parallel":
                slot = Slot(e.state, label, f"{run_id}.{label}", child, e.seq)
            else:
                slot = Slot(e.state, label, f"{run_id}.{e.state}", child, e.seq)
            if slot.run_id not in seen:  # (a state entered again after a suspension: the same child)
                seen.add(slot.run_id)
                found.append(slot)
    return found


def numbered_items(prefix: str, run_ids: Iterable[str]) -> list[tuple[int, str]]:
    """The items of a map among ``run_ids`` (``prefix.0``, ``prefix.1``, ...): (number, id), in item order."""
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)")
    return sorted((int(m.group(1)), k) for k in run_ids if (m := pattern.fullmatch(k)))


def item_ids(prefix: str, run_ids: Iterable[str]) -> list[str]:
    """The ids of a map's items among ``run_ids`` (``prefix.0``, ``prefix.1``, ...), in item order."""
    return [k for _, k in numbered_items(prefix, run_ids)]


async def stored_children(store: Any, run_id: str, workflow: Agent | LoopMachine) -> dict[str, list[Event]]:
    """Every run under the workflow run ``run_id`` that ``store`` holds (children, their
    children, ...), its events by run id: what :func:`~loopwright.cli.trace_page.trace_page`
    takes as ``children=``. ``workflow``: the workflow (or its machine) the run ran on."""
    from ..features import machine_for

    machine = machine_for(workflow) if isinstance(workflow, Agent) else workflow
    listed = await children_of(store, run_id)
    reader = _Reader(store, None if listed is None else frozenset(listed))
    root = await reader.read(run_id, listed=False)
    if root:
        await reader.down(machine, root)
    return reader.found


@dataclass(slots=True)
class _Reader:
    """Reads the runs under a workflow run: those ``listed`` (None: a store that cannot list, probed)."""

    store: Any
    listed: frozenset[str] | None
    found: dict[str, list[Event]] = field(default_factory=dict)

    async def read(self, run_id: str, *, listed: bool = True) -> list[Event]:
        if listed and self.listed is not None and run_id not in self.listed:  # (no read of a run not there)
            return []
        return [EVENT_ADAPTER.validate_json(line) for line in await self.store.events(run_id)]

    async def keep(self, run_id: str, machine: LoopMachine) -> bool:
        """Read run ``run_id`` (on ``machine``) and the runs under it; whether the store has it."""
        if run_id in self.found:
            return True
        own = await self.read(run_id)
        if own:
            self.found[run_id] = own
            await self.down(machine, own)
        return bool(own)

    async def down(self, machine: LoopMachine, events: list[Event]) -> None:
        for slot in slots(machine, events, events[0].run_id):
            if not slot.items:
                await self.keep(slot.run_id, slot.machine)
            elif self.listed is not None:
                for run_id in item_ids(slot.run_id, self.listed):
                    await self.keep(run_id, slot.machine)
            else:  # a store that cannot list: each item until the first missing one
                n = 0
                while await self.keep(f"{slot.run_id}.{n}", slot.machine):
                    n += 1


__all__ = ["Slot", "composites_of", "item_ids", "numbered_items", "slots", "stored_children"]
