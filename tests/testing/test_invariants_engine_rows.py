"""The testing kit's invariants know the engine's own rows (``stage -> done (engine_stopped)``,
``stage -> cancelled (engine_stopped)``): a run the engine ended (``Limits.max_transitions``,
``timeout_s`` on an opted-in unverified machine) is a path of its machine, and a step through
``engine_stopped`` that goes anywhere but a terminal is still caught."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import Agent, Limits, Runner, RunState, ScriptedModel
from loopwright.extend import Rule, extend
from loopwright.testing import InvariantViolation, assert_run_invariants, check_partial


async def _spin(rs: RunState, ctx: Any) -> None:
    """A stage that does nothing: no model call."""


def _keep_spinning(rs: RunState) -> bool:
    return True


CAROUSEL = extend(
    name="kit_carousel",
    states={"spin": _spin, "turn": _spin},
    rows_before={("preprocess", "reason"): [Rule("preprocess", "spin", "keep_spinning")]},
    rows=[Rule("spin", "turn"), Rule("turn", "spin")],
    guards={"keep_spinning": _keep_spinning},
    check=False,
)
"""``spin -> turn -> spin``: a cycle no row ends; the engine ends it at ``max_transitions``."""


def _carousel(**limits: Any) -> Agent:
    return Agent(name="carousel", model=ScriptedModel(["never asked"]), machine=CAROUSEL, limits=Limits(**limits))


def test_a_run_the_engine_ended_at_max_transitions_holds_the_invariants() -> None:
    agent = _carousel(max_transitions=20, timeout_s=30)
    result = Runner(agent, unverified=True).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_transitions"
    entered = [e for e in result.events if e.type == "state_entered"]
    assert entered[-1].guard == "engine_stopped"  # the run really went through the engine's row
    assert_run_invariants(result, agent)


def test_a_step_through_engine_stopped_into_a_non_terminal_is_not_a_row() -> None:
    agent = _carousel(max_transitions=20, timeout_s=30)
    result = Runner(agent, unverified=True).run_sync("go")
    events = list(result.events)
    last = next(i for i in range(len(events) - 1, -1, -1) if events[i].type == "state_entered")
    forged = events[last].model_copy(update={"state": "turn"})
    events[last] = forged
    trace = [*result.trace[:-1], "turn"]
    with pytest.raises(InvariantViolation, match="is not a row"):
        check_partial(trace, events, CAROUSEL)
