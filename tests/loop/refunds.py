"""The refund tool the ``agent_tool`` tests share: it needs a person's confirmation and notes
each amount it refunded in ``RAN`` (cleared before each test of a module that imports
``clear_ran``), so a test counts inside the tool what ran and how often."""

from __future__ import annotations

import pytest

from loopwright import tool

RAN: list[int] = []


@tool(requires_confirmation=True)
async def refund(amount: int) -> str:
    """Refund an amount (a person approves it)."""
    RAN.append(amount)
    return f"refunded {amount}"


@pytest.fixture(autouse=True)
def clear_ran() -> None:
    RAN.clear()
