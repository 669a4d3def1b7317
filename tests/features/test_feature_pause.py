"""Pause: ``runner.pause(run_id)`` stops a run at its next transition with nothing lost; it
resumes where it stopped, by id in this process or from its saved state in another."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwright import (
    Agent,
    Limits,
    ModelRequest,
    ModelResponse,
    ResumeError,
    Runner,
    RunResult,
    ScriptedModel,
    TextPart,
    ToolCall,
    ToolResult,
    tool,
)
from loopwright.testing import assert_run_invariants
from tests import ROOT

RUNNERS: list[Runner] = []


@tool
def lookup(city: str, ctx: Any) -> str:
    """Look a city up; asks the runner to pause the run when the session state says so."""
    if ctx.state.get("pause_in") == city:
        assert RUNNERS[-1].pause(ctx.run_id)
    return f"{city}: 20 degrees"


def reply(request: ModelRequest) -> ModelResponse:
    """The model: a function of what it is sent (so a run resumed in another process, with a
    fresh model, goes on as it would have): look Lisbon up, then Porto, then answer."""
    answered = sum(isinstance(p, ToolResult) for m in request.messages for p in m.parts)
    if answered < 2:
        city = ("Lisbon", "Porto")[answered]
        call = ToolCall(id=f"c{answered + 1}", name="lookup", args={"city": city})
        return ModelResponse(parts=(call,), stop_reason="tool_use")
    return ModelResponse(parts=(TextPart(text="Lisbon and Porto are both 20 degrees."),), stop_reason="end_turn")


def make_agent(**limits: Any) -> Agent:
    return Agent(name="weather", model=ScriptedModel(reply), tools=[lookup], limits=Limits(**limits))


def runner_for(agent: Agent) -> Runner:
    runner = Runner(agent)
    RUNNERS.append(runner)
    return runner


def merged(*legs: RunResult) -> RunResult:
    events: list[Any] = []
    for leg in legs:  # (a result resumed in this process holds the legs before it too)
        events += [e for e in leg.events if not events or e.seq > events[-1].seq]
    return legs[-1].model_copy(update={"events": [e.model_copy(update={"seq": i + 1}) for i, e in enumerate(events)]})


def test_a_paused_run_stops_at_the_next_transition_and_resumes_where_it_stopped() -> None:
    plain = Runner(make_agent()).run_sync("weather?")
    runner = runner_for(make_agent())
    paused = runner.run_sync("weather?", run_id="r1", state={"pause_in": "Lisbon"})
    assert paused.outcome == "paused" and paused.output is None
    assert paused.trace[-2:] == ["act", "decide"]  # the act that asked finished; decide has not run
    assert paused.messages[-1].parts[0].content == "Lisbon: 20 degrees"  # type: ignore[union-attr]
    assert paused.events[-1].type == "paused" and paused.events[-1].state == "decide"
    assert runner.active_runs == []
    done = runner.resume_sync("r1")
    assert done.outcome == "final" and done.output == plain.output
    assert done.trace == plain.trace  # the same path, as if it had never paused
    assert [e.type for e in done.events][len(paused.events) :][:2] == ["resumed", "state_entered"]
    assert done.events[: len(paused.events)] == paused.events  # the whole run's events
    assert_run_invariants(merged(paused, done), make_agent())


@pytest.mark.slow
def test_a_paused_run_resumes_from_its_saved_state_in_another_process(tmp_path: Path) -> None:
    runner = runner_for(make_agent())
    paused = runner.run_sync("weather?", state={"pause_in": "Porto"})
    assert paused.outcome == "paused"
    saved = tmp_path / "run.json"
    saved.write_bytes(paused.run_state.to_json())
    code = (
        "import sys; from pathlib import Path\n"
        "from loopwright import Runner, RunState\n"
        "from tests.features.test_feature_pause import make_agent\n"
        "state = RunState.from_json(Path(sys.argv[1]).read_bytes())\n"
        "result = Runner(make_agent()).resume_sync(state)\n"
        "print(result.outcome, result.output, ' '.join(result.trace), sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(saved)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    outcome, output, trace = done.stdout.strip().split("|")
    assert outcome == "final" and output == "Lisbon and Porto are both 20 degrees."
    assert trace.split() == Runner(make_agent()).run_sync("weather?").trace


@pytest.mark.slow
def test_the_run_clock_stops_while_paused() -> None:
    runner = runner_for(make_agent(timeout_s=0.5))
    paused = runner.run_sync("weather?", run_id="r2", state={"pause_in": "Lisbon"})
    left = paused.run_state.deadline

    async def later() -> RunResult:
        await asyncio.sleep(0.6)  # longer than the whole timeout
        return await runner.resume("r2")

    done = asyncio.run(later())
    assert done.outcome == "final" and done.limit is None
    assert left is not None and done.run_state.deadline is not None and done.run_state.deadline > left + 0.5


def test_pause_from_outside_while_a_stage_runs() -> None:
    started = asyncio.Event()

    @tool
    async def slow(city: str) -> str:
        """Slow lookup."""
        started.set()
        await asyncio.sleep(0.05)
        return f"{city}: 20 degrees"

    script = [[ToolCall(name="slow", args={"city": "Lisbon"})], "done"]
    runner = Runner(Agent(name="weather", model=ScriptedModel(script), tools=[slow]))

    async def go() -> tuple[RunResult, RunResult]:
        task = asyncio.create_task(runner.run("go", run_id="r3"))
        await started.wait()  # the tool is running: the pause lands when act is done
        assert runner.pause("r3")
        paused = await task
        assert paused.outcome == "paused" and paused.messages[-1].parts[0].content == "Lisbon: 20 degrees"  # type: ignore[union-attr]
        return paused, await runner.resume(paused)

    paused, done = asyncio.run(go())
    assert done.outcome == "final" and done.output == "done" and paused.run_state is done.run_state


def test_what_cannot_be_paused_or_resumed_is_refused() -> None:
    runner = runner_for(make_agent())
    assert runner.pause("nope") is False
    with pytest.raises(ResumeError, match="no run with id 'nope' is paused on this runner"):
        runner.resume_sync("nope")
    paused = runner.run_sync("weather?", run_id="r4", state={"pause_in": "Lisbon"})
    with pytest.raises(ResumeError, match="was paused, not suspended: it waits for no decision"):
        runner.resume_sync(paused, {"c1": "x"})
    finished = runner.resume_sync("r4")
    with pytest.raises(ResumeError, match="only a suspended or paused run can be resumed"):
        runner.resume_sync(finished)
    assert json.loads(paused.run_state.to_json())["outcome"] == "final"  # the same run, now finished
