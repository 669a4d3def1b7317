"""Workflow agents (sequential, parallel, loop, map): their outputs and state, their machines
checked and drawn, their bounds, their bad input refused, and their suspension and resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    agent_tool,
    approve,
    diagram,
    tool,
    verify,
)
from loopwright.stores import SQLiteStore
from loopwright.table.machine import Row
from loopwright.workflows import LoopAgent, MapAgent, ParallelAgent, SequentialAgent, Step, exit_loop


def say(name: str, *replies: Any, **options: Any) -> Agent:
    return Agent(name=name, model=ScriptedModel(list(replies)), **options)


def echo(name: str, prefix: str) -> Agent:
    """An agent that answers with its prefix and the task (any number of times)."""

    def reply(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=f"{prefix} {request.messages[0].text}"),), stop_reason="end_turn")

    return Agent(name=name, model=ScriptedModel(reply))


# ------------------------------------------------------------------ what each kind does


def test_a_sequence_passes_each_output_on_through_state() -> None:
    seen: list[str] = []

    def writer(request: ModelRequest) -> ModelResponse:
        seen.append(request.instructions[0].text if request.instructions else "")
        return ModelResponse(parts=(TextPart(text="the essay"),), stop_reason="end_turn")

    pipeline = SequentialAgent(
        "pipeline",
        steps=[
            Step(say("researcher", "three facts"), "notes"),
            Step(Agent(name="writer", model=ScriptedModel(writer), instruction="Write from: {notes}"), "essay"),
        ],
    )
    result = Runner(pipeline).run_sync("topic")
    assert result.outcome == "final" and result.output == "the essay"
    assert result.state == {"notes": "three facts", "essay": "the essay"}
    assert result.trace == ["start", "researcher", "writer", "done"]
    assert seen == ["Write from: three facts"]
    assert result.iterations == 2  # the children's passes, charged to the workflow


def test_parallel_branches_see_copies_and_their_writes_merge() -> None:
    @tool
    def remember(ctx: Any, key: str, value: str) -> str:
        """Keep a value in state."""
        ctx.state[key] = value
        return "kept"

    def branch(name: str, key: str) -> Agent:
        return say(
            name, [ToolCall(name="remember", args={"key": key, "value": name})], f"{name} done", tools=[remember]
        )

    fan = ParallelAgent("fan", branches=[branch("a", "ka"), branch("b", "kb")])
    result = Runner(fan).run_sync("go", state={"shared": 1})
    assert result.outcome == "final"
    assert result.state == {"shared": 1, "ka": "a", "kb": "b", "a": "a done", "b": "b done"}
    assert result.trace == ["start", "fan_out", "join", "done"]


def test_two_branches_writing_one_key_fail_naming_the_key_and_branches() -> None:
    @tool
    def claim(ctx: Any, who: str) -> str:
        """Claim the slot."""
        ctx.state["slot"] = who
        return "ok"

    def branch(name: str) -> Agent:
        return say(name, [ToolCall(name="claim", args={"who": name})], "done", tools=[claim])

    result = Runner(ParallelAgent("fan", branches=[branch("a"), branch("b")])).run_sync("go")
    assert result.outcome == "failed"
    assert result.error is not None
    assert "'a' and 'b' both wrote state key 'slot'" in result.error.message


def test_a_failed_branch_fails_the_parallel_or_is_reported_with_continue() -> None:
    def branches() -> list[Agent]:
        return [say("ok", "fine"), say("broken", ValueError("the model broke"))]

    failed = Runner(ParallelAgent("fan", branches=branches())).run_sync("go")
    assert failed.outcome == "failed" and failed.error is not None
    assert "branch 'broken' of workflow 'fan' failed" in failed.error.message
    assert "the model broke" in failed.error.message

    kept = Runner(ParallelAgent("fan", branches=branches(), on_error="continue")).run_sync("go")
    assert kept.outcome == "final"
    assert kept.state["ok"] == "fine" and "broken" not in kept.state
    assert "[broken] failed (failed)" in kept.output and "the model broke" in kept.output


def test_a_loop_ends_early_when_a_child_calls_exit_loop() -> None:
    writer = say("writer", "draft 1", "draft 2", "draft 3")
    critic = say("critic", "too long", [ToolCall(name="exit_loop", args={})], "good now", tools=[exit_loop])
    loop = LoopAgent("refine", body=[writer, critic], max_iterations=5)
    result = Runner(loop).run_sync("write it")
    assert result.outcome == "final" and result.output == "good now"
    assert result.trace == ["start", "writer", "critic", "writer", "critic", "done"]
    assert result.state == {"writer": "draft 2", "critic": "good now"}


def test_a_loop_stops_at_max_iterations_and_at_until() -> None:
    rounds = LoopAgent("l", body=[echo("w", "again")], max_iterations=3)
    result = Runner(rounds).run_sync("x")
    assert result.outcome == "final" and result.trace == ["start", "w", "w", "w", "done"]

    counter = iter(range(100))

    def count(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=str(next(counter))),), stop_reason="end_turn")

    until = LoopAgent(
        "u", body=[Agent(name="c", model=ScriptedModel(count))], max_iterations=10, until=lambda s: s["c"] == "1"
    )
    result = Runner(until).run_sync("x")
    assert result.trace == ["start", "c", "c", "done"] and result.output == "1"


def test_a_map_runs_the_agent_once_per_item_in_order() -> None:
    mapper = MapAgent("summarise", echo("summary", "summary of"), over="docs", concurrency=2)
    result = Runner(mapper).run_sync("go", state={"docs": ["a", "b", {"n": 3}]})
    assert result.outcome == "final"
    assert result.state["summarise"] == ["summary of a", "summary of b", 'summary of {"n": 3}']
    assert json.loads(result.output) == result.state["summarise"]


def test_a_map_over_a_missing_list_fails_saying_what_to_put_there() -> None:
    result = Runner(MapAgent("m", echo("e", "x"), over="docs")).run_sync("go")
    assert result.outcome == "failed" and result.error is not None
    assert "state key 'docs' holds NoneType, not a list" in result.error.message


def test_workflows_nest_and_are_usable_as_tools_and_transfer_targets() -> None:
    inner = ParallelAgent("views", branches=[echo("pro", "for"), echo("con", "against")])
    outer = SequentialAgent("debate", steps=[inner, echo("judge", "verdict on")])
    result = Runner(outer).run_sync("tabs")
    assert result.outcome == "final" and result.output == "verdict on tabs"
    assert result.state["views"] == "[pro] for tabs\n\n[con] against tabs"

    boss = say("boss", [ToolCall(name="debate", args={"task": "spaces"})], "done", tools=[agent_tool(outer)])
    used = Runner(boss).run_sync("decide")
    answers = [p.content for m in used.messages for p in m.parts if p.type == "tool_result"]
    assert answers == ["verdict on spaces"]

    front = say(
        "front",
        [ToolCall(name="transfer_to_agent", args={"agent_name": "debate", "task": "tabs or spaces"})],
        sub_agents=[outer],
    )
    handed = Runner(front).run_sync("help")
    assert handed.outcome == "final" and handed.answered_by == "debate"
    assert handed.output.startswith("verdict on") and handed.output.endswith("tabs or spaces")


# ------------------------------------------------------------------ bad input


def test_a_loop_without_max_iterations_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="LoopAgent 'l' has no max_iterations: a loop needs a bound"):
        LoopAgent("l", body=[echo("w", "x")])


def test_a_cycle_of_agents_is_refused_naming_it() -> None:
    a = echo("a", "x")
    b = SequentialAgent("b", steps=[a])
    with pytest.raises(ConfigurationError, match="contains a cycle of agents: a -> b -> a"):
        SequentialAgent("a", steps=[b])
    with pytest.raises(ConfigurationError, match="cycle of agents: top -> mid -> top"):
        LoopAgent("top", body=[SequentialAgent("mid", steps=[echo("top", "x")])], max_iterations=2)


def test_bad_options_are_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="two steps are named 'w'"):
        SequentialAgent("s", steps=[echo("w", "x"), echo("w", "y")])
    with pytest.raises(ConfigurationError, match="on_error must be 'fail' or 'continue'"):
        ParallelAgent("p", branches=[echo("w", "x")], on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs at least one step"):
        SequentialAgent("s", steps=[])
    with pytest.raises(ConfigurationError, match="a step must be an Agent"):
        SequentialAgent("s", steps=["writer"])  # type: ignore[list-item]


# ------------------------------------------------------------------ bounds


def test_the_workflows_limits_bound_the_whole_tree() -> None:
    tool_loop = [[ToolCall(name="exit_loop", args={})]] * 3 + ["done"]
    steps = [say(f"s{i}", *tool_loop, tools=[exit_loop]) for i in range(3)]
    result = Runner(SequentialAgent("s", steps=steps, limits=Limits(max_iterations=6))).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_iterations" and result.iterations <= 6
    assert result.error is None  # (a budget ran out: no failure)


def test_depth_is_bounded_by_max_depth() -> None:
    deep: Agent = echo("leaf", "x")
    for i in range(4):
        deep = SequentialAgent(f"level{i}", steps=[deep])
    result = Runner(deep).run_sync("go")  # 5 runs deep, max_depth=3
    assert result.outcome == "failed" and result.error is not None
    assert "past its max_depth=3" in result.error.message


def test_a_loop_with_no_bound_on_its_back_row_fails_the_check() -> None:
    loop = LoopAgent("l", body=[echo("w", "x")], max_iterations=2)
    report = verify(loop)
    assert report.ok, str(report)
    machine = Runner(loop).machine
    unbounded = [
        Row(r.source, r.dest, r.guards, None, r.outcome) if r.bounded_by == "loop_repeats" else r for r in machine.rows
    ]
    broken = verify(unbounded, states=machine.states, waiting=machine.waiting, budgets=["max_suspensions"])
    assert broken.broken(3), str(broken)


@pytest.mark.parametrize(
    ("workflow", "holder"),
    [
        (SequentialAgent("s", steps=[echo("a", "x"), echo("b", "y")]), None),
        (ParallelAgent("p", branches=[echo("a", "x"), echo("b", "y")]), "fan_out"),
        (LoopAgent("l", body=[echo("a", "x"), echo("b", "y")], max_iterations=3), None),
        (MapAgent("m", echo("a", "x"), over="items"), "each"),
    ],
    ids=["sequential", "parallel", "loop", "map"],
)
def test_every_kind_passes_the_check_and_draws_its_children_as_composite_states(
    workflow: Agent, holder: str | None
) -> None:
    assert verify(workflow).ok, str(verify(workflow))
    text = diagram(workflow)
    for child in workflow.walk_children():  # type: ignore[attr-defined]
        state = holder or child.name
        assert f"state {state} {{" in text
        assert f'state "reason" as {state}__{child.name}__reason' in text


def test_a_parallel_draws_its_branches_as_concurrent_regions() -> None:
    text = diagram(ParallelAgent("p", branches=[echo("a", "x"), echo("b", "y")]))
    region = text[text.index("state fan_out {") :]
    assert "\n    --\n" in region and "fan_out__a__start" in region and "fan_out__b__start" in region


# ------------------------------------------------------------------ waiting for people


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    REFUNDS.append(order)
    return f"refunded {order}"


REFUNDS: list[str] = []


def _support() -> ParallelAgent:
    return ParallelAgent(
        "support",
        branches=[
            echo("notes", "noted"),
            say("pay", [ToolCall(name="refund", args={"order": "A1"})], "refund sent", tools=[refund]),
        ],
    )


def test_a_confirmation_inside_a_child_suspends_the_workflow_and_resumes_into_it() -> None:
    REFUNDS.clear()
    support = _support()
    first = Runner(support).run_sync("refund A1")
    assert first.outcome == "suspended" and [p.tool for p in first.pending] == ["refund"]
    assert first.trace == ["start", "fan_out", "suspended"] and REFUNDS == []
    saved = RunState.from_json(first.run_state.to_json())  # the waiting child travels inside
    done = Runner(support).resume_sync(saved, {first.pending[0].call_id: approve()})
    assert done.outcome == "final", done.error
    assert done.state == {"notes": "noted refund A1", "pay": "refund sent"}
    assert REFUNDS == ["A1"]


def test_a_decision_for_a_call_no_child_waits_on_is_refused() -> None:
    support = _support()
    first = Runner(support).run_sync("refund A1")
    with pytest.raises(Exception, match="no child of this workflow waits on call id 'nope'"):
        Runner(support).resume_sync(first, {"nope": approve()})


def test_with_a_store_each_child_is_kept_and_a_suspension_resumes_by_id(tmp_path: Path) -> None:
    REFUNDS.clear()
    support = _support()

    async def go() -> Any:
        store = SQLiteStore(tmp_path / "runs.db")
        first = await Runner(support, store=store).run("refund A1", run_id="w1")
        assert first.outcome == "suspended"
        done = await Runner(support, store=store).resume("w1", {first.pending[0].call_id: approve()})
        return done, sorted(r.run_id for r in await store.runs())

    done, ids = asyncio.run(go())
    assert done.outcome == "final" and REFUNDS == ["A1"]
    assert ids == ["w1", "w1.notes", "w1.pay"]


def test_cancelling_a_workflow_cancels_the_child_in_progress() -> None:
    @tool
    async def slow() -> str:
        """Take a long time."""
        await asyncio.sleep(30)
        return "slept"

    child = say("worker", [ToolCall(name="slow", args={})], "done", tools=[slow])
    runner = Runner(SequentialAgent("s", steps=[child, echo("after", "x")]))

    async def go() -> Any:
        task = asyncio.create_task(runner.run("go", run_id="w"))
        await asyncio.sleep(0.1)
        assert runner.cancel("w")
        return await task

    result = asyncio.run(go())
    assert result.outcome == "cancelled" and result.trace == ["start", "worker", "cancelled"]
