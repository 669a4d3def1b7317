"""The interpreter, asyncio and pydantic details the hot path relies on, pinned by name, with
the fallback of each tested: an upgrade that changes one fails here, not in a user's run.

What is kept and why (bench/bench_loop.py (a), K=10, this machine; the figure is what taking it
out cost, measured in the same process against the hand loop):

- the runner's fairness probe reads asyncio's own loop's ready queue and timer heap (``_ready``,
  ``_scheduled``, ``TimerHandle._when``) to yield only when another task waits: yielding at
  every transition instead (the fallback, taken on any other loop: uvloop) costs 1.7x;
- :func:`loopwright.data.events.trusted` builds engine-made values through BaseModel's own slots:
  ``model_construct`` instead costs 1.4x;
- a tool's coroutine takes its first step by hand (``send``), so a tool that ends in its first
  step pays for no timeout watch: awaiting every call under a watch costs 5-10%.

CI runs this module on Python 3.11, 3.12 and 3.13 (``.ci/run``).
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from loopwright import Agent, Limits, Runner, RunResult, ScriptedModel, ToolCall, tool
from loopwright.data.events import (
    ErrorInfo,
    Message,
    ModelResponse,
    TextPart,
    ToolResult,
    Usage,
    kept,
    trusted,
)
from loopwright.data.events import ToolCall as EventsToolCall

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _factories() -> list[Any]:
    found: list[Any] = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:  # pragma: no cover - dev installs it
        found.append(pytest.param(None, id="uvloop", marks=pytest.mark.skip(reason="uvloop not installed")))
    else:
        found.append(pytest.param(uvloop.new_event_loop, id="uvloop"))
    return found


def _run_on(factory: LoopFactory, main: Callable[[], Any]) -> Any:
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


# ------------------------------------------------------------------ the fairness probe


def test_asyncios_own_loop_keeps_what_the_fairness_probe_reads() -> None:
    """``_ready`` is a deque of the handles ``call_soon`` makes, in order; ``_scheduled`` a heap
    of ``TimerHandle`` whose ``_when`` is ``when()``; ``time()`` is ``time.monotonic()``."""
    loop = asyncio.new_event_loop()
    try:
        assert type(loop).time is asyncio.BaseEventLoop.time
        before, now, after = time.monotonic(), loop.time(), time.monotonic()
        assert before <= now <= after
        assert isinstance(loop._ready, deque) and not loop._ready  # type: ignore[attr-defined]
        first, second = loop.call_soon(print), loop.call_soon(print)
        assert list(loop._ready) == [first, second]  # type: ignore[attr-defined]
        late, soon = loop.call_later(60, print), loop.call_later(30, print)
        assert loop._scheduled[0] is soon  # type: ignore[attr-defined]
        assert isinstance(soon, asyncio.TimerHandle) and soon._when == soon.when()
        for handle in (first, second, late, soon):
            handle.cancel()
    finally:
        loop.close()


@pytest.mark.parametrize("factory", _factories())
def test_a_task_beside_a_run_that_never_suspends_gets_the_loop(factory: LoopFactory) -> None:
    """On asyncio's loop the probe yields when another task waits (at most every few stages);
    on a loop without its internals (uvloop) the run yields at every transition: either way the
    other task runs all along, and the run ends as it would alone."""

    @tool(blocking=False)
    def inline(n: int) -> int:
        """Returns at once, on the loop."""
        return n

    calls: list[Any] = [[ToolCall(name="inline", args={"n": n})] for n in range(30)]
    agent = Agent(name="busy", model=ScriptedModel([*calls, "done"]), tools=[inline], limits=Limits(max_iterations=40))

    async def main() -> tuple[RunResult, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        result = await Runner(agent).run("go")
        beat.cancel()
        return result, ticks

    result, ticks = _run_on(factory, main)
    assert result.outcome == "final" and result.output == "done"
    transitions = len(result.trace) - 1
    assert ticks >= transitions // 5, f"{ticks} ticks of the other task beside {transitions} transitions"


# ------------------------------------------------------------------ trusted construction


def _samples() -> list[BaseModel]:
    call = EventsToolCall(id="c1", name="add", args={"a": 1})
    return [
        TextPart(text="hi"),
        call,
        ToolResult(call_id="c1", name="add", content={"x": [1, 2]}, is_error=False),
        Message(role="assistant", parts=(TextPart(text="a"), call)),
        Usage(input_tokens=3, output_tokens=4),
        ModelResponse(parts=(TextPart(text="b"),), usage=Usage(output_tokens=1), stop_reason="end_turn"),
        ErrorInfo(kind="model", message="boom"),
    ]


@pytest.mark.parametrize("validated", _samples(), ids=lambda v: type(v).__name__)
def test_a_trusted_instance_is_the_validated_one(validated: BaseModel) -> None:
    """``trusted`` sets BaseModel's own slots (``__dict__``, ``__pydantic_fields_set__``,
    ``__pydantic_extra__``, ``__pydantic_private__``): the instance compares, hashes, dumps,
    copies and pickles exactly as the validated one does."""
    cls = type(validated)
    made = trusted(cls, **dict(validated.__dict__))
    assert made == validated
    try:
        assert hash(made) == hash(validated)
    except TypeError:  # a value that holds a dict is not hashable: neither instance is
        with pytest.raises(TypeError):
            hash(validated)
    assert made.model_dump() == validated.model_dump()
    assert made.model_dump_json() == validated.model_dump_json()
    assert cls.model_validate_json(made.model_dump_json()) == validated
    assert made.model_fields_set == set(cls.model_fields)
    assert pickle.loads(pickle.dumps(made)) == validated
    first = next(iter(cls.model_fields))
    copied = made.model_copy(update={first: getattr(made, first)})
    assert copied == validated and first in copied.model_fields_set
    with pytest.raises(Exception, match="frozen"):
        setattr(made, first, getattr(made, first))


def test_a_kept_reply_shares_its_fields_sets_and_stays_the_same_value() -> None:
    """``kept`` swaps a validated reply's fields sets for shared immutable ones: same value, and
    a copy still gets a fresh mutable set."""
    reply = ModelResponse.model_validate(
        {"parts": [{"type": "text", "text": "x"}], "usage": {"input_tokens": 2}, "stop_reason": "end_turn"}
    )
    before = reply.model_dump()
    same = kept(reply)
    assert same is reply and reply.model_dump() == before
    assert type(reply.__pydantic_fields_set__) is not set
    copy = reply.model_copy(update={"stop_reason": "max_tokens"})
    assert type(copy.__pydantic_fields_set__) is set and "stop_reason" in copy.model_fields_set
    assert copy.stop_reason == "max_tokens" and reply.stop_reason == "end_turn"


# ------------------------------------------------------------------ a tool's first step by hand


@pytest.mark.parametrize("factory", _factories())
def test_a_tool_driven_by_hand_behaves_as_awaited(factory: LoopFactory) -> None:
    """A tool that ends in its first step, one that suspends and returns, one that swallows its
    timeout's cancellation (its value is kept, as under ``asyncio.timeout``, and the run goes on
    uncancelled), one that raises after suspending: each as if simply awaited, in the run's own
    task. Timeouts that cut a tool short are tested in test_user_path on both loops."""
    seen: dict[str, Any] = {}

    @tool
    async def quick(n: int) -> int:
        """Never suspends."""
        return n

    @tool
    async def suspends(n: int) -> int:
        """Suspends, then returns in the run's task."""
        task = asyncio.current_task()
        await asyncio.sleep(0.001)
        seen["same_task"] = asyncio.current_task() is task
        return n * 2

    @tool(timeout_s=0.02)
    async def stubborn() -> str:
        """Swallows the timeout's cancellation and returns."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen["cancelled"] = True
        return "kept going"

    @tool
    async def raises() -> str:
        """Raises after suspending."""
        await asyncio.sleep(0)
        raise ValueError("after a step")

    script: list[Any] = [
        [ToolCall(name="quick", args={"n": 1}), ToolCall(name="suspends", args={"n": 2})],
        [ToolCall(name="stubborn", args={}), ToolCall(name="raises", args={})],
        "done",
    ]
    agent = Agent(name="t", model=ScriptedModel(script), tools=[quick, suspends, stubborn, raises])

    async def main() -> RunResult:
        return await Runner(agent).run("go")

    result = _run_on(factory, main)
    assert result.outcome == "final", result.error
    answers = [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert [(a.content, a.is_error) for a in answers[:2]] == [(1, False), (4, False)]
    assert (answers[2].content, answers[2].is_error) == ("kept going", False)  # as under asyncio.timeout
    assert answers[3].is_error and "ValueError: after a step" in str(answers[3].content)
    assert seen == {"same_task": True, "cancelled": True}
