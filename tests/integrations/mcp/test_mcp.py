"""MCP toolsets against a real MCP server run as a subprocess over stdio: listing, filter, prefix,
results (structured, image, isError), timeouts, a killed server, one that cannot start, list changes,
a durable run resumed in a new process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT, TESTS

pytest.importorskip("mcp")

from loopwright import Agent, ConfigurationError, Runner, ScriptedModel, ToolCall
from loopwright.integrations.mcp import McpToolset
from loopwright.runtime.toolsets import ToolsetError

SERVER = str(TESTS / "mcp_servers" / "calc_server.py")

pytestmark = pytest.mark.slow  # each test starts a server process


def calc(**options: Any) -> McpToolset:
    return McpToolset.stdio(sys.executable, [SERVER], **options)


def results(result: Any) -> dict[str, Any]:
    """The tool results of a run, by call id."""
    return {p.call_id: p for m in result.messages for p in m.parts if p.type == "tool_result"}


def call(id: str, name: str, **args: Any) -> ToolCall:
    return ToolCall(id=id, name=name, args=args)


def test_tools_are_listed_with_their_schema_filtered_and_prefixed() -> None:
    toolset = calc(prefix="calc_", tool_filter=["add", "weather", "pixel"])
    model = ScriptedModel(["nothing to do"])
    agent = Agent(name="a", model=model, tools=[toolset])

    async def main() -> None:
        async with Runner(agent) as runner:
            await runner.run("hi")

    asyncio.run(main())
    offered = {t.name: t for t in model.requests[0].tools}
    assert list(offered) == ["calc_add", "calc_weather", "calc_pixel"]
    schema = offered["calc_add"].input_schema  # as the server wrote it (its title kept)
    assert schema["properties"]["a"] == {"title": "A", "type": "integer"}
    assert schema["required"] == ["a", "b"] and schema["title"] == "addArguments"
    assert offered["calc_add"].description == "Add two integers."


def test_a_filter_function_keeps_the_tools_it_accepts() -> None:
    toolset = calc(tool_filter=lambda spec: spec.name.startswith("p"))
    model = ScriptedModel(["ok"])
    Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("hi")
    assert [t.name for t in model.requests[0].tools] == ["pixel", "pid"]


def test_structured_image_and_error_results() -> None:
    model = ScriptedModel(
        [
            [
                call("c1", "add", a=2, b=3),
                call("c2", "weather", city="Oslo"),
                call("c3", "pixel"),
                call("c4", "fail", why="no reason"),
                call("c5", "add", a=1),
            ],
            "done",
        ]
    )
    result = Runner(Agent(name="a", model=model, tools=[calc()])).run_sync("go")
    assert result.outcome == "final"
    got = results(result)
    assert (got["c1"].content, got["c1"].is_error) == ({"result": 5}, False)
    assert got["c2"].content == {"city": "Oslo", "temp_c": 21.5}
    caption, image = got["c3"].content
    assert caption == "one red pixel"
    assert image["type"] == "image" and image["media_type"] == "image/png" and image["data"].startswith("iVBOR")
    assert got["c4"].is_error and "refused: no reason" in got["c4"].content
    assert got["c5"].is_error and "missing b" in got["c5"].content  # checked before the call
    # the model sees the image as an image block
    from loopwright.models.anthropic.mapping import _result_content

    blocks = _result_content(got["c3"].content)
    assert [b["type"] for b in blocks] == ["text", "image"]


def test_a_call_is_bounded_by_the_tool_timeout_and_the_connection_survives_it() -> None:
    model = ScriptedModel([[call("c1", "nap", seconds=5)], [call("c2", "add", a=1, b=1)], "done"])
    toolset = calc(timeout_s=0.5)
    result = Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("go")
    got = results(result)
    assert got["c1"].is_error and "timed out after 0.5 s" in got["c1"].content
    assert got["c2"].content == {"result": 2}


def test_a_server_killed_mid_call_is_an_error_result_and_the_next_call_reconnects() -> None:
    model = ScriptedModel([[call("c1", "pid")], [call("c2", "die")], [call("c3", "pid")], "done"])
    toolset = calc()
    result = Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("go")
    got = results(result)
    assert result.outcome == "final"
    assert got["c2"].is_error and "connection to MCP server" in got["c2"].content and "lost" in got["c2"].content
    assert not got["c3"].is_error and got["c3"].content["result"] != got["c1"].content["result"]
    assert toolset.connections == 2


def test_reconnection_is_bounded() -> None:
    toolset = calc(max_reconnects=0)
    model = ScriptedModel([[call("c1", "die")], [call("c2", "pid")], "done"])
    got = results(Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("go"))
    assert got["c1"].is_error
    assert got["c2"].is_error and "stopped trying" in got["c2"].content


def test_a_server_that_cannot_start_is_one_line_naming_the_command_and_its_stderr() -> None:
    agent = Agent(
        name="a", model=ScriptedModel(["x"]), tools=[McpToolset.stdio(sys.executable, [SERVER, "--fail-start"])]
    )
    with pytest.raises(ToolsetError) as caught:
        Runner(agent).run_sync("go")
    said = str(caught.value)
    assert "\n" not in said
    assert "calc_server.py --fail-start" in said and "could not start" in said
    assert "cannot open /nonexistent/calc.db" in said  # the end of its stderr
    missing = Agent(name="a", model=ScriptedModel(["x"]), tools=[McpToolset.stdio("/no/such/mcp-server", ["--x"])])
    with pytest.raises(ToolsetError, match=r"^MCP server `/no/such/mcp-server --x` .*could not start: FileNotFound"):
        Runner(missing).run_sync("go")


def test_a_changed_tool_list_is_offered_in_the_next_request() -> None:
    toolset = calc(prefix="calc_")
    model = ScriptedModel([[call("c1", "calc_grow")], [call("c2", "calc_extra", text="hi")], "done"])
    result = Runner(Agent(name="a", model=model, tools=[toolset])).run_sync("go")
    assert "calc_extra" not in [t.name for t in model.requests[0].tools]
    assert "calc_extra" in [t.name for t in model.requests[1].tools]
    assert results(result)["c2"].content == {"result": "extra: hi"}


def test_a_name_two_sources_give_is_refused_with_the_fix() -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    agent = Agent(name="a", model=ScriptedModel(["x"]), tools=[add, calc()])
    with pytest.raises(ConfigurationError, match=r"'add' comes from its own tools and from toolset .*prefix="):
        Runner(agent).run_sync("go")


def test_one_connection_serves_a_runner_s_runs_and_closes_with_it() -> None:
    toolset = calc()
    model = ScriptedModel([[call("c1", "pid")], "one", [call("c2", "pid")], "two"])
    agent = Agent(name="a", model=model, tools=[toolset])

    async def main() -> list[Any]:
        async with Runner(agent) as runner:
            first = await runner.run("a")
            second = await runner.run("b")
            assert toolset._conn is not None
        assert toolset._conn is None  # closed with the runner
        return [results(first)["c1"].content, results(second)["c2"].content]

    one, two = asyncio.run(main())
    assert one == two and toolset.connections == 1


def test_start_asks_for_the_toolsets_to_be_opened_and_async_with_toolset_shares_one() -> None:
    toolset = calc()
    agent = Agent(name="a", model=ScriptedModel(["x", "y"]), tools=[toolset])

    async def main() -> None:
        with pytest.raises(ConfigurationError, match=r"open_toolsets\(\)"):
            Runner(agent).start("go")
        async with toolset:
            a, b = Runner(agent), Runner(agent)
            await a.run("1")
            await b.run("2")
            await a.aclose()
            await b.aclose()
            assert toolset._conn is not None  # still held by `async with toolset`
        assert toolset._conn is None

    asyncio.run(main())
    assert toolset.connections == 1


def test_the_stream_lists_the_tools_too() -> None:
    model = ScriptedModel([[call("c1", "add", a=1, b=2)], "done"])
    runner = Runner(Agent(name="a", model=model, tools=[calc()]))

    async def main() -> Any:
        stream = runner.stream("go")
        async for _ in stream:
            pass
        await runner.aclose()
        return stream.result

    assert results(asyncio.run(main()))["c1"].content == {"result": 3}


DURABLE = textwrap.dedent(
    """
    import asyncio, json, sys
    from loopwright import Agent, Runner, ScriptedModel, ToolCall, approve
    from loopwright.integrations.mcp import McpToolset
    from loopwright.stores import SQLiteStore

    server, db, phase = sys.argv[1:4]
    toolset = McpToolset.stdio(sys.executable, [server], prefix="calc_", requires_confirmation=["add"])
    first = [[ToolCall(id="c1", name="calc_add", args={"a": 20, "b": 22})]]
    model = ScriptedModel(first if phase == "start" else ["the sum is 42"])
    runner = Runner(Agent(name="a", model=model, tools=[toolset]), store=SQLiteStore(db))

    async def main():
        async with runner:
            if phase == "start":
                result = await runner.run("add them", run_id="r1")
            else:
                result = await runner.resume("r1", {"c1": approve()})
        parts = [p for m in result.messages for p in m.parts if p.type == "tool_result"]
        print(json.dumps({"outcome": result.outcome, "results": [p.content for p in parts],
                          "offered": [t.name for t in model.requests[-1].tools] if model.requests else []}))

    asyncio.run(main())
    """
)


def test_a_durable_run_suspended_for_a_confirmation_resumes_in_a_new_process(tmp_path: Path) -> None:
    import json

    script = tmp_path / "durable_mcp.py"
    script.write_text(DURABLE)
    db = str(tmp_path / "runs.db")

    def phase(name: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(script), SERVER, db, name], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    first = phase("start")
    assert first["outcome"] == "suspended" and first["results"] == []
    second = phase("resume")
    assert second["outcome"] == "final"
    assert second["results"] == [{"result": 42}]  # the call ran in the new process, over its own connection
    assert "calc_add" in second["offered"]  # the resumed run listed the tools again


def test_import_loopwright_does_not_import_mcp_and_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = "import loopwright, loopwright.integrations.mcp, sys; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ConfigurationError, match=r"^McpToolset needs the MCP SDK: pip install 'loopwright\[mcp\]'$"):
        McpToolset.stdio("python", ["server.py"])
