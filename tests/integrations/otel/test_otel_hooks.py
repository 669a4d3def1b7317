"""The observer hooks tracing builds on: on_start gives a run its own observer, tool_scope wraps
each call in its own task, and neither can break a run."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import pytest

from loopwright import Agent, Runner, ToolCall, instrument, tool, uninstrument
from loopwright.models.scripted import ScriptedModel, to_response

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="none")


@tool
async def whoami(tag: str) -> str:
    """Report the scope the call runs in."""
    return f"{tag}:{CURRENT.get()}"


def agent() -> Agent:
    calls = [ToolCall(id=f"c{i}", name="whoami", args={"tag": f"t{i}"}) for i in range(3)]
    return Agent(name="scoped", tools=[whoami], model=ScriptedModel([calls, [calls[0]], "done"]))


class PerRun:
    def __init__(self) -> None:
        self.rows: list[str] = []
        self.events: list[str] = []
        self.finished: list[str] = []

    def on_transition(self, run: Any, row: Any) -> None:
        self.rows.append(f"{row.source}->{row.dest}")

    def on_event(self, event: Any) -> None:
        self.events.append(event.type)

    def on_finish(self, result: Any) -> None:
        self.finished.append(result.outcome)

    @contextlib.contextmanager
    def tool_scope(self, call: ToolCall) -> Iterator[None]:
        token = CURRENT.set(call.id)
        try:
            yield
        finally:
            CURRENT.reset(token)


class Starter:
    def __init__(self, only: str | None = None) -> None:
        self.only = only
        self.made: list[PerRun] = []

    def on_start(self, run: Any) -> PerRun | None:
        if self.only is not None and run.state.input != self.only:
            return None
        self.made.append(PerRun())
        return self.made[-1]


def test_on_start_gives_a_run_its_own_observer_and_tool_scopes_wrap_each_call() -> None:
    starter = Starter(only="watch me")
    runner = Runner(agent(), observers=[starter])
    result = runner.run_sync("watch me")
    assert Runner(agent(), observers=[starter]).run_sync("not me").outcome == "final"
    assert len(starter.made) == 1  # the other run was not watched
    seen = starter.made[0]
    assert seen.finished == ["final"]
    assert seen.rows[0] == "start->preprocess" and seen.rows[-1] == "decide->done"
    assert seen.events[0] == "run_started" and seen.events[-1] == "run_finished"
    # each call ran inside its own scope, concurrent ones (three) and a lone one alike
    answers = [p.content for m in result.messages if m.role == "user" for p in m.parts if hasattr(p, "content")]
    assert answers[:3] == ["t0:c0", "t1:c1", "t2:c2"]
    assert answers[3].startswith("t0:c0_")  # the script reuses the id c0: the later call gets a fresh one
    assert CURRENT.get() == "none"


def test_a_global_on_start_observer_that_raises_is_removed_and_the_run_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class Broken:
        calls = 0

        def on_start(self, run: Any) -> None:
            Broken.calls += 1
            raise RuntimeError("no tracer today")

    broken = Broken()
    instrument(broken)
    try:
        assert Runner(agent()).run_sync("a").outcome == "final"
        assert Runner(agent()).run_sync("b").outcome == "final"
    finally:
        uninstrument(broken)
    assert Broken.calls == 1
    assert "observer Broken.on_start raised RuntimeError: no tracer today; it was removed" in capsys.readouterr().err


def test_a_tool_scope_that_raises_is_skipped_and_the_call_still_runs(capsys: pytest.CaptureFixture[str]) -> None:
    class BadScope(PerRun):
        def tool_scope(self, call: ToolCall) -> Any:
            raise RuntimeError("scope on fire")

    class Start:
        def on_start(self, run: Any) -> BadScope:
            return BadScope()

    result = Runner(agent(), observers=[Start()]).run_sync("go")
    assert result.outcome == "final"
    answers = [p.content for m in result.messages if m.role == "user" for p in m.parts if hasattr(p, "content")]
    assert answers == ["t0:none", "t1:none", "t2:none", "t0:none"]
    assert "scope on fire; skipped" in capsys.readouterr().err


def test_a_model_scope_wraps_each_model_call() -> None:
    seen: list[str] = []

    def reply(request: Any) -> Any:
        seen.append(CURRENT.get())
        return to_response("done")

    class ModelScoped(PerRun):
        @contextlib.contextmanager
        def model_scope(self, request: Any) -> Iterator[None]:
            token = CURRENT.set(f"model:{len(request.messages)}")
            try:
                yield
            finally:
                CURRENT.reset(token)

    class Start:
        def on_start(self, run: Any) -> ModelScoped:
            return ModelScoped()

    result = Runner(Agent(name="m", model=ScriptedModel(reply)), observers=[Start()]).run_sync("hi")
    assert result.outcome == "final" and seen == ["model:1"] and CURRENT.get() == "none"
