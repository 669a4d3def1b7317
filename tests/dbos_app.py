"""Agents for the DBOS tests, registered for ``loopwright worker --app tests.dbos_app`` and the
in-process tests. Tool executions are logged (``LOOPWRIGHT_TEST_LOG``) by ``tests.store_app``'s
tools, so a parent process counts the executions of workers it kills."""

from __future__ import annotations

import time
from typing import Any

from loopwright import Agent, Limits, RunState, ToolCall
from loopwright.extend import Extension, Rule
from loopwright.integrations.dbos import register
from tests.store_app import by_turn, make_agent, pay, steps_script, work

STEPS = 3
LONG = 40
"""Iterations of the ``long`` agent (the step-size test)."""
CUTOFF = float("inf")
"""When ``past_cutoff`` (the clock-reading guard) starts to hold."""


def past_cutoff(rs: RunState) -> bool:
    """NOT pure on purpose: reads the clock (the determinism test shows replay catches it)."""
    return time.time() > CUTOFF


CLOCK = Extension(
    name="clock_guard",
    rows_before={("postprocess", "act"): [Rule("postprocess", "decide", "past_cutoff")]},
    guards={"past_cutoff": past_cutoff},
)


def steps_agent(steps: int = STEPS, seconds: float = 0.02) -> Agent:
    """``durable``: ``steps`` replies with one ``work`` call each, then a text."""
    return make_agent(steps_script(steps, seconds=seconds))


def pay_agent() -> Agent:
    """``durable``-shaped agent named ``payer``: one payment that needs approval, then a text."""
    script: list[Any] = [[ToolCall(id="p1", name="pay", args={"amount": 500})], "paid"]
    return Agent(name="payer", model=by_turn(script), tools=[work, pay], limits=Limits(retry_backoff_s=0))


def long_agent(steps: int = LONG) -> Agent:
    """``long``: ``steps`` replies with one instant ``work`` call each, then a text."""
    limits = Limits(retry_backoff_s=0, max_iterations=steps + 5)
    return Agent(name="long", model=by_turn(steps_script(steps)), tools=[work], limits=limits)


SLOW_S = 3.0
"""How long the ``mixed`` agent's slow call takes."""


def mixed_agent() -> Agent:
    """``mixed``: one reply of three calls, two instant (``quick-a``, ``quick-b``) and one slow
    (``slow``, ``SLOW_S``), then a text: a worker killed during its act stage has finished two."""
    calls = [
        ToolCall(id=f"c-{label}", name="work", args={"label": label, "seconds": 0.0})
        for label in ("quick-a", "quick-b")
    ]
    calls.append(ToolCall(id="c-slow", name="work", args={"label": "slow", "seconds": SLOW_S}))
    return Agent(name="mixed", model=by_turn([calls, "done"]), tools=[work], limits=Limits(retry_backoff_s=0))


def stuck_agent() -> Agent:
    """``stuck``: one call that takes a minute (a run to cancel while it acts), then a text."""
    calls = [ToolCall(id="c-stuck", name="work", args={"label": "stuck", "seconds": 60.0})]
    return Agent(name="stuck", model=by_turn([calls, "done"]), tools=[work], limits=Limits(retry_backoff_s=0))


def clock_agent() -> Agent:
    model = by_turn(steps_script(2))
    return Agent(name="clocked", model=model, tools=[work], limits=Limits(retry_backoff_s=0), extensions=[CLOCK])


register(steps_agent(), pay_agent(), clock_agent(), long_agent(), mixed_agent(), stuck_agent())
