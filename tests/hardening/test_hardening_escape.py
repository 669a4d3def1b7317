"""Hardening: whatever a tool, a model or a stage raises, the run ends, every call is answered
once, and the run is unregistered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from loopwright.data.result import RunResult
from loopwright.testing import assert_run_invariants


class Finished:
    """Keeps every result the runner hands its observers (also for runs that re-raise)."""

    def __init__(self) -> None:
        self.results: list[RunResult] = []

    def on_finish(self, result: RunResult) -> None:
        self.results.append(result)


def _raising(exc: BaseException) -> Any:
    @tool
    def bad(x: int) -> int:
        """Raises."""
        raise exc

    return bad


@tool
def ok(x: int) -> int:
    """Echoes x."""
    return x


def _agent(tools: list[Any], script: list[Any], **limits: Any) -> Agent:
    return Agent(
        name="t",
        model=ScriptedModel(script),
        instruction="Test.",
        tools=tools,
        limits=Limits(retry_backoff_s=0, **limits),
    )


@pytest.mark.parametrize(
    "exc",
    [SystemExit(2), GeneratorExit(), asyncio.CancelledError("the tool's own")],
    ids=["SystemExit", "GeneratorExit", "own CancelledError"],
)
@pytest.mark.parametrize("parallel", [False, True], ids=["alone", "beside another call"])
def test_tool_base_exceptions_become_error_results(exc: BaseException, parallel: bool) -> None:
    calls = [ToolCall(name="bad", args={"x": 1})]
    if parallel:
        calls.append(ToolCall(name="ok", args={"x": 2}))
    agent = _agent([_raising(exc), ok], [calls, "done"])
    runner = Runner(agent)
    result = asyncio.run(runner.run("go", run_id="r1"))
    assert result.outcome == "final" and result.output == "done"
    answers = result.messages[2].parts
    assert answers[0].is_error and type(exc).__name__ in str(answers[0].content)
    if parallel:
        assert not answers[1].is_error and answers[1].content == 2
    assert runner.active_runs == []
    assert_run_invariants(result, agent)


@pytest.mark.parametrize("parallel", [False, True], ids=["alone", "beside a slow call"])
def test_keyboard_interrupt_in_a_tool_cancels_the_run_and_is_re_raised(parallel: bool) -> None:
    @tool
    async def sleepy(x: int) -> int:
        """Sleeps long."""
        await asyncio.sleep(30)
        return x

    calls = [ToolCall(name="bad", args={"x": 1})]
    if parallel:
        calls.insert(0, ToolCall(name="sleepy", args={"x": 2}))
    agent = _agent([_raising(KeyboardInterrupt()), sleepy], [calls, "done"])
    seen = Finished()
    runner = Runner(agent, observers=[seen])
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(runner.run("go", run_id="r1"))
    assert runner.active_runs == []
    [result] = seen.results
    assert result.outcome == "cancelled"
    answers = result.messages[2].parts
    assert len(answers) == len(calls) and all(a.is_error for a in answers)
    assert_run_invariants(result, agent)


class _RaisingModel:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def complete(self, request: Any) -> Any:
        raise self.exc


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit()], ids=["SystemExit", "GeneratorExit"])
def test_base_exceptions_from_a_model_end_the_run_failed(exc: BaseException) -> None:
    agent = Agent(name="t", model=_RaisingModel(exc), instruction="Test.")
    runner = Runner(agent)
    result = asyncio.run(runner.run("go", run_id="r1"))
    assert result.outcome == "failed" and result.error is not None
    assert type(exc).__name__ in result.error.message
    assert runner.active_runs == []
    # the id can be used again
    assert asyncio.run(runner.run("go", run_id="r1")).outcome == "failed"


def test_keyboard_interrupt_from_a_model_cancels_the_run_and_is_re_raised() -> None:
    agent = Agent(name="t", model=_RaisingModel(KeyboardInterrupt()), instruction="Test.")
    seen = Finished()
    runner = Runner(agent, observers=[seen])
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(runner.run("go", run_id="r1"))
    assert runner.active_runs == []
    assert [r.outcome for r in seen.results] == ["cancelled"]


def test_an_exception_out_of_a_stage_fails_the_run_answers_its_calls_and_unregisters_it() -> None:
    """A stage of an extension that raises after the model asked for tools: the run fails with
    the error named, the calls are answered, the id is free again."""
    from loopwright.data.stage import Stage
    from loopwright.extend import Extension, Row

    async def exploding(rs: Any, ctx: Any) -> None:
        raise ValueError("kaboom")

    ext = Extension(name="explode", states={"explode": exploding}, redirect={(Stage.POSTPROCESS, Stage.ACT): "explode"},
                    rows=[Row("explode", Stage.ACT)])  # fmt: skip
    agent = _agent([ok], [[ToolCall(name="ok", args={"x": 1})], "done"]).replace(extensions=[ext])
    runner = Runner(agent)
    result = asyncio.run(runner.run("go", run_id="r1"))
    assert result.outcome == "failed" and result.error is not None
    assert "ValueError: kaboom" in result.error.message and "explode" in result.error.message
    assert runner.active_runs == []
    assert result.messages[-1].parts[0].is_error
    assert_run_invariants(result, agent)
