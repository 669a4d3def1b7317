"""The README's example of the testing kit driving an agent with a confirmation tool to its end under hypothesis."""

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Agent, Runner, ScriptedModel, tool
from loopwright.testing import assert_run_invariants, decisions, limits, model_behaviours


@tool(requires_confirmation=lambda args: args["amount"] > 100)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order (over 100 waits for a person's approval)."""
    return f"refunded {amount:.2f} on {order_id}"


support = Agent(name="support", model=ScriptedModel([]), tools=[refund])


@settings(max_examples=50, deadline=None)
@given(budget=limits(), script=model_behaviours(support), data=st.data())
def test_support_agent_ends_whatever_people_decide(budget, script, data):
    agent = support.replace(limits=budget, model=ScriptedModel(script))
    runner = Runner(agent)
    result = runner.run_sync("I want my money back")
    while result.outcome == "suspended":
        assert_run_invariants(result, agent)  # a run that waits is not a failure
        result = runner.resume_sync(result, data.draw(decisions(result)))  # approve, deny, or a value
    assert_run_invariants(result, agent)  # the whole run: every leg's events, every call answered once
