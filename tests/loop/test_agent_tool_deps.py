"""An agent run as a tool (``agent_tool``) gets the calling run's ``deps`` unless it is given its own."""

from __future__ import annotations

from dataclasses import dataclass

from loopwright import Agent, Runner, ScriptedModel, ToolCall, ToolContext, agent_tool, tool


@dataclass
class Deps:
    user: str


def child(seen: list[str]) -> Agent:
    @tool
    def whoami(ctx: ToolContext[Deps]) -> str:
        """The user this run works for."""
        seen.append(ctx.deps.user if ctx.deps is not None else "nobody")
        return seen[-1]

    return Agent(name="helper", model=ScriptedModel([[ToolCall(name="whoami", args={})], "helped"]), tools=[whoami])


def parent(ask: object) -> Agent:
    script = ScriptedModel([[ToolCall(name="helper", args={"task": "who?"})], "done"])
    return Agent(name="boss", model=script, tools=[ask])


def test_the_child_inherits_the_parents_deps() -> None:
    seen: list[str] = []
    result = Runner(parent(agent_tool(child(seen)))).run_sync("go", deps=Deps("ada"))
    assert result.outcome == "final", result.error
    assert seen == ["ada"]


def test_a_child_given_its_own_deps_keeps_them() -> None:
    seen: list[str] = []
    result = Runner(parent(agent_tool(child(seen), deps=Deps("bob")))).run_sync("go", deps=Deps("ada"))
    assert result.outcome == "final", result.error
    assert seen == ["bob"]


def test_without_deps_the_child_has_none() -> None:
    seen: list[str] = []
    result = Runner(parent(agent_tool(child(seen)))).run_sync("go")
    assert result.outcome == "final", result.error
    assert seen == ["nobody"]
