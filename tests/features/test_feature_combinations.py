"""Every combination of the composed options (loop detection, structured output, Plan-ReAct or the
planner, the observer, compaction, with tools that wait and agent trees): each machine verifies, and any
drawn script of model replies ends in a terminal with every budget held and every call answered."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, Usage, approve, tool, verify
from loopwright.data.events import ToolAnswered, ToolCall
from loopwright.features import Compaction, Observer, Planner, PlanReAct, machine_for
from loopwright.runtime.agent import TRANSFER_TOOL
from loopwright.testing import assert_run_invariants, model_behaviours, scripted
from tests.helpers import add


class Answer(BaseModel):
    answer: str


@tool(requires_confirmation=True)
def pay(amount: int) -> str:
    """Pay an amount (asks a person first)."""
    return f"paid {amount}"


OPTIONS: dict[str, list[Any]] = {
    "output_type": [None, Answer],
    "planner": [None, PlanReAct(), Planner()],
    "observer": [None, Observer(every=1), Observer(every=2)],
    "compaction": [None, Compaction(max_tokens=1, keep_last=2)],
    "repeats": [None, 2, 3],
    "waiting": [False, True],
    "tree": [False, True],
}


def _long(response: ModelResponse, ctx: Any) -> ModelResponse:
    """after_model: every call reports a long input (compaction is due whenever it may run)."""
    return response.model_copy(update={"usage": Usage(input_tokens=1000, requests=1)})


def build(choice: dict[str, Any], **limits: Any) -> Agent:
    tools: list[Any] = [add, pay] if choice["waiting"] else [add]
    subs = [Agent(name="helper", model=ScriptedModel([]), tools=[add])] if choice["tree"] else []
    return Agent(
        name="root",
        model=ScriptedModel([]),
        tools=tools,
        sub_agents=subs,
        output_type=choice["output_type"],
        planner=choice["planner"],
        observer=choice["observer"],
        compaction=choice["compaction"],
        after_model=_long if choice["compaction"] else None,
        limits=Limits(retry_backoff_s=0, max_repeated_calls=choice["repeats"], **limits),
    )


ALL = [dict(zip(OPTIONS, values, strict=True)) for values in itertools.product(*OPTIONS.values())]


@pytest.mark.slow
def test_every_combination_composes_and_verifies() -> None:
    seen = set()
    for choice in ALL:
        machine = machine_for(build(choice))
        if machine.name not in seen:
            seen.add(machine.name)
            assert verify(machine).ok, machine.name
    assert len(seen) >= 40


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), choice=st.sampled_from(ALL))
def test_any_script_on_any_combination_ends_within_every_budget(data: st.DataObject, choice: dict[str, Any]) -> None:
    limits = data.draw(
        st.fixed_dictionaries(
            {
                "max_iterations": st.integers(1, 6),
                "max_parse_retries": st.integers(0, 2),
                "max_observations": st.integers(0, 2),
                "max_compactions": st.integers(0, 2),
                "salvage": st.booleans(),
            }
        )
    )
    base = build(choice, **limits)
    script = data.draw(model_behaviours(base, max_replies=8, repeat=0.3))
    agent = scripted(base, script)
    runner = Runner(agent)
    result = runner.run_sync("go")
    events = list(result.events)
    while result.outcome == "suspended":  # a person approves whatever waits (max_suspensions bounds it)
        result = runner.resume_sync(result, {p.call_id: approve() for p in result.pending})
        events += [e for e in result.events if e.seq > events[-1].seq]  # (the result holds every leg)
    assert result.outcome in ("final", "salvaged", "limit", "failed")
    merged = result.model_copy(update={"events": [e.model_copy(update={"seq": i + 1}) for i, e in enumerate(events)]})
    assert_run_invariants(merged, agent)
    result = merged
    charges = result.run_state.charges
    assert charges.get("max_parse_retries", 0) <= limits["max_parse_retries"]
    assert charges.get("max_observations", 0) <= limits["max_observations"]
    assert result.trace.count("observe") <= limits["max_observations"]
    assert result.trace.count("compact") <= limits["max_compactions"]
    if choice["output_type"] is not None and result.outcome == "final" and result.answered_by == "root":
        assert isinstance(result.output, Answer)
    cap = choice["repeats"]
    if cap is not None:  # no reply's calls ran more than cap - 1 times in a row
        nudged = {e.call_id for e in events if isinstance(e, ToolAnswered) and str(e.content).startswith("not run: ")}
        # (transfer_to_agent is the engine's own: multi_agent's gate answers it before any tool runs, so a
        # transfer refused twice in a row ran nothing; the drawn script [transfer to root, pay, transfer to
        # root] with a planner's update between them found that)
        ran = [
            tuple((p.name, repr(sorted(p.args.items()))) for p in m.parts if isinstance(p, ToolCall))
            for m in result.messages
            if m.role == "assistant"
            and any(isinstance(p, ToolCall) and p.id not in nudged and p.name != TRANSFER_TOOL for p in m.parts)
        ]
        streak = longest = 0
        for i, key in enumerate(ran):
            streak = streak + 1 if i and key == ran[i - 1] else 1
            longest = max(longest, streak)
        assert longest <= max(cap - 1, 1) or choice["compaction"] is not None


@pytest.mark.parametrize("choice", [c for c in ALL if c["waiting"] and c["planner"] and c["observer"]][:4])
def test_a_waiting_run_with_the_options_resumes_from_json(choice: dict[str, Any]) -> None:
    from loopwright import RunState, ToolCall

    text = '{"answer": "paid"}' if choice["output_type"] else "paid"
    agent = scripted(build(choice), [[ToolCall(name="pay", args={"amount": 5})]] + [text] * 6)
    runner = Runner(agent)
    first = runner.run_sync("pay 5")
    if first.outcome != "suspended":  # the planner's call took the pay reply: nothing waits
        return
    loaded = RunState.from_json(first.run_state.to_json())
    done = runner.resume_sync(loaded, {first.pending[0].call_id: approve()})
    assert done.outcome in ("final", "salvaged", "limit", "failed")
    events = [*first.events, *done.events]
    merged = done.model_copy(update={"events": [e.model_copy(update={"seq": i + 1}) for i, e in enumerate(events)]})
    assert_run_invariants(merged, agent)
    assert set(done.run_state.features) >= {"waiting", "observer"}
