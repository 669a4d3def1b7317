"""Properties under hostile tools and models: whatever the tools raise or return and whatever
the model sends (duplicate ids, very wide replies, malformed replies, transient exceptions),
nothing escapes but a KeyboardInterrupt (after the run ended cancelled), no run is left
registered, every call is answered exactly once, and every budget holds.

The suite runs ``LOOPWRIGHT_HARDENING_EXAMPLES`` examples (default 60); the long run is
``LOOPWRIGHT_HARDENING_EXAMPLES=100000 python -m pytest -q -s -p no:randomly``
``tests/hardening/test_hardening_properties.py``.
With ``LOOPWRIGHT_HARDENING_FIGURES=path`` the figures so far are written there (JSON, with the
seconds since the module was loaded) every 1,000 runs, so a long run stopped early still says
exactly what ran.
"""

from __future__ import annotations

import json
import os
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Limits, Runner
from loopwright.data.result import RunResult
from loopwright.testing import HostileModel, assert_run_invariants, hostile_replies, hostile_tools

EXAMPLES = int(os.environ.get("LOOPWRIGHT_HARDENING_EXAMPLES", "60"))
FIGURES: dict[str, int] = {"runs": 0, "interrupted": 0, "executions": 0, "calls": 0}
PROGRESS = os.environ.get("LOOPWRIGHT_HARDENING_FIGURES")
STARTED = time.monotonic()


class Finished:
    def __init__(self) -> None:
        self.results: list[RunResult] = []

    def on_finish(self, result: RunResult) -> None:
        self.results.append(result)


budgets = st.builds(
    Limits,
    max_iterations=st.integers(1, 5),
    max_tool_calls=st.none() | st.integers(1, 8),
    max_total_tokens=st.none() | st.integers(1, 300),
    max_model_retries=st.integers(0, 2),
    retry_backoff_s=st.just(0.0),
    salvage=st.booleans(),
    max_tool_result_chars=st.sampled_from([None, 50, 100_000]),
)


RAN: ContextVar[list[str]] = ContextVar("ran")


class _Ran(list[str]):
    """Where the shared hostile tools record what ran: the list of the example they run in (a
    context variable, which reaches sync tools' threads too, so a thread an earlier example
    left running records there, not here)."""

    def append(self, kind: str) -> None:
        RAN.get().append(kind)


TOOLS = {interrupt: hostile_tools(_Ran(), keyboard_interrupt=interrupt) for interrupt in (False, True)}
"""The hostile tools, made once (a tool builds a pydantic model of its arguments: ~1 ms each)."""


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(script=hostile_replies(), limits=budgets, interrupt=st.booleans())
def test_hostile_tools_and_models_never_escape_and_every_call_runs_at_most_once(
    script: list[Any], limits: Limits, interrupt: bool
) -> None:
    executions: list[str] = []
    RAN.set(executions)
    model = HostileModel(script)
    agent = Agent(name="hostile", model=model, instruction="T.", tools=TOOLS[interrupt], limits=limits)
    seen = Finished()
    runner = Runner(agent, observers=[seen])
    interrupted = False
    try:
        runner.run_sync("go")  # the result stays out of asyncio's main task (never formatted)
    except KeyboardInterrupt:
        interrupted = True
    assert runner.active_runs == []
    [result] = seen.results
    assert_run_invariants(result, agent)
    if interrupted:
        assert result.outcome == "cancelled" and "keyboard_interrupt" in executions
    else:
        assert result.outcome in ("final", "salvaged", "limit", "failed")
    # every call runs at most once, and only within the tool-call budget
    assert len(executions) <= result.tool_calls
    if limits.max_tool_calls is not None:
        assert result.tool_calls <= limits.max_tool_calls
    # model calls: each pass, its retries, and one salvage call
    assert model.calls <= limits.max_iterations * (1 + limits.max_model_retries) + 1
    assert result.iterations <= limits.max_iterations
    answered = [p for m in result.messages for p in m.parts if p.type == "tool_result"]
    called = [p for m in result.messages for p in m.parts if p.type == "tool_call"]
    assert sorted(a.call_id for a in answered) == sorted(c.id for c in called)
    assert len({c.id for c in called}) == len(called)
    if limits.max_tool_result_chars is not None:
        cap = limits.max_tool_result_chars + 200
        assert all(len(str(a.content)) <= max(cap, 1000) for a in answered if not a.is_error)
    FIGURES["runs"] += 1
    FIGURES["interrupted"] += interrupted
    FIGURES["executions"] += len(executions)
    FIGURES["calls"] += len(called)
    if PROGRESS and FIGURES["runs"] % 1000 == 0:
        _write_figures()


def _write_figures() -> None:
    assert PROGRESS is not None
    Path(PROGRESS).write_text(json.dumps({**FIGURES, "seconds": round(time.monotonic() - STARTED, 1)}) + "\n")


def teardown_module() -> None:
    print(f"\nhostile runs: {FIGURES}")
    if PROGRESS:
        _write_figures()
