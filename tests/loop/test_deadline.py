"""The run's deadline (``timeout_s``) is one timer per run, not one per stage: it costs the hot
path nothing per transition, cuts the stage in progress short, survives code that swallows the
cancellation, and is gone when the run ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

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
    async def main() -> int:
        loop = asyncio.get_running_loop()
        await Runner(agent(["hi"], timeout_s=3600)).run("go")
        return sum(1 for h in loop._scheduled if not h.cancelled())  # type: ignore[attr-defined]

    assert asyncio.run(main()) == 0


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
