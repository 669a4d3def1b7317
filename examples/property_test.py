"""A property test of an agent with hypothesis: whatever the model does, every run ends within
its budgets and every tool call is answered exactly once.

    python examples/property_test.py          # runs the property (200 examples)
    python -m pytest examples/property_test.py

``model_behaviours(agent)`` draws scripts of model replies valid for *this* agent's tools (and,
at tunable rates, unknown tools, bad arguments, errors, cut replies, repeats); a failure shrinks
to a short script and names the invariant it broke.
"""

from __future__ import annotations

from hypothesis import given, settings

from loopwright import Agent, Limits, Runner, ScriptedModel, tool
from loopwright.testing import assert_run_invariants, limits, model_behaviours


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order's status."""
    return {"order_id": order_id, "status": "shipped"}


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    if amount <= 0:
        raise ValueError("amount must be positive")
    return f"refunded {amount:.2f} on {order_id}"


support = Agent(name="support", model=ScriptedModel([]), tools=[lookup, refund], limits=Limits(max_iterations=5))
RUNS: list[str] = []


@settings(max_examples=200, deadline=None)
@given(budget=limits(), script=model_behaviours(support))
def test_support_always_ends_within_budget(budget: Limits, script: list[object]) -> None:
    agent = support.replace(limits=budget, model=ScriptedModel(script))
    result = Runner(agent).run_sync("Where is order A1? Refund it if it is late.")
    assert_run_invariants(result, agent)  # terminal, within budgets, every call answered once, ...
    RUNS.append(result.outcome)


if __name__ == "__main__":
    test_support_always_ends_within_budget()
    outcomes = {outcome: RUNS.count(outcome) for outcome in sorted(set(RUNS))}
    print(f"runs: {len(RUNS)}; outcomes: {outcomes}")
    print("property held: every run ended within its budgets, every call answered once")
