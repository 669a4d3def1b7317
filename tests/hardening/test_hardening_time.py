"""Hardening: every wall-clock budget has a finite default; sync tools run off the loop with
timeouts that hold; a timed-out thread never blocks fresh calls; a stuck model call times out."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from loopwright.testing import assert_run_invariants

T = TypeVar("T")


def test_every_wall_clock_budget_has_a_finite_default() -> None:
    limits = Limits()
    for name in ("timeout_s", "tool_timeout_s", "model_timeout_s"):
        assert isinstance(getattr(limits, name), float), name
    lifted = Limits(timeout_s=None, tool_timeout_s=None, model_timeout_s=None)
    assert lifted.timeout_s is None and lifted.tool_timeout_s is None and lifted.model_timeout_s is None


def _agent(tools: list[Any], script: list[Any], **limits: Any) -> Agent:
    return Agent(
        name="t", model=ScriptedModel(script), instruction="T.", tools=tools, limits=Limits(retry_backoff_s=0, **limits)
    )


def test_a_blocking_sync_tool_times_out_and_does_not_stall_the_loop() -> None:
    release = threading.Event()

    @tool
    def stuck(x: int) -> int:
        """Blocks."""
        release.wait(5)
        return x

    agent = _agent([stuck], [[ToolCall(name="stuck", args={"x": 1})], "done"], tool_timeout_s=0.2)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def main() -> Any:
        task = asyncio.create_task(ticker())
        started = time.perf_counter()
        result = await Runner(agent).run("go")
        task.cancel()
        return result, time.perf_counter() - started

    try:
        result, took = asyncio.run(main())
    finally:
        release.set()
    assert took < 2
    assert ticks > 5  # the loop kept running while the tool blocked
    [answer] = result.messages[2].parts
    assert answer.is_error and "timed out after 0.2 s" in answer.content and "may still complete" in answer.content
    assert_run_invariants(result, agent)


def test_timed_out_threads_never_block_a_fresh_call(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    @tool
    def stuck(x: int) -> int:
        """Blocks."""
        release.wait(10)
        return x

    @tool
    def instant(x: int) -> int:
        """Returns at once."""
        return x * 10

    stuck_calls = [ToolCall(name="stuck", args={"x": i}) for i in range(40)]
    agent = _agent(
        [stuck, instant],
        [stuck_calls, [ToolCall(name="instant", args={"x": 4})], "done"],
        tool_timeout_s=0.3,
    )
    try:
        result = Runner(agent).run_sync("go")
        assert all("timed out" in a.content for a in result.messages[2].parts)
        [answer] = result.messages[4].parts
        assert not answer.is_error and answer.content == 40
        with caplog.at_level(logging.WARNING, logger="loopwright"):
            release.set()
            deadline = time.time() + 5
            while (
                time.time() < deadline and sum("finished after it timed out" in r.message for r in caplog.records) < 40
            ):
                time.sleep(0.05)
    finally:
        release.set()
    late = [r.message for r in caplog.records if "finished after it timed out" in r.message]
    assert len(late) >= 40 and "'stuck'" in late[0]


def test_blocking_false_keeps_a_sync_tool_on_the_loop() -> None:
    seen: list[str] = []

    @tool(blocking=False)
    def where(x: int) -> int:
        """Says which thread ran it."""
        seen.append(threading.current_thread().name)
        return x

    @tool
    def default(x: int) -> int:
        """Says which thread ran it."""
        seen.append(threading.current_thread().name)
        return x

    calls = [ToolCall(name="where", args={"x": 1}), ToolCall(name="default", args={"x": 2})]
    Runner(_agent([where, default], [calls, "done"])).run_sync("go")
    assert seen[0] == threading.main_thread().name and seen[1] != threading.main_thread().name


class _StuckModel:
    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(60)


def test_a_stuck_model_call_times_out_and_is_retried() -> None:
    model = _StuckModel()
    agent = Agent(
        name="m",
        model=model,
        instruction="T.",
        limits=Limits(model_timeout_s=0.1, max_model_retries=1, retry_backoff_s=0),
    )
    started = time.perf_counter()
    result = Runner(agent).run_sync("go")
    assert time.perf_counter() - started < 2
    assert model.calls == 2
    assert result.outcome == "failed" and result.error is not None
    assert "model_timeout_s=0.1" in result.error.message


def test_the_run_deadline_still_cuts_a_stage_short() -> None:
    @tool
    async def sleepy(x: int) -> int:
        """Sleeps."""
        await asyncio.sleep(10)
        return x

    agent = _agent([sleepy], [[ToolCall(name="sleepy", args={"x": 1})], "done"], timeout_s=0.2, salvage=False)
    started = time.perf_counter()
    result = Runner(agent).run_sync("go")
    assert time.perf_counter() - started < 2
    assert result.outcome == "limit" and result.limit == "timeout_s"
    assert_run_invariants(result, agent)


class Expired(TimeoutError):
    """The watch's time ran out (not a TimeoutError the awaited code raised itself)."""


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """``await awaitable`` bounded by a watch, used the way the model call and a tool call use
    it (``loopwright.data.limits.watch``'s docstring)."""
    from loopwright.data.limits import watch

    bound = watch(seconds)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if bound.expired():
            raise Expired(f"timed out after {seconds:g} s") from None
        raise
    finally:
        bound.close()


@pytest.mark.parametrize("coarse", [True, False], ids=["shared watch", "own timer"])
def test_a_watch_keeps_time_and_tells_its_timeout_from_a_cancellation(
    coarse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopwright.data import limits as limits_module

    monkeypatch.setattr(limits_module, "COARSE_FROM_S", 0.0 if coarse else 100.0)

    async def main() -> None:
        started = time.perf_counter()
        with pytest.raises(Expired):
            await within(0.1, asyncio.sleep(5))
        assert time.perf_counter() - started < 1
        assert await within(5, asyncio.sleep(0, "done")) == "done"
        with pytest.raises(TimeoutError) as own:  # the awaited code's own TimeoutError is not Expired
            await within(5, _raise(TimeoutError("mine")))
        assert not isinstance(own.value, Expired)
        task = asyncio.create_task(within(5, asyncio.sleep(5)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0

    asyncio.run(main())


async def _raise(exc: BaseException) -> None:
    raise exc


def test_a_run_out_of_time_reaches_salvage_in_the_time_kept_for_it() -> None:
    calls = 0

    async def reply(request: Any) -> Any:
        from loopwright import ModelResponse, TextPart

        nonlocal calls
        calls += 1
        if calls > 1:  # the salvage call
            return ModelResponse(parts=(TextPart(text="best guess"),), stop_reason="end_turn")
        await asyncio.sleep(10)
        raise AssertionError("not reached")

    agent = Agent(name="s", model=ScriptedModel(reply), instruction="T.", limits=Limits(timeout_s=0.4))
    started = time.perf_counter()
    result = Runner(agent).run_sync("go")
    took = time.perf_counter() - started
    assert result.outcome == "salvaged" and result.output == "best guess" and result.limit == "timeout_s"
    assert took < 0.6
    assert Limits(timeout_s=0.4).salvage_reserve == pytest.approx(0.1)
    assert Limits(timeout_s=1800).salvage_reserve == 30.0 and Limits(salvage=False).salvage_reserve == 0.0


@pytest.mark.slow
def test_a_salvage_call_that_hangs_is_cut_at_the_run_deadline() -> None:
    async def hang(request: Any) -> Any:
        await asyncio.sleep(10)

    agent = Agent(name="s", model=ScriptedModel(hang), instruction="T.", limits=Limits(timeout_s=0.4))
    started = time.perf_counter()
    result = Runner(agent).run_sync("go")
    assert time.perf_counter() - started < 0.7
    assert result.outcome == "limit" and result.limit == "timeout_s"
