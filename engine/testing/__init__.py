"""loopwright.testing: property-based testing of agents (``pip install loopwright[testing]``).

- strategies: :func:`model_behaviours` (scripts of model replies valid for an agent's tools),
  :func:`limits` (budgets worth testing);
- :func:`assert_run_invariants` (raises :class:`InvariantViolation` naming the invariant);
- :func:`agent_state_machine`: a hypothesis RuleBasedStateMachine stepping runs of an agent;
- the pytest plugin (loaded automatically): the ``scripted_run`` fixture and a row-coverage
  report, with ``--loopwright-cov-fail-under=N``.
"""

from typing import Any

from .invariants import InvariantViolation, assert_run_invariants, check_partial, describe_script, scripted

_NEEDS_HYPOTHESIS = {"ScriptItem", "agent_state_machine", "from_schema", "limits", "model_behaviours"}
try:
    from .schema import from_schema
    from .stateful import agent_state_machine
    from .strategies import ScriptItem, limits, model_behaviours
except ImportError as _missing:  # the pytest plugin and the invariants work without hypothesis
    _MISSING: ImportError | None = _missing
else:
    _MISSING = None


def __getattr__(name: str) -> Any:
    if name in _NEEDS_HYPOTHESIS and _MISSING is not None:
        raise ImportError(
            f"loopwright.testing.{name} needs hypothesis: pip install 'loopwright[testing]'"
        ) from _MISSING
    raise AttributeError(f"module 'loopwright.testing' has no attribute {name!r}")


__all__ = [
    "InvariantViolation",
    "ScriptItem",
    "agent_state_machine",
    "assert_run_invariants",
    "check_partial",
    "describe_script",
    "from_schema",
    "limits",
    "model_behaviours",
    "scripted",
]
