"""Every row of every built-in machine (the core, each feature, both) fires on that machine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from loopwright import (
    Agent,
    Limits,
    ModelError,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    Tool,
    ToolCall,
    Usage,
    approve,
    tool,
)
from loopwright.data.errors import TokenBudgetError
from loopwright.features import BUILT_IN_MACHINES, Compaction, Observer, Planner, PlanReAct, machine_for
from loopwright.features.compaction import SUMMARY_INSTRUCTION
from loopwright.features.observer import OBSERVER_INSTRUCTION
from loopwright.features.planner import PLANNER_INSTRUCTION
from loopwright.testing import scripted
from loopwright.testing.coverage import RowCoverage
from tests.guard_helpers import GUARDED, guard_scenarios
from tests.helpers import add


@tool(requires_confirmation=True)
def pay(amount: int) -> str:
    """Pay an amount (asks a person first)."""
    return f"paid {amount}"


class Answer(BaseModel):
    answer: str


def canned(request: ModelRequest, ctx: Any) -> ModelResponse | None:
    """before_model: the planner's and the observer's calls answered here (the script is the
    agent's own replies)."""
    first = request.instructions[0].text if request.instructions else ""
    if first == PLANNER_INSTRUCTION:
        return ModelResponse(parts=(TextPart(text='{"steps": [{"description": "add", "status": "pending"}]}'),))
    if first == OBSERVER_INSTRUCTION:
        return ModelResponse(parts=(TextPart(text='{"verdict": "ok", "correction": null}'),))
    if first == SUMMARY_INSTRUCTION:
        return ModelResponse(parts=(TextPart(text="The user asked for a sum."),))
    return None


def long_history(response: ModelResponse, ctx: Any) -> ModelResponse:
    """after_model: every call reports a long input (so compaction is due)."""
    return response.model_copy(update={"usage": Usage(input_tokens=1000, requests=1)})


def make(name: str, **limits: Any) -> Agent:
    """An agent whose machine is the built-in machine ``name``."""
    limits.setdefault("retry_backoff_s", 0)
    if "loop_detection" not in name:
        limits.setdefault("max_repeated_calls", None)
    tools: list[Any] = [add, pay] if "waiting" in name else [add]
    if "tool_retries" in name:  # the same add, tried again when it asks
        tools = [Tool(add.fn, name="add", retries=1)]
    subs = [Agent(name="b", model=ScriptedModel([]), tools=[add])] if "multi_agent" in name else []
    agent = Agent(
        name="root",
        model=ScriptedModel([]),
        tools=tools,
        sub_agents=subs,
        limits=Limits(**limits),
        output_type=Answer if "structured_output" in name else None,
        planner=PlanReAct() if "plan_react" in name else Planner() if "planner" in name else None,
        observer=Observer(every=1) if "observer" in name else None,
        compaction=Compaction(max_tokens=500, keep_last=1) if "compaction" in name else None,
        before_model=canned,
        after_model=long_history if "compaction" in name else None,
        **(GUARDED if "guardrails" in name else {}),
    )
    assert machine_for(agent) is BUILT_IN_MACHINES[name]
    return agent


def text(name: str, value: str) -> str:
    """A final reply in the form the machine ``name`` expects."""
    if "structured_output" in name:
        return Answer(answer=value).model_dump_json()
    if "plan_react" in name:
        return f"/*PLANNING*/\n1. answer\n/*FINAL_ANSWER*/\n{value}"
    return value


def call(name: str = "add", **args: Any) -> list[ToolCall]:
    return [ToolCall(name=name, args=args or {"a": 1, "b": 2})]


def hand_over() -> list[ToolCall]:
    return [ToolCall(name="transfer_to_agent", args={"agent_name": "b", "task": "t"})]


async def _cancel_at(runner: Runner, stage: str) -> None:
    run = runner.start("go")
    while run.stage != stage:
        assert not run.done, f"the run never reached {stage!r}: {run.state.trace}"
        await run.step()
    runner.cancel(run.run_id)
    await run.step()
    assert run.result.outcome == "cancelled"


async def _hang(request: ModelRequest) -> Any:
    await asyncio.sleep(5)


def feature_scenarios(name: str, run: Callable[..., Any], done: str, out: list[Callable[[], None]]) -> list[str]:
    """The composed options' own scenarios (into ``out``) and the states to cancel in."""
    stages: list[str] = []
    if "loop_detection" in name:  # the same call for ever: nudged, then salvaged
        out.append(lambda: run(make(name), [call(), call(), call(), call(), "salvaged"]))
    if "tool_retries" in name:  # a retry asked past max_tool_retries: the loop stops, salvaged
        out.append(lambda: run(make(name, max_tool_retries=0), [call(a="x"), "salvaged"]))
    if "planner" in name:
        stages += ["plan", "update_plan"]
    if "compaction" in name:
        stages.append("compact")
        out.append(lambda: run(make(name, max_compactions=0), [call(), done]))  # spent: round as usual
    if "observer" in name:
        stages.append("observe")
        out.append(lambda: run(make(name, max_observations=1), [call(), call(a=5), done]))  # then round as usual
    if "structured_output" in name:
        stages.append("validate")
        out.append(lambda: run(make(name), ["not json", done]))  # retried with the error, then valid
        out.append(lambda: run(make(name, max_parse_retries=0), ["not json"]))  # failed, the error named
    if "guardrails" in name:
        stages += guard_scenarios(make, call, done, out)
    return stages


def scenarios(name: str) -> list[Callable[[], None]]:
    def run(agent: Agent, script: list[Any], **kw: Any) -> Any:
        return Runner(scripted(agent, script)).run_sync("go", **kw)

    done, ok = text(name, "done"), text(name, "ok")
    out: list[Callable[[], None]] = [
        lambda: run(make(name), [call(), done]),
        lambda: run(make(name, max_model_retries=1), [ModelError("busy", status=529), ok]),
        lambda: run(make(name, max_model_retries=0), [ModelError("bad", status=400, retryable=False)]),
        lambda: run(  # failed for good: the next model answers
            make(name, max_model_retries=0).replace(fallback_models=[ScriptedModel([ok])]),
            [ModelError("busy", status=529)],
        ),
        lambda: run(make(name).replace(instruction="Hi {missing}"), ["x"]),
        lambda: run(make(name, max_iterations=1), [call(), "best effort"]),
        lambda: run(make(name, max_iterations=1), [call(), ModelError("bad", retryable=False)]),
        lambda: run(make(name, max_iterations=1, salvage=False), [call(), "never"]),
        lambda: run(make(name), [TokenBudgetError("too big"), ok]),  # not sent: salvaged
        lambda: run(make(name, salvage=False), [TokenBudgetError("too big")]),  # not sent: the limit
        lambda: Runner(  # would overspend max_cost_usd: not sent, the limit
            make(name, max_cost_usd=1e-9).replace(model=ScriptedModel([ok], name="claude-opus-4-6"))
        ).run_sync("go"),
        lambda: Runner(make(name, timeout_s=0.05).replace(model=ScriptedModel(_hang))).run_sync("go"),  # type: ignore[arg-type]
    ]
    stages = ["preprocess", "reason", "postprocess", "act", "decide"]
    script: list[Any] = [call(), done]
    if "multi_agent" in name:
        stages.append("transfer")
        script = [hand_over(), call(), done]
        out.append(lambda: run(make(name), [hand_over(), "b answers"]))
    stages += feature_scenarios(name, run, done, out)
    for stage in stages:
        out.append(
            lambda stage=stage, script=script: asyncio.run(_cancel_at(Runner(scripted(make(name), script)), stage))
        )  # type: ignore[misc]
    for late in ("salvage", "guard_salvaged") if "guardrails" in name else ("salvage",):
        out.append(
            lambda late=late: asyncio.run(
                _cancel_at(Runner(scripted(make(name, max_iterations=1), [call(), "x"])), late)
            )
        )  # type: ignore[misc]
    if "waiting" in name:

        def wait_then(decide: Callable[[Runner, Any], Any]) -> None:
            runner = Runner(scripted(make(name), [call("pay", amount=5), text(name, "paid")]))
            first = runner.run_sync("go")
            assert first.outcome == "suspended"
            decide(runner, first)

        out.append(lambda: wait_then(lambda r, res: r.resume_sync(res, {res.pending[0].call_id: approve()})))
        out.append(lambda: wait_then(lambda r, res: r.resume_sync(res, cancel=True)))
    return out


@pytest.mark.parametrize("name", list(BUILT_IN_MACHINES))
def test_every_row_of_the_machine_fires_on_it(name: str) -> None:
    from loopwright import instrument, uninstrument

    coverage = RowCoverage()
    instrument(coverage)
    try:
        for scenario in scenarios(name):
            scenario()
    finally:
        uninstrument(coverage)
    machine = BUILT_IN_MACHINES[name]
    assert [str(r) for r in coverage.missing(machine)] == []
