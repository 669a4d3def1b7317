"""Observers watch runs and never break them: one that raises is removed and named on stderr, and the run goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwright import Agent, Runner, RunResult, ToolCall, instrument, uninstrument
from loopwright.extend import Row
from loopwright.loop.runner import Run
from tests.helpers import agent

SCRIPT: list[Any] = [[ToolCall(name="add", args={"a": 1, "b": 2})], "three"]


def _agent() -> Agent:
    return agent(list(SCRIPT))


class Broken:
    """An observer with one hook, ``hook``, that raises (its calls are counted)."""

    def __init__(self, hook: str) -> None:
        self.calls = 0

        def fail(*args: Any) -> None:
            self.calls += 1
            raise RuntimeError("observer on fire")

        fail.__name__ = hook
        setattr(self, hook, fail)


class Recorder:
    """An observer that keeps what it sees."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.traces: list[list[str]] = []
        self.events: list[Any] = []
        self.finished: list[RunResult] = []

    def on_transition(self, run: Run, row: Row) -> None:
        self.rows.append(row)
        self.traces.append(list(run.state.trace))

    def on_event(self, event: Any) -> None:
        self.events.append(event)

    def on_finish(self, result: RunResult) -> None:
        self.finished.append(result)


def test_a_sink_that_raises_is_removed_and_the_run_ends(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[Any] = []

    def sink(event: Any) -> None:
        calls.append(event)
        raise ValueError("sink is full")

    async def scenario() -> tuple[Runner, RunResult]:
        runner = Runner(_agent())
        run = runner.start("add", sink=sink)
        return runner, await run.run_to_end()

    runner, result = asyncio.run(scenario())
    assert result.outcome == "final" and result.output == "three"
    assert runner.active_runs == []
    assert len(calls) == 1 and calls[0].type == "run_started"
    err = capsys.readouterr().err
    assert "loopwright: observer EventSink" in err
    assert "sink raised ValueError: sink is full; it was removed" in err


@pytest.mark.parametrize("hook", ["on_event", "on_transition", "on_finish"])
def test_a_runner_observer_that_raises_is_removed_after_its_first_failure(
    hook: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = Broken(hook)
    runner = Runner(_agent(), observers=[broken])
    assert broken in runner.observers
    result = runner.run_sync("add")
    assert result.outcome == "final" and result.output == "three"
    assert runner.active_runs == []
    assert broken.calls == 1 and broken not in runner.observers
    assert f"observer Broken.{hook} raised RuntimeError: observer on fire; it was removed" in capsys.readouterr().err
    again = runner.run_sync("add", after=result)  # gone for good: the next run does not call it
    assert again.outcome in ("final", "failed") and broken.calls == 1


def test_a_raising_observer_does_not_stop_the_others() -> None:
    broken, recorder = Broken("on_event"), Recorder()
    result = Runner(_agent(), observers=[broken, recorder]).run_sync("add")
    assert result.outcome == "final"
    assert [e.seq for e in recorder.events] == [e.seq for e in result.events]
    assert len(recorder.finished) == 1


def test_transition_observers_see_every_row_of_the_trace_in_order() -> None:
    recorder = Recorder()
    result = Runner(_agent(), observers=[recorder]).run_sync("add")
    assert result.outcome == "final"
    assert [r.dest for r in recorder.rows] == result.trace[1:]
    assert [r.source for r in recorder.rows] == result.trace[:-1]
    assert recorder.traces == [result.trace[: i + 2] for i in range(len(recorder.rows))]
    assert recorder.rows[-1].outcome == "final"


def test_on_finish_gets_the_run_result() -> None:
    recorder = Recorder()
    runner = Runner(_agent(), observers=[recorder])
    result = runner.run_sync("add", run_id="r1")
    (finished,) = recorder.finished
    assert isinstance(finished, RunResult)
    assert finished.run_id == "r1" and finished.outcome == "final" and finished.output == "three"
    assert finished.trace == result.trace and finished.messages == result.messages


def test_an_object_with_no_hook_is_not_an_observer() -> None:
    with pytest.raises(TypeError, match="is not an observer"):
        Runner(_agent(), observers=[object()])


def test_instrument_watches_every_runner_until_uninstrumented() -> None:
    recorder = Recorder()
    instrument(recorder)
    try:
        first = Runner(_agent()).run_sync("add")
        second = Runner(_agent()).run_sync("add")
        assert [r.run_id for r in recorder.finished] == [first.run_id, second.run_id]
        assert len(recorder.rows) == len(first.trace) - 1 + len(second.trace) - 1
        assert {e.run_id for e in recorder.events} == {first.run_id, second.run_id}
    finally:
        uninstrument(recorder)
    Runner(_agent()).run_sync("add")
    assert len(recorder.finished) == 2


def test_a_raising_instrument_is_uninstrumented(capsys: pytest.CaptureFixture[str]) -> None:
    broken = Broken("on_transition")
    instrument(broken)
    try:
        assert Runner(_agent()).run_sync("add").outcome == "final"
        assert Runner(_agent()).run_sync("add").outcome == "final"
        assert broken.calls == 1
        assert "observer Broken.on_transition raised RuntimeError" in capsys.readouterr().err
    finally:
        uninstrument(broken)
