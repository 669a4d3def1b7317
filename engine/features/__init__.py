"""The built-in features, and the machine an agent runs on.

Each feature is one folder (``features/<name>/``) holding its
:class:`~loopwright.table.machine.Extension` and all it needs: ``multi_agent`` (agent trees and
transfers), ``waiting`` (tools that wait for people), ``loop_detection`` (the same tool call over
and over: on for every agent with tools unless ``Limits(max_repeated_calls=None)``),
``tool_retries`` (``@tool(retries=N)``), ``structured_output`` (``Agent(output_type=...)``),
``plan_react`` (``Agent(planner=PlanReAct())``), ``planner`` (``Agent(planner=Planner())``),
``observer`` (``Agent(observer=Observer(every=3))``), ``compaction``
(``Agent(compaction=Compaction(max_tokens=...))``) and ``guardrails`` (``Agent(input_guards=...,
output_guards=..., tool_guards=...)``); ``memory`` is a user's (``Agent(extensions=[memory.extension])``).

:data:`REGISTRY` lists the built-in features once, in the order they compose; each says itself
whether it applies to an agent (``Extension.applies_to``). An agent's machine is the core
composed with the built-in features that apply to its tree, then the user's own extensions
(``Agent(extensions=...)``, or those of a machine made by :func:`~loopwright.extend`), cached per
feature set so agents alike share one machine. ``BUILT_IN`` and ``BUILT_IN_MACHINES`` (what
``diagrams/`` draws) derive from the registry.
"""

from __future__ import annotations

from typing import NamedTuple

from loopwright.runtime.agent import Agent
from loopwright.table.machine import CORE, Extension, LoopMachine, compose

from ..data.exports import claim_own as _claim_own
from ..data.exports import lazy_exports as _lazy_exports
from .compaction import COMPACTION, Compaction
from .guardrails import GUARDRAILS, Block, Guardrail, GuardVerdict, Rewrite
from .loop_detection import LOOP_DETECTION
from .multi_agent import MULTI_AGENT
from .observer import OBSERVER, Observer
from .plan_react import PLAN_REACT, PlanReAct
from .planner import PLANNER, Planner
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

__all__ = [
    "BUILT_IN",
    "BUILT_IN_MACHINES",
    "COMPACTION",
    "GUARDRAILS",
    "LOOP_DETECTION",
    "MULTI_AGENT",
    "OBSERVER",
    "PLANNER",
    "PLAN_REACT",
    "STRUCTURED_OUTPUT",
    "TOOL_RETRIES",
    "WAITING",
    "Block",
    "Compaction",
    "GuardVerdict",
    "Guardrail",
    "Memory",
    "Observer",
    "PlanReAct",
    "Planner",
    "Rewrite",
    "features_for",
    "machine_for",
]

_claim_own(__name__)
__getattr__, __dir__ = _lazy_exports(__name__, {"Memory": ".memory"})  # memory needs the session stores
