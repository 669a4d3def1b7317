"""A run whose model and tools never suspend still lets the event loop run: cancel, timeouts, other tasks land."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, RunResult, ScriptedModel, Tool, ToolCall
from tests.helpers import add as threaded_add

add = Tool(threaded_add.fn, blocking=False)  # inline on the loop: it never suspends


def looping(request: ModelRequest) -> ModelResponse:
    """Always one more (synchronous) tool call; the reply never awaits anything."""
    n = len(request.messages)
    return ModelResponse(parts=(ToolCall(id=f"c{n}", name="add", args={"a": n, "b": 1}),), stop_reason="tool_use")


def _agent(**limits: Any) -> Agent:
    return Agent(name="busy", model=ScriptedModel(looping), tools=[add], limits=Limits(retry_backoff_s=0, **limits))


def test_the_model_and_tool_never_suspend() -> None:
    """The premise: a pass of this agent's model and tool completes without giving up the loop."""

    async def scenario() -> None:
        reply = ScriptedModel(looping).complete(ModelRequest(messages=[]))
        try:
            reply.send(None)
        except StopIteration as done:
            assert isinstance(done.value, ModelResponse)
        else:  # pragma: no cover - it suspended
            raise AssertionError("the model suspended")
        assert not add.is_async and not add.blocking

    asyncio.run(scenario())


def test_cancel_from_another_task_lands_within_a_few_transitions() -> None:
    async def scenario() -> tuple[RunResult, bool]:
        runner = Runner(_agent(max_iterations=1000))
        task = asyncio.create_task(runner.run("loop", run_id="busy"))

        async def cancel() -> bool:
            await asyncio.sleep(0)
            return runner.cancel("busy")

        accepted = await asyncio.create_task(cancel())
        return await asyncio.wait_for(task, 10), accepted

    result, accepted = asyncio.run(scenario())
    assert accepted
    assert result.outcome == "cancelled"
    assert len(result.trace) < 20, f"{len(result.trace)} transitions before the cancel landed"


class Ticker:
    """Another task: counts its turns on the event loop until stopped."""

    def __init__(self) -> None:
        self.ticks = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            self.ticks += 1
            await asyncio.sleep(0)


def test_other_tasks_get_to_run_while_the_run_goes() -> None:
    at_finish: list[int] = []
    ticker = Ticker()

    class AtFinish:
        def on_finish(self, result: RunResult) -> None:
            at_finish.append(ticker.ticks)

    async def scenario() -> RunResult:
        runner = Runner(_agent(max_iterations=300, salvage=False), observers=[AtFinish()])
        run = asyncio.create_task(runner.run("loop"))
        counting = asyncio.create_task(ticker.run())
        try:
            return await asyncio.wait_for(run, 10)
        finally:
            ticker.stop.set()
            await counting

    result = asyncio.run(scenario())
    assert result.outcome == "limit" and result.limit == "max_iterations"
    assert at_finish and at_finish[0] > 0, "the ticker never ran while the run went"


def test_a_timeout_ends_a_never_suspending_run_promptly() -> None:
    async def scenario() -> RunResult:
        return await asyncio.wait_for(Runner(_agent(max_iterations=10**9, timeout_s=0.05)).run("loop"), 10)

    started = time.perf_counter()
    result = asyncio.run(scenario())
    elapsed = time.perf_counter() - started
    # the salvage call (the looping model answers it with a tool call, which salvage drops)
    assert result.limit == "timeout_s" and result.outcome == "salvaged"
    assert elapsed < 2, f"the run took {elapsed:.2f}s with timeout_s=0.05"


def test_a_waiting_task_runs_within_one_iteration_of_a_never_suspending_run() -> None:
    """The bound itself: while another task is ready, a run that never suspends takes at most
    ``_HOLD`` + 1 transitions before that task runs (one loop iteration is five)."""
    from loopwright.loop.run import HOLD as _HOLD

    ticker = Ticker()
    streaks: list[int] = []

    class Streaks:
        def __init__(self) -> None:
            self.last, self.streak = -1, 0

        def on_transition(self, run: Any, row: Any) -> None:
            if ticker.ticks == self.last:
                self.streak += 1
            else:
                streaks.append(self.streak)
                self.last, self.streak = ticker.ticks, 1

    async def scenario() -> None:
        counting = asyncio.create_task(ticker.run())
        await asyncio.sleep(0)
        try:
            await Runner(_agent(max_iterations=60, salvage=False), observers=[Streaks()]).run("loop")
        finally:
            ticker.stop.set()
            await counting

    asyncio.run(scenario())
    assert len(streaks) > 20
    assert max(streaks) <= _HOLD + 1, streaks


def test_runs_that_suspend_anyway_pay_no_extra_round_trips() -> None:
    """Many runs whose model call suspends (a real model's does): the engine adds at most one
    yield of its own per iteration (it used to yield before every stage while any other run
    was ready: five round trips of the event loop per iteration)."""
    import loopwright.loop.runner as runner_module

    yields = 0
    real_sleep = asyncio.sleep

    async def counting_sleep(delay: float, result: Any = None) -> Any:
        nonlocal yields
        if delay == 0:
            yields += 1
        return await real_sleep(delay, result)

    class Slow(ScriptedModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await real_sleep(0.001)
            return await super().complete(request)

    def script(request: ModelRequest) -> ModelResponse:
        n = len(request.messages)
        if n > 8:
            return ModelResponse(parts=(), stop_reason="end_turn")
        return looping(request)

    async def scenario() -> list[RunResult]:
        runner = Runner(Agent(name="slow", model=Slow(script), tools=[add], limits=Limits(max_iterations=10)))
        return await asyncio.gather(*(runner.run("go") for _ in range(50)))

    original = runner_module.asyncio.sleep
    runner_module.asyncio.sleep = counting_sleep  # type: ignore[assignment]
    try:
        results = asyncio.run(scenario())
    finally:
        runner_module.asyncio.sleep = original  # type: ignore[assignment]
    iterations = sum(r.iterations for r in results)
    assert all(r.outcome == "final" for r in results), {r.outcome for r in results}
    assert yields <= iterations, f"{yields} yields in {iterations} iterations"
