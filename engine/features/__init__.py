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

from ..data.exports import claim_own as _claim_own
from ..data.exports import lazy_exports as _lazy_exports
from .compaction import COMPACTION, Compaction
from .guardrails import GUARDRAILS, Block, Guardrail, GuardVerdict, Rewrite
from .loop_detection import LOOP_DETECTION
from .multi_agent import MULTI_AGENT
from .observer import OBSERVER, Observer
from .plan_react import PLAN_REACT, PlanReAct
from .planner import PLANNER, Planner
from .registry import BUILT_IN, BUILT_IN_MACHINES, REGISTRY, BuiltIn, features_for, machine_for
from .structured_output import STRUCTURED_OUTPUT
from .tool_retries import TOOL_RETRIES
from .waiting import WAITING

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
    "REGISTRY",
    "STRUCTURED_OUTPUT",
    "TOOL_RETRIES",
    "WAITING",
    "Block",
    "BuiltIn",
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
