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

_EXPORTS: dict[str, str] = {
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
_NEEDS_HYPOTHESIS = {"schema", "stateful", "strategies"}

__all__ = [
    "HostileModel",
    "InvariantViolation",
    "ScriptItem",
    "agent_state_machine",
    "assert_run_invariants",
    "check_partial",
    "decisions",
    "describe_script",
    "from_schema",
    "hostile_replies",
    "hostile_tools",
    "limits",
    "model_behaviours",
    "scripted",
]

if TYPE_CHECKING:
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
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
