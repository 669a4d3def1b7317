"""Properties of the loop, on the testing kit we ship: over arbitrary model behaviour and
budgets every run ends in a terminal state, within its budgets, every tool call answered
exactly once, its trace a path of the table, its event seq strictly increasing — also when
runs are stepped, cancelled and hit by tool failures at arbitrary points."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, Runner, ScriptedModel, tool
from loopwright.data.result import RunResult
from loopwright.testing import agent_state_machine, assert_run_invariants, limits, model_behaviours


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(timeout_s=0.005)
async def nap(seconds: float) -> str:
    """Sleeps (times out past 5 ms)."""
    await asyncio.sleep(min(seconds, 0.02) if seconds > 0 else 0)
    return "rested"


@tool
async def fail(reason: str) -> str:
    """Raises."""
    raise RuntimeError(reason)


AGENT = Agent(name="prop", model=ScriptedModel([]), tools=[add, nap, fail])


@st.composite
def agents_and_scripts(draw: st.DrawFn) -> tuple[Agent, list[object]]:
    budget: Limits = draw(limits())
    agent = AGENT.replace(limits=budget)
    script = draw(model_behaviours(agent, model_error=0.1, invalid_args=0.15, unknown_tool=0.1, repeat=0.1))
    return agent.replace(model=ScriptedModel(script)), script


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=agents_and_scripts())
def test_every_run_ends_within_its_bounds(case: tuple[Agent, list[object]]) -> None:
    agent, script = case
    result: RunResult = Runner(agent).run_sync("go")
    assert_run_invariants(result, agent, script=script)
    assert result.outcome in ("final", "salvaged", "limit", "failed")
    if result.outcome == "limit":
        assert result.limit is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=agents_and_scripts(), cancel_after=st.integers(0, 12))
def test_cancellation_at_any_step_keeps_the_invariants(case: tuple[Agent, list[object]], cancel_after: int) -> None:
    agent, script = case

    async def scenario() -> RunResult:
        runner = Runner(agent)
        handle = runner.start("go")
        steps = 0
        while not handle.done:
            if steps == cancel_after:
                runner.cancel(handle.run_id)
            await handle.step()
            steps += 1
        return handle.result

    result = asyncio.run(scenario())
    assert_run_invariants(result, agent, script=script)
    if 0 < cancel_after < len(result.trace) - 1:
        assert result.outcome == "cancelled"


TestSteppedRuns = agent_state_machine(AGENT.replace(limits=Limits(max_iterations=4, retry_backoff_s=0))).TestCase
TestSteppedRuns.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
