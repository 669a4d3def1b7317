"""The fairness probe on any event loop (issue 38, item 5): on a loop that is not asyncio's own
(uvloop), a run that never suspends lets the loop run within ``HOLD`` + 1 stages — not at every
transition, which made uvloop slower than asyncio's loop per iteration."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import loopwright.loop.run as run_module
from loopwright import Agent, Limits, Runner, RunResult, ScriptedModel, ToolCall, tool

uvloop = pytest.importorskip("uvloop")


@tool(blocking=False)
def inline(n: int) -> int:
    """Returns at once, on the loop."""
    return n


def _yields_of_a_lone_run(factory: Any, monkeypatch: pytest.MonkeyPatch, k: int = 20) -> tuple[int, RunResult]:
    """(yields, result) of a run of ``k`` tool calls that never suspends, alone on the loop ``factory`` makes."""
    calls: list[Any] = [[ToolCall(id=f"c{n}", name="inline", args={"n": n})] for n in range(k)]
    model = ScriptedModel([*calls, "done"])
    agent = Agent(name="busy", model=model, tools=[inline], limits=Limits(max_iterations=k + 10))
    monkeypatch.setattr(run_module, "SLICE_S", float("inf"))  # the time-based yield off: yields are the probe's
    yields = 0
    sleep = asyncio.sleep

    async def counted(delay: float, result: Any = None) -> Any:
        nonlocal yields
        yields += delay == 0
        return await sleep(delay, result)

    monkeypatch.setattr(asyncio, "sleep", counted)
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(Runner(agent).run("go"))
    assert result.outcome == "final" and result.output == "done"
    return yields, result


@pytest.mark.parametrize("factory", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_a_lone_run_yields_at_most_once_in_hold_plus_one_stages(factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    yields, result = _yields_of_a_lone_run(factory, monkeypatch)
    transitions = len(result.trace) - 1
    assert yields <= transitions // (run_module.HOLD + 1) + 1, f"{yields} yields in {transitions} transitions"


YIELDS_K10 = {"asyncio": 0, "uvloop": 10}
"""Yields of a lone K=10 run that never suspends (the peers workload, the model and the tool answering at
once): none on asyncio's own loop (nothing else waits, which it can see); on uvloop, whose line of ready
callbacks cannot be seen, one each ``HOLD`` + 1 stages (the probe's own marker still waits): one an
iteration. A change that makes the probe yield more (at every transition: 54) or less fails here."""


@pytest.mark.parametrize("factory", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_the_yields_of_a_k10_run_are_pinned(factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    yields, result = _yields_of_a_lone_run(factory, monkeypatch, k=10)
    assert result.outcome == "final" and result.iterations == 11
    name = "uvloop" if factory is uvloop.new_event_loop else "asyncio"
    assert yields == YIELDS_K10[name], f"{yields} yields in a K=10 run on {name} ({len(result.trace) - 1} transitions)"
