"""A run's dependencies (``run(text, deps=...)``) reach tools, instructions and callbacks as
``ctx.deps``, are handed again on resume, and are never saved: not in a state, a store or an event."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    RunContext,
    Runner,
    RunState,
    ScriptedModel,
    ToolCall,
    approve,
    tool,
)
from loopwright.runtime.tools import ToolContext
from loopwright.stores import SQLiteStore

MARKER = "DEPS-MARKER-7f3a9c"


class Client:
    """A live object (a connection): no JSON form."""


@dataclass
class Deps:
    """What an app hands its runs: a client, settings (a marker to grep for)."""

    secret: str = MARKER
    seen: list[str] = field(default_factory=list)


@tool
def look(ctx: RunContext[Deps]) -> str:
    """Look something up with the app's client."""
    ctx.deps.seen.append("tool:RunContext")
    return "looked"


@tool
def peek(ctx: ToolContext[Deps]) -> str:
    """Peek with the app's client."""
    ctx.deps.seen.append("tool:ToolContext")
    return "peeked"


@tool(requires_confirmation=True)
def pay(amount: int, ctx: ToolContext[Deps]) -> str:
    """Pay an invoice (needs approval)."""
    ctx.deps.seen.append(f"pay:{amount}")
    return "paid"


def instruction(ctx: RunContext[Deps]) -> str:
    ctx.deps.seen.append("instruction")
    return "be brief"


def before_model(request: Any, ctx: RunContext[Deps]) -> None:
    ctx.deps.seen.append("before_model")


def before_tool(call: ToolCall, ctx: RunContext[Deps]) -> None:
    ctx.deps.seen.append(f"before_tool:{call.name}")


def _agent(script: list[Any], **more: Any) -> Agent:
    return Agent(name="a", model=ScriptedModel(script), tools=[look, peek, pay], **more)


def test_deps_reach_tools_instructions_and_callbacks() -> None:
    deps = Deps()
    agent = _agent(
        [[ToolCall(name="look", args={}), ToolCall(name="peek", args={})], "done"],
        instruction=instruction,
        before_model=before_model,
        before_tool=before_tool,
    )
    result = Runner(agent).run_sync("go", deps=deps)
    assert result.outcome == "final"
    assert "instruction" in deps.seen and "before_model" in deps.seen
    assert {"tool:RunContext", "tool:ToolContext", "before_tool:look", "before_tool:peek"} <= set(deps.seen)


def test_deps_in_a_stream_and_a_run_started_by_hand() -> None:
    deps = Deps()
    runner = Runner(_agent([[ToolCall(name="look", args={})], "done", [ToolCall(name="peek", args={})], "done"]))

    async def main() -> None:
        stream = runner.stream("go", deps=deps)
        async for _ in stream:
            pass
        assert stream.result.outcome == "final"
        run = runner.start("again", deps=deps)
        await run.run_to_end()

    asyncio.run(main())
    assert deps.seen == ["tool:RunContext", "tool:ToolContext"]


def test_a_run_without_deps_reads_none() -> None:
    seen: list[Any] = []

    @tool
    def check(ctx: RunContext) -> str:
        """Check."""
        seen.append(ctx.deps)
        return "ok"

    agent = Agent(name="a", model=ScriptedModel([[ToolCall(name="check", args={})], "done"]), tools=[check])
    Runner(agent).run_sync("go")
    assert seen == [None]


def test_deps_are_handed_again_on_resume_and_never_saved() -> None:
    deps = Deps()
    runner = Runner(_agent([[ToolCall(name="pay", args={"amount": 5}, id="c1")], "done"]))
    first = runner.run_sync("pay it", deps=deps)
    assert first.outcome == "suspended"
    saved = first.run_state.to_json()
    assert MARKER.encode() not in saved
    assert all(MARKER not in event.model_dump_json() for event in first.events)
    later = Deps()
    done = runner.resume_sync(RunState.from_json(saved), {"c1": approve()}, deps=later)
    assert done.outcome == "final"
    assert later.seen == ["pay:5"] and deps.seen == []


def test_a_store_and_its_event_log_never_hold_deps(tmp_path: Path) -> None:
    """The SQLite store file (and its WAL) and every stored event are grepped for the marker."""
    path = tmp_path / "runs.db"
    deps = Deps()
    agent = _agent([[ToolCall(name="look", args={})], [ToolCall(name="pay", args={"amount": 7}, id="c2")], "done"])
    runner = Runner(agent, store=SQLiteStore(path))
    first = runner.run_sync("pay it", deps=deps)
    assert first.outcome == "suspended", first.error
    again = Runner(agent, store=SQLiteStore(path))
    done = again.resume_sync(first.run_id, {"c2": approve()}, deps=deps)
    assert done.outcome == "final", done.error
    assert deps.seen == ["tool:RunContext", "pay:7"]
    for file in tmp_path.iterdir():
        assert MARKER.encode() not in file.read_bytes(), file
    events = asyncio.run(SQLiteStore(path).events(first.run_id))
    assert events and all(MARKER.encode() not in (e if isinstance(e, bytes) else e.encode()) for e in events)


def test_a_live_object_in_state_is_told_to_go_in_deps() -> None:
    """It was ``PydanticSerializationError: Unable to serialize unknown type``."""

    @tool
    def stash(ctx: RunContext) -> str:
        """Keep the client for later."""
        ctx.state["client"] = Client()
        return "kept"

    agent = Agent(
        name="a",
        model=ScriptedModel([[ToolCall(name="stash", args={})], [ToolCall(name="pay", args={"amount": 1})], "x"]),
        tools=[stash, pay],
    )
    result = Runner(agent).run_sync("go")
    assert result.outcome == "suspended"
    with pytest.raises(ConfigurationError, match=r"session state key 'client' holds a Client.*deps=") as caught:
        result.run_state.to_json()
    assert "\n" not in str(caught.value)


def test_a_live_object_in_state_with_a_store_says_the_same(tmp_path: Path) -> None:
    @tool
    def stash(ctx: RunContext) -> str:
        """Keep the client for later."""
        ctx.state["client"] = Client()
        return "kept"

    agent = Agent(name="a", model=ScriptedModel([[ToolCall(name="stash", args={})], "x"]), tools=[stash])
    result = Runner(agent, store=SQLiteStore(tmp_path / "r.db")).run_sync("go")
    assert result.outcome == "failed"
    assert result.error is not None and "session state key 'client'" in result.error.message
    assert "deps=" in result.error.message


def test_attach_hands_the_runners_deps_as_a_dbos_worker_does() -> None:
    """``dbos_runner.register(agent, deps=...)`` sets ``runner.deps``; a run attached (how the
    DBOS workflow and step drive a run) without deps of its own gets them."""
    runner = Runner(_agent(["hi"]))
    deps = Deps()
    runner.deps = deps
    run = runner.attach(runner.new_run("go"))
    assert run.ctx.deps is deps
    own = Deps()
    assert runner.attach(runner.new_run("go"), own).ctx.deps is own


def test_dbos_register_keeps_the_workers_deps() -> None:
    pytest.importorskip("dbos")
    from loopwright.integrations.dbos.registry import RUNNERS, register

    deps = Deps()
    agent = Agent(name="deps_worker_agent", model=ScriptedModel(["hi"]))
    register(agent, deps=deps)
    try:
        assert RUNNERS["deps_worker_agent"].deps is deps
    finally:
        RUNNERS.pop("deps_worker_agent", None)


def test_a_run_state_is_never_given_deps() -> None:
    """``new_run(deps=...)`` would drop them silently: it makes a state, which never holds them."""
    runner = Runner(_agent(["hi"]))
    with pytest.raises(ConfigurationError, match=r"new_run makes a run state, which never holds deps"):
        runner.new_run("go", deps=Deps())
