"""An MCP tool in a loopwright run against the same calls made with the bare ``mcp`` ClientSession.

A K=10 loop: a scripted model asks K times for one call of the MCP tool ``add`` (a server run
over stdio, tests/mcp_servers/calc_server.py), then answers with text; beside it, the same K
calls made with the SDK's own ``ClientSession``, called bare, in the same process and event loop,
to the same server process (the session the toolset holds: on a busy machine a second server
process is scheduled apart and its figures wander; ``--own-server`` gives the bare session a
connection and a server of its own). Connections are opened once, before the timing (as a
runner's toolsets are for its runs); the two loops alternate run after run (the order alternating). Median and best
milliseconds of --repeats runs each, the ratio of the medians and the median of the paired ratios.
Target (issue 27): loopwright <= 1.2x the bare session's wall time.

Usage:  python bench/bench_mcp.py                    (30 runs of each)
        python bench/bench_mcp.py --repeats 100 --k 10 --json mcp.json
        python bench/bench_mcp.py --own-server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall
from loopwright.integrations.mcp import McpToolset

SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "calc_server.py")
_perf = time.perf_counter


async def bare_loop(session: Any, k: int) -> float:
    """K calls of ``add`` on the SDK's session, each answer read as loopwright reads it."""
    began = _perf()
    for i in range(k):
        answer = await session.call_tool("add", {"a": i, "b": 1})
        if answer.is_error or answer.structured_content is None:
            raise RuntimeError(f"the bare call failed: {answer}")
    return _perf() - began


async def measure(k: int, repeats: int, own_server: bool = False) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script = [[ToolCall(id=f"c{i}", name="add", args={"a": i, "b": 1})] for i in range(k)] + ["done"]
    toolset = McpToolset.stdio(sys.executable, [SERVER])
    limits = Limits(timeout_s=None, max_iterations=k + 5, max_tool_calls=k + 5)
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    ours: list[float] = []
    bare: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as own:
        await own.initialize()
        await own.list_tools()  # (as a toolset does: the session checks answers against the listed schemas)
        async with Runner(Agent(name="bench", model=ScriptedModel(["warm"]), tools=[toolset])) as warm:
            await warm.run("warm up")
            # the same server process for both (a second one is scheduled apart on a busy machine):
            # the SDK's ClientSession the toolset holds, called bare; --own-server: one of its own
            session = own if own_server else toolset._conn.session  # type: ignore[union-attr]

            async def loopwright_run() -> float:
                agent = Agent(name="bench", model=ScriptedModel(script), tools=[toolset], limits=limits)
                async with Runner(agent) as runner:  # (the toolset is open already: `warm` holds it)
                    began = _perf()
                    result = await runner.run("add them")
                    took = _perf() - began
                if result.outcome != "final":
                    raise RuntimeError(f"the run ended {result.outcome}: {result.error}")
                return took

            await bare_loop(session, k)
            await loopwright_run()
            for i in range(repeats):
                if i % 2:
                    bare.append(await bare_loop(session, k))
                    ours.append(await loopwright_run())
                else:
                    ours.append(await loopwright_run())
                    bare.append(await bare_loop(session, k))
    paired = statistics.median(o / b for o, b in zip(ours, bare, strict=True))
    return {
        "k": k,
        "repeats": repeats,
        "loopwright_ms": {"median": statistics.median(ours) * 1e3, "best": min(ours) * 1e3},
        "bare_ms": {"median": statistics.median(bare) * 1e3, "best": min(bare) * 1e3},
        "ratio_of_medians": statistics.median(ours) / statistics.median(bare),
        "paired_median_ratio": paired,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--own-server", action="store_true", help="the bare session on a server process of its own")
    args = parser.parse_args()
    found = asyncio.run(measure(args.k, args.repeats, args.own_server))
    ours, bare = found["loopwright_ms"], found["bare_ms"]
    print(f"python {sys.version.split()[0]}; K={found['k']}, {found['repeats']} runs of each, interleaved")
    print(f"  bare ClientSession  {bare['median']:7.2f} ms median ({bare['best']:.2f} best)")
    print(f"  loopwright run      {ours['median']:7.2f} ms median ({ours['best']:.2f} best)")
    ratio, paired = found["ratio_of_medians"], found["paired_median_ratio"]
    print(f"  ratio of medians {ratio:.3f}x, paired median {paired:.3f}x")
    print(f"  target <= 1.2x: {'met' if ratio <= 1.2 else 'NOT met'}")
    if args.json is not None:
        args.json.write_text(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
