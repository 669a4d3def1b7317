"""loopwright.testing: property-based testing of agents (``pip install loopwright[testing]``).

- strategies: :func:`model_behaviours` (scripts of model replies valid for an agent's tools),
  :func:`limits` (budgets worth testing), :func:`decisions` (approvals, denials and values
  for a run that waits, to drive it to its end with ``Runner.resume``);
- :func:`assert_run_invariants` (raises :class:`InvariantViolation` naming the invariant; a
  suspended run passes: waiting is not a failure);
- :func:`agent_state_machine`: a hypothesis RuleBasedStateMachine stepping runs of an agent;
- the pytest plugin (loaded automatically): the ``scripted_run`` fixture and a row-coverage
  report, with ``--loopwright-cov-fail-under=N``.

Names are imported on first use, so the pytest plugin, which pytest loads in every project that
installs loopwright, costs nothing until a test uses it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..data.exports import claim as _claim

_EXPORTS: dict[str, str] = {
    "AdapterConformance": "adapter_kit",
    "AdapterHarness": "adapter_kit",
    "CountingModel": "counting",
    "CountingTools": "counting",
    "Failure": "adapter_kit",
    "Reply": "adapter_kit",
    "check_adapter": "adapter_kit",
    "dead_port": "adapter_kit",
    "TreeSpec": "workflow_strategies",
    "run_and_check": "workflow_strategies",
    "workflow_trees": "workflow_strategies",
    "HostileModel": "strategies",
    "InvariantViolation": "invariants",
    "ScriptItem": "strategies",
    "agent_state_machine": "stateful",
    "assert_run_invariants": "invariants",
    "check_partial": "invariants",
    "decisions": "strategies",
    "describe_script": "invariants",
    "from_schema": "schema",
    "hostile_replies": "strategies",
    "hostile_tools": "strategies",
    "limits": "strategies",
    "model_behaviours": "strategies",
    "scripted": "invariants",
}
_NEEDS_HYPOTHESIS = {"schema", "stateful", "strategies", "workflow_strategies"}

__all__ = [
    "AdapterConformance",
    "AdapterHarness",
    "CountingModel",
    "CountingTools",
    "Failure",
    "HostileModel",
    "InvariantViolation",
    "Reply",
    "ScriptItem",
    "TreeSpec",
    "agent_state_machine",
    "assert_run_invariants",
    "check_adapter",
    "check_partial",
    "dead_port",
    "decisions",
    "describe_script",
    "from_schema",
    "hostile_replies",
    "hostile_tools",
    "limits",
    "model_behaviours",
    "run_and_check",
    "scripted",
    "workflow_trees",
]

if TYPE_CHECKING:
    from .adapter_kit import AdapterConformance as AdapterConformance
    from .adapter_kit import AdapterHarness as AdapterHarness
    from .adapter_kit import Failure as Failure
    from .adapter_kit import Reply as Reply
    from .adapter_kit import check_adapter as check_adapter
    from .adapter_kit import dead_port as dead_port
    from .counting import CountingModel as CountingModel
    from .counting import CountingTools as CountingTools
    from .invariants import InvariantViolation as InvariantViolation
    from .invariants import assert_run_invariants as assert_run_invariants
    from .invariants import check_partial as check_partial
    from .invariants import describe_script as describe_script
    from .invariants import scripted as scripted
    from .schema import from_schema as from_schema
    from .stateful import agent_state_machine as agent_state_machine
    from .strategies import HostileModel as HostileModel
    from .strategies import ScriptItem as ScriptItem
    from .strategies import decisions as decisions
    from .strategies import hostile_replies as hostile_replies
    from .strategies import hostile_tools as hostile_tools
    from .strategies import limits as limits
    from .strategies import model_behaviours as model_behaviours
    from .workflow_strategies import TreeSpec as TreeSpec
    from .workflow_strategies import run_and_check as run_and_check
    from .workflow_strategies import workflow_trees as workflow_trees


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwright.testing' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    except ImportError as missing:
        if module in _NEEDS_HYPOTHESIS and missing.name == "hypothesis":
            raise ImportError(
                f"loopwright.testing.{name} needs hypothesis: pip install 'loopwright[testing]'"
            ) from missing
        raise
    _claim(value, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
