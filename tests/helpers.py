"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from loopwright import Agent, Limits, ScriptedModel, tool
from loopwright.data.events import Event

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@tool
def boom(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


def agent(script: Any, *, tools: Any = (add, slow, boom), **limits: Any) -> Agent:
    limits.setdefault("retry_backoff_s", 0)
    return Agent(name="tester", model=ScriptedModel(script), instruction="Test.", tools=tools, limits=Limits(**limits))
