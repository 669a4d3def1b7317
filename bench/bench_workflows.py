"""A sequential workflow of three scripted agents against running the three by hand, same process.

Each agent makes K=5 tool rounds (one call of a no-op tool each) then answers with text; its
model is a stateless function returning prebuilt replies by the count of tool results in the
history, so one agent serves every run. "by hand": three prebuilt Runners, ``await
runner.run(text)`` one after another (each run's state a copy of the last one's, its output
put under its name: what the workflow does for its children). "nested by hand": the same three
runs started inside a parent run's tools (``nesting.enter_tools``), so they charge its budgets
as a workflow's children do: what budget sharing alone costs. "workflow": one Runner of
``SequentialAgent("pipeline", steps=[a, b, c])`` reused. Samples interleave (the order
rotating), each the mean of --batch pipelines in CPU time of this process (``process_time``:
on a shared machine wall time mostly measures the neighbours); median and best of --repeats
samples, microseconds per pipeline, and the ratios to "by hand". Target (issue 29): workflow
<= 1.2x by hand.

Usage:  python bench/bench_workflows.py [--repeats 200] [--batch 20] [--k 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.runtime import nesting
from loopwright.workflows import SequentialAgent


@tool
async def noop(n: int) -> str:
    """Do nothing."""
    return "ok"


def make_agent(name: str, k: int) -> Agent:
    calls = [ModelResponse(parts=(ToolCall(name="noop", args={"n": i}),), stop_reason="tool_use") for i in range(k)]
    final = ModelResponse(parts=(TextPart(text=f"{name} done"),), stop_reason="end_turn")

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "user") - 1
        return calls[done] if done < k else final

    return Agent(
        name=name, model=ScriptedModel(reply), tools=[noop], limits=Limits(max_iterations=k + 1, timeout_s=None)
    )


async def by_hand(runners: list[Runner]) -> None:
    state: dict[str, object] = {}
    for runner in runners:
        result = await runner.run("go", state=dict(state))
        state = dict(result.state)
        state[runner.agent.name] = result.output


async def sample(work: object, batch: int) -> float:
    t0 = time.process_time()
    for _ in range(batch):
        await work()  # type: ignore[operator]
    return (time.process_time() - t0) / batch * 1e6


async def main(repeats: int, batch: int, k: int) -> dict[str, float]:
    agents = [make_agent(n, k) for n in ("a", "b", "c")]
    runners = [Runner(a) for a in agents]
    flow = Runner(SequentialAgent("pipeline", steps=agents, limits=Limits(max_iterations=3 * (k + 1), timeout_s=None)))
    check = await flow.run("go")
    assert check.outcome == "final" and check.output == "c done", (check.outcome, check.error)
    parent = Runner(make_agent("parent", 0).replace(limits=Limits(max_iterations=10**9, timeout_s=None)))
    above = parent.new_run("go")

    async def run_flow() -> None:
        await flow.run("go")

    async def run_hand() -> None:
        await by_hand(runners)

    async def run_nested() -> None:
        token = nesting.enter_tools(nesting.link(above))
        try:
            await by_hand(runners)
        finally:
            nesting.leave_tools(token)

    kinds = {"hand": run_hand, "nested": run_nested, "workflow": run_flow}
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(10):  # warm-up
        for work in kinds.values():
            await work()
    order = list(kinds)
    for i in range(repeats):
        for name in order[i % 3 :] + order[: i % 3]:
            samples[name].append(await sample(kinds[name], batch))
    out: dict[str, float] = {"k": k}
    for name, values in samples.items():
        out[f"{name}_median_us"] = statistics.median(values)
        out[f"{name}_best_us"] = min(values)
    for name in ("nested", "workflow"):
        out[f"{name}_ratio_median"] = out[f"{name}_median_us"] / out["hand_median_us"]
        out[f"{name}_ratio_best"] = out[f"{name}_best_us"] / out["hand_best_us"]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    figures = asyncio.run(main(args.repeats, args.batch, args.k))
    f = figures
    print(f"sequential workflow of 3 agents, K={f['k']:.0f} each, CPU us per pipeline (median / best):")
    print(f"  by hand         {f['hand_median_us']:7.0f} / {f['hand_best_us']:.0f}")
    print(
        f"  nested by hand  {f['nested_median_us']:7.0f} / {f['nested_best_us']:.0f}   "
        f"{f['nested_ratio_median']:.3f}x / {f['nested_ratio_best']:.3f}x"
    )
    print(
        f"  workflow        {f['workflow_median_us']:7.0f} / {f['workflow_best_us']:.0f}   "
        f"{f['workflow_ratio_median']:.3f}x / {f['workflow_ratio_best']:.3f}x   (target <= 1.2x)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
