"""Several agents: a dispatcher hands work to billing and sales, and answers when they are done.

    python examples/multi_agent.py

Each hand-over is the bounded row ``decide -> transfer`` (``Limits(max_transfers=...)``); the
models are scripted so the example runs offline (swap in ``AnthropicModel`` for real ones).
"""

from __future__ import annotations

import sys

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, tool


def hand_to(agent: str, task: str) -> list[ToolCall]:
    return [ToolCall(name="transfer_to_agent", args={"agent_name": agent, "task": task})]


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount:.2f} on {order_id}"


@tool
def quote(seats: int) -> str:
    """Price a number of extra seats."""
    return f"{seats} seats: {seats * 12} USD a month"


billing = Agent(
    name="billing",
    description="charges and refunds",
    tools=[refund],
    model=ScriptedModel(
        [[ToolCall(name="refund", args={"order_id": "A1", "amount": 49.0})], hand_to("sales", "wants 5 more seats")]
    ),
)
sales = Agent(
    name="sales",
    description="plans and seats",
    history="isolated",  # sales sees only its task, not the whole conversation
    tools=[quote],
    model=ScriptedModel([[ToolCall(name="quote", args={"seats": 5})], hand_to("dispatcher", "quoted 60 USD")]),
)
dispatcher = Agent(
    name="dispatcher",
    sub_agents=[billing, sales],
    limits=Limits(max_transfers=5),
    model=ScriptedModel(
        [hand_to("billing", "refund the double charge on A1"), "Refunded 49.00 on A1; 5 seats cost 60 USD a month."]
    ),
)

if __name__ == "__main__":
    result = Runner(dispatcher).run_sync("I was charged twice for A1, and I need 5 more seats.")
    for event in result.events:
        if event.type == "transferred":
            print(f"transfer: {event.from_agent} -> {event.to_agent}")
        elif event.type == "tool_answered" and event.name != "transfer_to_agent":
            print(f"  {event.agent}: {event.name} -> {event.content}")
    print(f"answered by: {result.answered_by}")
    print(f"answer: {result.output}")
    sys.exit(0 if result.outcome == "final" else 1)
