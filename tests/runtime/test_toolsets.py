"""The Toolset protocol without a server: a toolset of Python functions in Agent(tools=[...]),
listed when a run starts, merged with plain tools, changed between runs, clashing names, and an
agent without toolsets left as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from loopwright import Agent, ConfigurationError, Runner, ScriptedModel, ToolCall, approve
from loopwright.runtime.tools import Tool
from loopwright.runtime.toolsets import LiveTools, SchemaTool, Toolset, ToolsetError, is_toolset, schema_tool


class Local:
    """A toolset whose tools are schemas and async functions in this process."""

    def __init__(self, name: str = "local", *, can_wait: bool = False) -> None:
        self.name = name
        self.can_wait = can_wait
        self.opened = 0
        self.closed = 0
        self.listed = 0
        self._tools: tuple[Tool, ...] = ()
        self._version = -1
        self.names = ["double"]

    async def open(self) -> None:
        self.opened += 1

    async def close(self) -> None:
        self.closed += 1

    async def list_tools(self) -> Sequence[Tool]:
        self.listed += 1
        made = []
        for name in self.names:

            async def run(n: int, _name: str = name) -> dict[str, Any]:
                return {"tool": _name, "value": n * 2}

            schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
            made.append(schema_tool(name, f"{name} a number", schema, run, requires_confirmation=self.can_wait))
        self._tools, self._version = tuple(made), self._version + 1
        return self._tools

    @property
    def tools(self) -> Sequence[Tool]:
        return self._tools

    @property
    def version(self) -> int:
        return self._version


def triple(n: int) -> int:
    """Triple a number."""
    return n * 3


def test_a_toolset_is_a_toolset_and_a_tool_or_function_is_not() -> None:
    assert isinstance(Local(), Toolset) and is_toolset(Local())
    assert not is_toolset(triple) and not is_toolset(Tool(triple))


def test_an_agent_without_toolsets_keeps_its_plain_tools_and_specs() -> None:
    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[triple])
    assert agent.toolsets == () and not isinstance(agent.tools, LiveTools)
    assert "tool_specs" in vars(agent) and [s.name for s in agent.tool_specs] == ["triple"]


def test_toolset_tools_are_listed_at_run_start_and_offered_after_the_plain_ones() -> None:
    local = Local()
    model = ScriptedModel(
        [[ToolCall(id="c1", name="double", args={"n": 4}), ToolCall(id="c2", name="triple", args={"n": 1})], "ok"]
    )
    agent = Agent(name="a", model=model, tools=[local, triple])
    assert agent.toolsets == (local,) and list(agent.tools) == ["triple"]  # nothing listed yet
    result = Runner(agent).run_sync("go")
    assert [t.name for t in model.requests[0].tools] == ["triple", "double"]
    parts = {p.call_id: p.content for p in result.messages[2].parts}
    assert parts == {"c1": {"tool": "double", "value": 8}, "c2": 3}
    assert (local.opened, local.closed) == (1, 1)  # run_sync closes what it opened


def test_a_changed_list_is_merged_on_the_next_read() -> None:
    local = Local()
    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[local])

    async def main() -> None:
        await local.list_tools()
        assert list(agent.tools) == ["double"]
        local.names = ["double", "half"]
        await local.list_tools()
        assert [s.name for s in agent.tool_specs] == ["double", "half"] and "half" in agent.tools

    asyncio.run(main())


def test_a_toolset_never_listed_fails_the_run_loudly_not_silently() -> None:
    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[Local("lazy")])
    with pytest.raises(ToolsetError, match="toolset 'lazy' has not listed its tools"):
        _ = agent.tool_specs
    with pytest.raises(ConfigurationError, match=r"open_toolsets\(\)"):
        Runner(agent).start("go")


def test_start_works_once_the_toolsets_are_open() -> None:
    local = Local()
    runner = Runner(Agent(name="a", model=ScriptedModel(["x"]), tools=[local]))

    async def main() -> str | None:
        await runner.open_toolsets()
        run = runner.start("go")
        while not run.done:
            await run.step()
        await runner.aclose()
        return run.result.outcome

    assert asyncio.run(main()) == "final" and local.closed == 1


def test_two_sources_of_one_name_are_refused_with_the_fix() -> None:
    def double(n: int) -> int:
        """Double."""
        return 2 * n

    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[double, Local("maths")])
    with pytest.raises(
        ConfigurationError, match=r"'double' comes from its own tools and from toolset 'maths'.*prefix="
    ):
        Runner(agent).run_sync("go")


def test_a_toolset_that_can_wait_gives_the_agent_the_waiting_feature() -> None:
    local = Local(can_wait=True)
    model = ScriptedModel([[ToolCall(id="c1", name="double", args={"n": 5})], "done"])
    runner = Runner(Agent(name="a", model=model, tools=[local]))
    assert "waiting" in [e.name for e in runner.machine.extensions]
    first = runner.run_sync("go")
    assert first.outcome == "suspended" and first.pending[0].tool == "double"
    done = runner.resume_sync(first, {"c1": approve()})
    assert done.outcome == "final" and local.listed == 2  # the resumed run listed the tools again


def test_schema_tool_checks_shape_and_required_keys_only() -> None:
    async def run(**kwargs: Any) -> Any:
        return kwargs

    made = schema_tool("t", "", {"type": "object", "required": ["a"]}, run, source="a test")
    assert isinstance(made, SchemaTool) and made.description == "the tool t of a test"
    assert made.spec.input_schema == {"type": "object", "required": ["a"]}  # as given
    assert made.validate({"a": 1, "extra": 2}) == {"a": 1, "extra": 2}
    from loopwright.runtime.tools import ArgumentsError

    with pytest.raises(ArgumentsError, match="missing a"):
        made.validate({})
    with pytest.raises(ConfigurationError, match="timeout_s must be positive"):
        schema_tool("t", "d", {}, run, timeout_s=0)
