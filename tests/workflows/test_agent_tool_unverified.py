"""``unverified=True`` reaches workflow agents and ``agent_tool`` (issue 37, item 6): a child
whose machine ``verify`` rejects is refused, naming the violation and the opt-in of the door it
came through, unless opted in; opted in, its run still ends by the engine's own bounds."""

from __future__ import annotations

import pytest

from loopwright import Agent, Runner, ScriptedModel, ToolCall
from loopwright.data.errors import MachineError
from loopwright.loop.subrun import agent_tool
from loopwright.workflows import LoopAgent, MapAgent, ParallelAgent, SequentialAgent
from tests.loop.test_unverified_machines import back_to_preprocess, spinner


def _spinner() -> Agent:
    return spinner(back_to_preprocess(), timeout_s=5, max_transitions=60)


@pytest.mark.parametrize(
    "build",
    [
        lambda a, **o: SequentialAgent("seq", [a], **o),
        lambda a, **o: ParallelAgent("par", branches=[a], **o),
        lambda a, **o: LoopAgent("loop", [a], max_iterations=1, **o),
        lambda a, **o: MapAgent("map", a, over="items", **o),
    ],
    ids=["sequential", "parallel", "loop", "map"],
)
def test_every_workflow_kind_refuses_an_unverified_child_unless_opted_in(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MachineError, match=r"(?s)spinner.*FAIL 3\..*unverified=True"):
        build(_spinner())
    flow = build(_spinner(), unverified=True)
    result = Runner(flow).run_sync("go", state={"items": ["x"]})
    assert result.outcome != "final"  # the spinning child never answers: the engine's bounds end it
    assert result.outcome in ("failed", "limit"), (result.outcome, result.error)


def test_agent_tool_refuses_an_unverified_agent_naming_its_own_opt_in() -> None:
    with pytest.raises(MachineError, match=r"(?s)FAIL 3\..*agent_tool\(agent, unverified=True\)"):
        agent_tool(_spinner())


def test_agent_tool_opted_in_runs_the_child_to_the_engines_bound() -> None:
    desk = Agent(
        name="desk",
        model=ScriptedModel([[ToolCall(id="c1", name="spinner", args={"task": "spin"})], "gave up"]),
        tools=[agent_tool(_spinner(), unverified=True)],
    )
    result = Runner(desk).run_sync("go")
    assert result.outcome == "final" and result.output == "gave up"
    answer = [p for m in result.run_state.messages for p in m.parts if getattr(p, "call_id", None) == "c1"]
    assert answer and answer[0].is_error  # the child ended on the transition cap: an error result
