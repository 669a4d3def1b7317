"""The registry of built-in features and the machine an agent runs on (the code behind
:mod:`loopwright.features`' ``REGISTRY``, ``features_for`` and ``machine_for``)."""

from __future__ import annotations

from typing import NamedTuple

from ..runtime.agent import Agent
from ..table.machine import CORE, Extension, LoopMachine, compose
from .compaction import COMPACTION
from .guardrails import GUARDRAILS
from .loop_detection import LOOP_DETECTION
from .multi_agent import MULTI_AGENT
from .observer import OBSERVER
from .plan_react import PLAN_REACT
from .planner import PLANNER
from .structured_output import STRUCTURED_OUTPUT
from .tool_retries import TOOL_RETRIES
from .waiting import WAITING


class BuiltIn(NamedTuple):
    """One built-in feature: its extension, and the machines ``diagrams/`` draws it in."""

    extension: Extension
    drawn_with: tuple[tuple[Extension, ...], ...] = ((),)
    """For each diagram of it, the built-in features drawn with it (``()``: the feature alone)."""


REGISTRY: tuple[BuiltIn, ...] = (
    BuiltIn(MULTI_AGENT),
    BuiltIn(WAITING, drawn_with=((), (MULTI_AGENT,))),
    BuiltIn(LOOP_DETECTION, drawn_with=((), (MULTI_AGENT,), (WAITING,), (MULTI_AGENT, WAITING))),
    BuiltIn(TOOL_RETRIES, drawn_with=((LOOP_DETECTION,),)),  # tools that retry come with loop detection
    BuiltIn(STRUCTURED_OUTPUT),
    BuiltIn(PLAN_REACT),
    BuiltIn(PLANNER),
    BuiltIn(OBSERVER),
    BuiltIn(COMPACTION),
    BuiltIn(GUARDRAILS),
)
"""The built-in features, in the order they compose onto the core (a feature's rows go in after
those of the features before it): the one list a new feature joins."""

BUILT_IN: tuple[Extension, ...] = tuple(b.extension for b in REGISTRY)


def features_for(agent: Agent) -> tuple[Extension, ...]:
    """The extensions ``agent``'s machine has: the built-in features that apply to it (or that it
    names), in registry order, then the user's own (the machine's it names, then its
    ``extensions``), each once, in that order."""
    every = [b.extension for b in REGISTRY]
    named = [*(agent.machine.extensions if agent.machine is not None else ()), *agent.extensions]
    built_in = [e for e in every if e.applies_to(agent) or e in named]
    return (*built_in, *(e for e in dict.fromkeys(named) if e not in every))


def machine_for(agent: Agent) -> LoopMachine:
    """The machine ``agent`` runs on. A machine built by hand (``LoopMachine(rows, ...)``, not
    by composition) is used as it is."""
    own: LoopMachine | None = agent.machine
    if own is not None and not own.extensions and own is not CORE:
        return own
    return compose(*features_for(agent))


def _drawn() -> dict[str, LoopMachine]:
    machines = {"agent": CORE}
    for b in REGISTRY:
        for others in b.drawn_with:
            machine = compose(*(e for e in BUILT_IN if e is b.extension or e in others))
            machines[machine.name] = machine
    return machines


BUILT_IN_MACHINES: dict[str, LoopMachine] = _drawn()
"""The core, each built-in feature composed onto it, and the combinations agents get by default
(an agent with tools has loop detection): the machines ``diagrams/`` shows, by name."""
