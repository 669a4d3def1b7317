"""The built-in features, and the machine an agent runs on.

Each feature is one :class:`~loopwright.table.machine.Extension` in its own module: ``multi_agent``
(agent trees and transfers), ``waiting`` (tools that wait for people), ``loop_detection``
(the same tool call over and over: on for every agent with tools unless
``Limits(max_repeated_calls=None)``), ``tool_retries`` (``@tool(retries=N)``),
``structured_output`` (``Agent(output_type=...)``),
``plan_react`` (``Agent(planner=PlanReAct())``), ``planner`` (``Agent(planner=Planner())``),
``observer`` (``Agent(observer=Observer(every=3))``), ``compaction``
(``Agent(compaction=Compaction(max_tokens=...))``) and ``guardrails`` (``Agent(input_guards=...,
output_guards=..., tool_guards=...)``). An agent's machine is
the core composed with the features its definition needs, then the user's own extensions
(``Agent(extensions=...)``, or those of a machine made by :func:`~loopwright.extend`), cached per
feature set so agents alike share one machine.
"""

from __future__ import annotations

from loopwright.runtime.agent import Agent
from loopwright.table.machine import CORE, Extension, LoopMachine, compose

from ..data.exports import claim_own, lazy_exports
from .compaction import COMPACTION, Compaction
from .guardrails import GUARDRAILS, Block, Guardrail, GuardVerdict, Rewrite
from .guardrails.verdicts import guarded
from .loop_detection import LOOP_DETECTION
from .multi_agent import MULTI_AGENT
from .observer import OBSERVER, Observer
from .plan_react import PLAN_REACT, PlanReAct
from .planner import PLANNER, Planner
from .structured_output import STRUCTURED_OUTPUT
from .tool_retries import TOOL_RETRIES
from .waiting import WAITING

BUILT_IN: tuple[Extension, ...] = (
    MULTI_AGENT,
    WAITING,
    LOOP_DETECTION,
    TOOL_RETRIES,
    STRUCTURED_OUTPUT,
    PLAN_REACT,
    PLANNER,
    OBSERVER,
    COMPACTION,
    GUARDRAILS,
)


def features_for(agent: Agent) -> tuple[Extension, ...]:  # noqa: C901 (one test per built-in feature)
    """The extensions ``agent``'s machine has: the built-in features its tree needs, then the
    user's own (the machine's it names, then its ``extensions``), each once, in that order."""
    tree = list(agent.walk())
    wanted: list[Extension] = []
    if any(a.sub_agents for a in tree):
        wanted.append(MULTI_AGENT)
    if any(t.can_wait for a in tree for t in a.tools.values()) or any(ts.can_wait for a in tree for ts in a.toolsets):
        wanted.append(WAITING)
    if agent.limits.max_repeated_calls is not None and any(a.tools or a.toolsets for a in tree):
        wanted.append(LOOP_DETECTION)
    if any(t.retries for a in tree for t in a.tools.values()):
        wanted.append(TOOL_RETRIES)
    if any(a.output_type is not None for a in tree):
        wanted.append(STRUCTURED_OUTPUT)
    for option in ("planner", "observer", "compaction"):
        wanted += dict.fromkeys(getattr(a, option).extension for a in tree if getattr(a, option) is not None)
    wanted += [GUARDRAILS] if guarded(agent) else []
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
    "loop_detection": compose(LOOP_DETECTION),
    "multi_agent+loop_detection": compose(MULTI_AGENT, LOOP_DETECTION),
    "waiting+loop_detection": compose(WAITING, LOOP_DETECTION),
    "multi_agent+waiting+loop_detection": compose(MULTI_AGENT, WAITING, LOOP_DETECTION),
    "loop_detection+tool_retries": compose(LOOP_DETECTION, TOOL_RETRIES),
    "structured_output": compose(STRUCTURED_OUTPUT),
    "plan_react": compose(PLAN_REACT),
    "planner": compose(PLANNER),
    "observer": compose(OBSERVER),
    "compaction": compose(COMPACTION),
    "guardrails": compose(GUARDRAILS),
}
"""The core, each built-in feature composed onto it, and the combinations agents get by default
(an agent with tools has loop detection): the machines ``diagrams/`` shows."""

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

claim_own(__name__)
__getattr__, __dir__ = lazy_exports(__name__, {"Memory": ".memory"})  # memory needs the session stores
