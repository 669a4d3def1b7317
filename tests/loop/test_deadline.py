"""The run's deadline (``timeout_s``) is one timer per run, not one per stage: it costs the hot
path nothing per transition, cuts the stage in progress short, survives code that swallows the
cancellation, and is gone when the run ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

import loopwright.data.limits as limits
from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, ToolCall, tool
from tests.helpers import agent


def test_the_timers_a_run_arms_do_not_grow_with_its_length() -> None:
    """The deadline is one timer per run (the per-call time limits share one watch per loop):
    a 21-pass run arms no more timers than a 2-pass run."""

    def armed(passes: int) -> int:
        count: list[float] = []

        async def main() -> Any:
            loop = asyncio.get_running_loop()
            real = loop.call_at

            def counting(when: float, callback: Any, *args: Any, **kw: Any) -> Any:
                count.append(when)
                return real(when, callback, *args, **kw)

            loop.call_at = counting  # type: ignore[method-assign]
            calls = [[ToolCall(name="add", args={"a": i, "b": 1})] for i in range(passes - 1)]
            return await Runner(agent([*calls, "sum"], timeout_s=60, max_iterations=30)).run("go")

        result = asyncio.run(main())
        assert result.outcome == "final" and result.iterations == passes
        return len(count)

    short, long = armed(2), armed(21)
    assert long == short <= 2  # 100+ transitions, as few timers as one pass


def test_a_tool_that_swallows_the_cancellation_still_ends_the_run_at_its_deadline() -> None:
    @tool
    async def stubborn() -> str:
        """Ignores cancellation."""
        with contextlib.suppress(asyncio.CancelledError):  # swallowed: the engine must take its deadline back
            await asyncio.sleep(5)
        await asyncio.sleep(0.01)  # a later await is not cancelled again
        return "finished anyway"

    async def main() -> tuple[Any, int]:
        a = agent([[ToolCall(name="stubborn")], "x"], tools=[stubborn], timeout_s=0.1)
        result = await Runner(a).run("go")
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    started = time.perf_counter()
    result, cancelling = asyncio.run(main())
    assert time.perf_counter() - started < 2
    assert cancelling == 0  # no cancellation left pending on the caller's task
    assert result.outcome in ("salvaged", "limit") and result.limit == "timeout_s"  # salvage gets its reserve


def test_the_timer_is_disarmed_when_the_run_ends() -> None:
    """Near (its own timer) or far (its place in the loop's shared watch, whose tick then stops)."""

    async def main(timeout_s: float) -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        await Runner(agent(["hi"], timeout_s=timeout_s)).run("go")
        shared = getattr(loop, "_loopwright_watch", None)
        tick = shared.handle if shared is not None else None
        armed = sum(1 for h in loop._scheduled if not h.cancelled() and h is not tick)  # type: ignore[attr-defined]
        return armed, len(shared.live) if shared is not None else 0

    assert asyncio.run(main(3600)) == (0, 0)
    assert asyncio.run(main(1.5)) == (0, 0)


def test_the_default_deadline_arms_no_timer_of_its_own() -> None:
    """A run with the default ``timeout_s`` (30 minutes) joins the loop's shared watch: no timer
    armed and cancelled per run (issue 38: 5.9 us of a K=1 run's 88)."""

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        real, armed = loop.call_at, []

        def counting(when: float, callback: Any, *args: Any, **kw: Any) -> Any:
            armed.append(getattr(callback, "__name__", callback))
            return real(when, callback, *args, **kw)

        loop.call_at = counting  # type: ignore[method-assign]
        result = await Runner(agent(["hi"])).run("go")
        assert result.outcome == "final"
        return armed

    assert "_deadline_passed" not in asyncio.run(main())


def test_a_model_call_that_hangs_past_the_deadline_ends_the_run_through_the_shared_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared watch (made to watch a 0.2 s deadline here, ticking every 20 ms) cancels a
    model call stuck in an await: the run ends ``timeout_s``, the caller's task not left cancelled."""
    monkeypatch.setattr(limits, "COARSE_FROM_S", 0.1)
    monkeypatch.setattr(limits, "TICK_S", 0.02)
    never = asyncio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        await never.wait()
        raise AssertionError("unreachable")

    async def main() -> tuple[Any, int, list[Any]]:
        limits_ = Limits(timeout_s=0.2, salvage=False, model_timeout_s=None)
        runner = Runner(Agent(name="t", model=ScriptedModel(hang), limits=limits_))
        run = runner.start("go")
        result = await asyncio.wait_for(run.run_to_end(), 30)  # (a deadline that never fires: a failure, not a hang)
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling(), [type(t).__name__ for t in [run._timer]]

    result, cancelling, timers = asyncio.run(main())
    assert result.outcome == "limit" and result.limit == "timeout_s", (result.outcome, result.error)
    assert cancelling == 0 and timers == ["NoneType"]


def test_cancel_and_deadline_together_end_the_run_cancelled_without_a_stray_cancellation() -> None:
    async def hang(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(10)
        raise AssertionError("unreachable")

    async def main() -> tuple[Any, int]:
        runner = Runner(Agent(name="t", model=ScriptedModel(hang), limits=Limits(timeout_s=0.05)))
        handle = runner.start("go", run_id="both")

        async def cancel_at_the_deadline() -> None:
            await asyncio.sleep(0.05)
            runner.cancel("both")

        asyncio.get_running_loop().create_task(cancel_at_the_deadline())
        result = await handle.run_to_end()
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    result, cancelling = asyncio.run(main())
    assert cancelling == 0
    assert result.outcome in ("cancelled", "limit")
