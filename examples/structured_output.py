"""Structured output: the answer is a validated pydantic object, not text.

    python examples/structured_output.py

The first reply does not validate; the model is sent the validation error and tries again
(``validate -> preprocess``, bounded by ``Limits(max_parse_retries=...)``).
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from loopwright import Agent, Limits, Runner, ScriptedModel


class Ticket(BaseModel):
    """A support ticket triaged from a customer's message."""

    category: str = Field(description="billing, shipping or technical")
    urgent: bool
    summary: str = Field(max_length=80)


model = ScriptedModel(
    [
        '{"category": "shipping", "urgent": "very"}',  # not a bool, and no summary: sent back to the model
        'Here it is: {"category": "shipping", "urgent": true, "summary": "Parcel 118 lost; customer leaves Friday"}',
    ]
)
agent = Agent(
    name="triage",
    model=model,
    instruction="Triage the customer's message.",
    output_type=Ticket,
    limits=Limits(max_parse_retries=2),
)

if __name__ == "__main__":
    result = Runner(agent).run_sync("My parcel 118 never came and I leave on Friday!")
    ticket = result.output
    assert isinstance(ticket, Ticket), result.error
    print(f"retries the model read: {result.messages[2].text.count('Input should be')}")
    print(f"ticket: {ticket.model_dump_json()}")
    sys.exit(0 if result.outcome == "final" else 1)
