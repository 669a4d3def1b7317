"""The built-in features, and the machine an agent runs on.

Each feature is one :class:`~loopwright.machine.Extension` in its own module: ``multi_agent``
(agent trees and transfers) and ``waiting`` (tools that wait for people). An agent's machine is
the core composed with the features its definition needs, then the user's own extensions
(``Agent(extensions=...)``, or those of a machine made by :func:`~loopwright.extend`), cached per
feature set so agents alike share one machine.
"""

from __future__ import annotations

from loopwright.agent import Agent
from loopwright.machine import CORE, Extension, LoopMachine, compose

from .multi_agent import MULTI_AGENT
from .waiting import WAITING

BUILT_IN: tuple[Extension, ...] = (MULTI_AGENT, WAITING)


def features_for(agent: Agent) -> tuple[Extension, ...]:
    """The extensions ``agent``'s machine has: the built-in features its tree needs, then the
    user's own (the machine's it names, then its ``extensions``), each once, in that order."""
    tree = list(agent.walk())
    wanted: list[Extension] = []
    if any(a.sub_agents for a in tree):
        wanted.append(MULTI_AGENT)
    if any(t.can_wait for a in tree for t in a.tools.values()):
        wanted.append(WAITING)
    own = [*(agent.machine.extensions if agent.machine is not None else ()), *agent.extensions]
    for ext in own:
        if ext in BUILT_IN:
            if ext not in wanted:
                wanted.append(ext)
        elif all(e is not ext for e in wanted):
            wanted.append(ext)
    return tuple(sorted(wanted, key=lambda e: (e not in BUILT_IN, BUILT_IN.index(e) if e in BUILT_IN else 0)))


def machine_for(agent: Agent) -> LoopMachine:
    """The machine ``agent`` runs on. A machine built by hand (``LoopMachine(rows, ...)``, not
    by composition) is used as it is."""
    own: LoopMachine | None = agent.machine
    if own is not None and not own.extensions and own is not CORE:
        return own
    return compose(*features_for(agent))


BUILT_IN_MACHINES: dict[str, LoopMachine] = {
    "agent": CORE,
    "multi_agent": compose(MULTI_AGENT),
    "waiting": compose(WAITING),
    "multi_agent+waiting": compose(MULTI_AGENT, WAITING),
}
"""The core, each built-in feature composed onto it, and both: the machines ``diagrams/`` shows."""

__all__ = ["BUILT_IN", "BUILT_IN_MACHINES", "MULTI_AGENT", "WAITING", "features_for", "machine_for"]
