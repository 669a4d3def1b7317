"""Planner (a structured plan in the run's state, written first, updated after each act, complete
at the final answer) and observer (a bounded model call every few passes that may correct)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    Usage,
    tool,
)
from loopwright.features import BUILT_IN_MACHINES, Observer, Planner, machine_for
from loopwright.features.observer import OBSERVER_INSTRUCTION
from loopwright.features.planner import PLANNER_INSTRUCTION, Plan
from loopwright.testing import assert_run_invariants


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


ONE = Usage(input_tokens=10, output_tokens=5, requests=1)


def text(value: str) -> ModelResponse:
    return ModelResponse(parts=(TextPart(text=value),), stop_reason="end_turn", usage=ONE)


def plan_json(*steps: tuple[str, str]) -> str:
    return json.dumps({"steps": [{"description": d, "status": s} for d, s in steps]})


class Model:
    """One model for the agent, its planner and its observer: each kind of request gets the next
    reply of its own script (as a real model would, told apart here by the instruction)."""

    def __init__(self, agent: list[Any], planner: list[str] = (), observer: list[str] = ()) -> None:  # type: ignore[assignment]
        self.scripts = {"agent": list(agent), "planner": list(planner), "observer": list(observer)}
        self.requests: dict[str, list[ModelRequest]] = {"agent": [], "planner": [], "observer": []}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        first = request.instructions[0].text if request.instructions else ""
        kind = {PLANNER_INSTRUCTION: "planner", OBSERVER_INSTRUCTION: "observer"}.get(first, "agent")
        self.requests[kind].append(request)
        item = self.scripts[kind].pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, list):
            return ModelResponse(parts=tuple(item), stop_reason="tool_use", usage=ONE)
        return text(item)


def call(query: str) -> list[ToolCall]:
    return [ToolCall(name="search", args={"query": query})]


def make(model: Model, **kw: Any) -> Agent:
    limits = kw.pop("limits", {})
    return Agent(
        name="worker",
        model=model,
        tools=[search],
        limits=Limits(retry_backoff_s=0, **limits),
        **kw,  # type: ignore[arg-type]
    )


def plans(result: RunResult) -> list[tuple[list[str], bool]]:
    return [([s["status"] for s in e.steps], e.complete) for e in result.events if e.type == "plan_updated"]


# ------------------------------------------------------------------ planner


def test_the_plan_is_written_first_updated_after_each_act_and_complete_at_the_answer() -> None:
    model = Model(
        agent=[call("flights"), call("hotels"), "Book flight LX1 and Hotel Sol."],
        planner=[
            plan_json(("find flights", "pending"), ("find hotels", "pending"), ("answer", "pending")),
            plan_json(("find flights", "done"), ("find hotels", "in_progress"), ("answer", "pending")),
            plan_json(("find flights", "done"), ("find hotels", "done"), ("answer", "in_progress")),
        ],
    )
    agent = make(model, planner=Planner())
    result = Runner(agent).run_sync("Plan my trip")
    assert result.outcome == "final"
    assert result.trace[:3] == ["start", "plan", "preprocess"]
    assert result.trace.count("update_plan") == 2 and "act" in result.trace
    assert plans(result) == [
        (["pending", "pending", "pending"], False),
        (["done", "in_progress", "pending"], False),
        (["done", "done", "in_progress"], False),
        (["done", "done", "done"], True),
    ]
    saved = RunState.from_json(result.run_state.to_json())  # the plan is part of the run's state
    assert isinstance(saved.features["planner"].plan, Plan) and saved.features["planner"].complete
    # the model is shown the plan; the planner sees the plan so far and the tool results
    assert any("1. [pending] find flights" in i.text for i in model.requests["agent"][0].instructions)
    assert "The plan so far:\n1. [pending] find flights" in model.requests["planner"][1].instructions[1].text
    assert model.requests["planner"][1].tool_choice == "none"
    assert result.usage.requests == 6  # 3 agent calls, 3 planner calls: counted in the run's usage
    assert result.usage.total_tokens == 90  # and in its token budget
    assert_run_invariants(result, agent)


def test_a_planner_reply_that_is_not_a_plan_keeps_the_plan_and_the_run_goes_on() -> None:
    from loopwright import ModelError

    model = Model(
        agent=[call("x"), "done"],
        planner=[plan_json(("look", "pending")), ModelError("overloaded", status=529)],
    )
    result = Runner(make(model, planner=Planner())).run_sync("go")
    assert result.outcome == "final" and result.output == "done"
    assert [e.error.kind for e in result.events if e.type == "error_occurred"] == ["plan"]
    model2 = Model(agent=["done"], planner=["Sure, here is my plan: step one..."])
    result2 = Runner(make(model2, planner=Planner())).run_sync("go")
    assert result2.outcome == "final" and result2.run_state.features["planner"].plan is None
    (event,) = [e for e in result2.events if e.type == "error_occurred"]
    assert "the planner's reply is not a plan" in event.error.message


def test_a_run_that_ends_on_a_limit_leaves_the_plan_incomplete() -> None:
    model = Model(agent=[call("a"), call("b"), "late"], planner=[plan_json(("a", "pending"))] * 3)
    result = Runner(make(model, planner=Planner(), limits={"max_iterations": 1, "salvage": False})).run_sync("go")
    assert result.outcome == "limit" and not result.run_state.features["planner"].complete


def test_the_planner_machine_verifies_and_is_chosen_by_the_option() -> None:
    agent = make(Model([]), planner=Planner(), limits={"max_repeated_calls": None})
    assert machine_for(agent) is BUILT_IN_MACHINES["planner"]
    rows = {str(r) for r in BUILT_IN_MACHINES["planner"].rows}
    assert {"start -> plan (else)", "plan -> preprocess (else)", "act -> update_plan (else)"} <= rows


# ------------------------------------------------------------------ observer


def test_the_observer_looks_every_n_passes_and_its_correction_joins_the_history() -> None:
    model = Model(
        agent=[call("a"), call("b"), call("c"), call("d"), "answer"],
        observer=['{"verdict": "drift", "correction": "The user asked about Lisbon, not Porto."}'],
    )
    agent = make(model, observer=Observer(every=3))
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and result.trace.count("observe") == 1
    assert result.trace[result.trace.index("observe") - 1] == "decide"
    (seen,) = [e for e in result.events if e.type == "observed"]
    assert (seen.verdict, seen.iteration) == ("drift", 3)
    assert "[observer] The user asked about Lisbon, not Porto." in [m.text for m in result.messages]
    assert model.requests["observer"][0].tool_choice == "none"
    assert_run_invariants(result, agent)


def test_observer_calls_are_a_budget() -> None:
    model = Model(agent=[call(str(i)) for i in range(8)] + ["answer"], observer=['{"verdict": "ok"}'] * 8)
    agent = make(model, observer=Observer(every=1), limits={"max_observations": 2, "max_iterations": 12})
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and result.trace.count("observe") == 2
    assert result.run_state.charges["max_observations"] == 2


def test_an_ok_verdict_adds_nothing_and_a_bad_reply_is_reported() -> None:
    model = Model(agent=[call("a"), call("b"), "answer"], observer=['{"verdict": "ok", "correction": "x"}', "hmm"])
    result = Runner(make(model, observer=Observer(every=1))).run_sync("go")
    assert not any(m.text.startswith("[observer]") for m in result.messages)
    assert [e.error.kind for e in result.events if e.type == "error_occurred"] == ["observe"]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="every must be a whole number of passes, at least 1"):
        Observer(every=0)
    with pytest.raises(ConfigurationError, match="observer must be an observer"):
        Agent(name="x", model=ScriptedModel([]), observer=3)


def test_planner_and_observer_together() -> None:
    model = Model(
        agent=[call("a"), call("b"), "answer"],
        planner=[plan_json(("a", "pending"))] * 3,
        observer=['{"verdict": "ok"}'],
    )
    agent = make(model, planner=Planner(), observer=Observer(every=2))
    machine = machine_for(agent)
    assert {"plan", "update_plan", "observe"} <= set(machine.states) and machine.name.endswith("planner+observer")
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and result.trace.count("observe") == 1
    assert_run_invariants(result, agent)


def test_a_spent_observer_budget_is_not_blamed_when_the_iterations_run_out() -> None:
    model = Model(agent=[call(str(i)) for i in range(6)] + ["x"], observer=['{"verdict": "ok"}'])
    limits = {"max_observations": 1, "max_iterations": 3, "salvage": False}
    result = Runner(make(model, observer=Observer(every=1), limits=limits)).run_sync("go")
    assert result.outcome == "limit" and result.limit == "max_iterations"
    assert result.run_state.charges["max_observations"] == 1


def test_a_run_that_repeats_itself_is_not_sent_round_through_the_observer() -> None:
    stuck = [call("same") for _ in range(6)] + ["answer"]
    model = Model(agent=stuck, observer=['{"verdict": "loop", "correction": "Stop repeating."}'] * 6)
    agent = make(model, observer=Observer(every=1), limits={"max_observations": 5})
    result = Runner(agent).run_sync("go")
    assert result.limit == "max_repeated_calls" and result.iterations == 4  # not one pass more via observe
