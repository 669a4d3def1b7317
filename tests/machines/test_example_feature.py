"""The example feature (tests/example_feature.py) composes like a built-in one: it runs, saves, verifies, draws."""

from __future__ import annotations

from dataclasses import dataclass

from loopwright import Agent, Limits, Runner, RunState, ScriptedModel, ToolCall, approve, diagram, tool, verify
from loopwright.extend import Extension, Rule
from loopwright.features import machine_for
from tests.example_feature import CHECK, DOUBLE_CHECK, Checks, checks
from tests.helpers import add


@tool(requires_confirmation=True)
def wire(amount: int) -> str:
    """Send money (asks a person first)."""
    return f"sent {amount}"


def _call(name: str = "add", **args: object) -> list[ToolCall]:
    return [ToolCall(name=name, args=args or {"a": 1, "b": 2})]


def _agent(script: list[object], **options: object) -> Agent:
    return Agent(
        name="checker",
        model=ScriptedModel(script),  # type: ignore[arg-type]
        tools=[add, wire],
        extensions=[DOUBLE_CHECK],
        limits=Limits(retry_backoff_s=0),
        **options,  # type: ignore[arg-type]
    )


def test_the_table_has_the_check_state_between_postprocess_and_act() -> None:
    machine = machine_for(_agent([]))
    assert CHECK in machine.states and "double_check" in machine.features
    assert [str(r) for r in machine.rows if CHECK in (r.source, r.dest)] == [
        "postprocess -> check (has_tool_calls)",
        "check -> cancelled (cancel_requested)",
        "check -> check (wants_another_look) [bounded: max_checks]",
        "check -> act (else)",
    ]
    assert machine.budgets["max_checks"].limit == 3


def test_each_tool_using_reply_is_checked_once_by_default() -> None:
    agent = Agent(name="plain", model=ScriptedModel([_call(), _call(), "done"]), tools=[add], extensions=[DOUBLE_CHECK])
    result = Runner(agent).run_sync("add twice")
    assert result.outcome == "final" and result.output == "done"
    assert result.trace.count(CHECK) == 2
    assert result.trace[:7] == ["start", "preprocess", "reason", "postprocess", "check", "act", "decide"]
    assert result.run_state.features["double_check"] == Checks(seen=2, looks=1)


def test_the_self_loop_is_bounded_by_its_own_budget() -> None:
    result = Runner(_agent([_call(), "done"])).run_sync("add", state={"looks": 100})
    assert result.outcome == "final"
    loops = sum(1 for a, b in zip(result.trace, result.trace[1:], strict=False) if a == b == CHECK)
    assert loops == 3 and result.run_state.charges["max_checks"] == 3
    assert checks(result.run_state).seen == 4


def test_the_request_hook_tells_the_model_once_a_reply_was_checked() -> None:
    model = ScriptedModel([_call(), "done"])
    agent = Agent(name="plain", model=model, tools=[add], extensions=[DOUBLE_CHECK])
    Runner(agent).run_sync("add")
    first, second = model.requests
    assert all("double-checked" not in i.text for i in first.instructions)
    assert [i.text for i in second.instructions if "double-checked" in i.text] == [
        "Your tool calls have been double-checked 1 time(s)."
    ]


def test_the_slice_round_trips_through_json() -> None:
    result = Runner(_agent([_call(), "done"])).run_sync("add", state={"looks": 2})
    rs = result.run_state
    loaded = RunState.from_json(rs.to_json())
    assert isinstance(loaded.features["double_check"], Checks)
    assert loaded.features["double_check"] == rs.features["double_check"] == Checks(seen=2, looks=2)
    assert loaded.features == rs.features


def test_it_verifies_and_draws() -> None:
    agent = _agent([])
    assert verify(agent).ok
    text = diagram(agent)
    assert 'state "check" as check' in text
    assert "postprocess --> check: has_tool_calls" in text
    assert "check --> check: ⟲ wants_another_look [bounded: max_checks]" in text
    assert "check --> act: else" in text


def test_with_sub_agents_and_a_waiting_tool_every_feature_keeps_its_rows() -> None:
    helper = Agent(name="helper", model=ScriptedModel([]), description="helps")
    agent = _agent([_call("wire", amount=5), "sent"], sub_agents=[helper])
    machine = machine_for(agent)
    assert {"transfer", "suspended", CHECK} <= set(machine.states)
    assert machine.features == {"multi_agent", "waiting", "loop_detection", "double_check"}
    rows = {str(r) for r in machine.rows}
    assert (
        "decide -> transfer (transfer_requested & within_transfer_budget & not_ping_pong & within_iteration_budget "
        "& within_tool_call_budget & within_token_budget & within_cost_budget & within_time_budget)"
        " [bounded: max_transfers]"
    ) in rows
    assert "decide -> suspended (has_pending_requests & within_suspension_budget) [bounded: max_suspensions]" in rows
    assert "check -> check (wants_another_look) [bounded: max_checks]" in rows
    assert verify(machine).ok

    runner = Runner(agent)
    paused = runner.run_sync("wire 5")
    assert paused.outcome == "suspended" and CHECK in paused.trace
    saved = RunState.from_json(paused.run_state.to_json())
    assert set(saved.features) == {"multi_agent", "waiting", "loop_detection", "double_check"}
    (request,) = paused.pending
    result = runner.resume_sync(saved, {request.call_id: approve()})
    assert result.outcome == "final" and result.output == "sent"
    assert result.messages[2].parts[0].content == "sent 5"  # type: ignore[union-attr]


@dataclass(slots=True)
class Queue:
    """A slice with a field called ``pending`` that has nothing to do with waiting tools."""

    pending: int = 0


async def _count(rs: RunState, ctx: object) -> None:
    rs.features["queue_counter"].pending += 1


def test_a_slice_may_name_its_fields_freely() -> None:
    """A feature's slice is its own: the engine must not read other features' fields by name
    (RunResult once collected ``pending`` from every slice, so an int field broke every run)."""
    ext = Extension(
        name="queue_counter",
        states={"count": _count},  # type: ignore[dict-item]
        redirect={("act", "decide"): "count"},
        rows=[Rule("count", "decide")],
        slice=Queue,
    )
    agent = Agent(name="q", model=ScriptedModel([_call(), "done"]), tools=[add], extensions=[ext])
    result = Runner(agent).run_sync("add")
    assert result.outcome == "final" and result.pending == []
    assert result.run_state.features["queue_counter"] == Queue(pending=1)
