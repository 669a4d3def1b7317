"""The transition table and the machine built from it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Limits, ModelResponse, TextPart, ToolCall, Usage
from loopwright.data.errors import MachineError, NoTransitionError
from loopwright.data.events import ErrorInfo
from loopwright.data.run_state import RunState
from loopwright.data.stage import TERMINALS, Stage
from loopwright.features import BUILT_IN_MACHINES
from loopwright.features.multi_agent import Transfers
from loopwright.features.waiting import Waiting
from loopwright.table.guards import has_response
from loopwright.table.machine import CORE, LoopMachine, Row

TABLE = BUILT_IN_MACHINES["multi_agent+waiting"].rows


@pytest.mark.parametrize("machine", BUILT_IN_MACHINES.values(), ids=list(BUILT_IN_MACHINES))
def test_every_working_state_ends_in_its_fallback(machine: LoopMachine) -> None:
    for stage in machine.states:
        rows = machine.rows_from(stage)
        if stage in TERMINALS:
            assert rows == ()
        else:
            assert rows[-1].is_fallback and not any(r.is_fallback for r in rows[:-1]), stage


def test_only_the_cycle_closing_rows_are_bounded() -> None:
    bounded = {(r.source, r.dest, r.bounded_by) for r in TABLE if r.bounded_by}
    assert bounded == {
        ("reason", "reason", "max_model_retries"),
        ("reason", "reason", "max_fallbacks"),
        ("decide", "preprocess", "max_iterations"),
        ("decide", "transfer", "max_transfers"),
        ("decide", "suspended", "max_suspensions"),
    }


@pytest.mark.parametrize("machine", BUILT_IN_MACHINES.values(), ids=list(BUILT_IN_MACHINES))
def test_the_transitions_machine_holds_the_table_in_order(machine: LoopMachine) -> None:
    event = machine.machine.events["advance"]
    for state in machine.states:
        built = [(t.dest, tuple(c.func for c in t.conditions)) for t in event.transitions.get(state, [])]
        assert built == [(r.dest, r.guards) for r in machine.rows if r.source == state]


def test_variants_hold_the_states_their_rows_name() -> None:
    assert "transfer" not in CORE.states
    assert BUILT_IN_MACHINES["multi_agent"].states == (*CORE.states[:7], "transfer", "done", "failed", "cancelled")
    edges = {name: {(r.source, r.dest, r.bounded_by) for r in m.rows} for name, m in BUILT_IN_MACHINES.items()}
    assert edges["agent"] < edges["multi_agent"] < edges["multi_agent+waiting"]
    assert edges["agent"] < edges["waiting"] < edges["multi_agent+waiting"]
    assert BUILT_IN_MACHINES["waiting"].waiting == {"suspended"} and CORE.waiting == frozenset()


def test_table_reads_like_the_diagram() -> None:
    assert [str(r) for r in CORE.rows_from(Stage.DECIDE)] == [
        "decide -> cancelled (cancel_requested)",
        "decide -> done (is_final_response)",
        "decide -> preprocess (within_iteration_budget & within_tool_call_budget & "
        "within_token_budget & within_cost_budget & within_time_budget) [bounded: max_iterations]",
        "decide -> salvage (salvage_allowed)",
        "decide -> done (else)",
    ]
    assert [str(r) for r in BUILT_IN_MACHINES["multi_agent+waiting"].rows_from(Stage.DECIDE)] == [
        "decide -> cancelled (cancel_requested)",
        "decide -> suspended (has_pending_requests & within_suspension_budget) [bounded: max_suspensions]",
        "decide -> done (is_final_response)",
        "decide -> transfer (transfer_requested & within_transfer_budget & not_ping_pong & within_iteration_budget"
        " & within_tool_call_budget & within_token_budget & within_cost_budget & within_time_budget)"
        " [bounded: max_transfers]",
        "decide -> preprocess (no_transfer_requested & within_iteration_budget & within_tool_call_budget & "
        "within_token_budget & within_cost_budget & within_time_budget) [bounded: max_iterations]",
        "decide -> salvage (salvage_allowed)",
        "decide -> done (else)",
    ]
    terminal = [(r.label, r.outcome) for r in CORE.rows if r.dest in TERMINALS]
    assert set(terminal) == {
        ("cancel_requested", "cancelled"),
        ("has_error", "failed"),
        ("else", "failed"),
        ("is_final_response", "final"),
        ("else", "limit"),
        ("request_over_token_budget", "limit"),
        ("request_over_cost_budget", "limit"),
        ("has_response", "salvaged"),
    }


responses = st.one_of(
    st.none(),
    st.just(ModelResponse(parts=(TextPart(text="hi"),), stop_reason="end_turn")),
    st.just(ModelResponse(parts=(TextPart(text="cut"),), stop_reason="max_tokens")),
    st.just(ModelResponse(parts=(ToolCall(name="t"),))),
    st.just(ModelResponse(parts=())),
)
run_states = st.builds(
    lambda it, att, calls, tokens, resp, merr, err, dl, cancel, lim, hops, target, own, cost: RunState(
        run_id="r",
        agent="a",
        limits=lim,
        input="x",
        iteration=it,
        attempt=att,
        tool_calls_made=calls,
        usage=Usage(input_tokens=tokens, cost_usd=cost),
        turn_limits=own,
        turn_start={"max_iterations": it // 2, "max_tool_calls": calls // 2} if own is not None else {},
        response=resp,
        model_error=merr,
        error=err,
        deadline_hit=dl,
        cancel_requested=cancel,
        features={"multi_agent": Transfers(to=target, hops=hops), "waiting": Waiting()},
    ),
    st.integers(0, 6),
    st.integers(0, 4),
    st.integers(0, 8),
    st.integers(0, 200),
    responses,
    st.none() | st.builds(lambda r: ErrorInfo(kind="model", message="m", retryable=r), st.booleans()),
    st.none() | st.just(ErrorInfo(kind="instruction", message="i")),
    st.booleans(),
    st.booleans(),
    st.builds(
        Limits,
        max_iterations=st.integers(1, 5),
        max_tool_calls=st.none() | st.integers(1, 5),
        max_total_tokens=st.none() | st.integers(1, 150),
        max_model_retries=st.integers(0, 3),
        salvage=st.booleans(),
        max_transfers=st.integers(0, 4),
        max_ping_pong=st.integers(1, 3),
        max_cost_usd=st.none() | st.sampled_from([0.01, 0.5]),
    ),
    st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("ab")), max_size=5),
    st.none() | st.sampled_from("ab"),
    st.none()  # an agent's own limits: the chooser's written-out budget tests call the guard then
    | st.builds(Limits, max_iterations=st.integers(1, 4), max_tool_calls=st.none() | st.integers(1, 4)),
    st.none() | st.sampled_from([Decimal("0"), Decimal("0.02"), Decimal("1")]),
)


@settings(max_examples=300, deadline=None)
@given(rs=run_states, machine=st.sampled_from(list(BUILT_IN_MACHINES.values())), data=st.data())
def test_choose_agrees_with_the_transitions_trigger(rs: RunState, machine: LoopMachine, data: st.DataObject) -> None:
    stage = data.draw(st.sampled_from([s for s in machine.states if s not in TERMINALS]))
    row = machine.choose(stage, rs)
    assert row.source == stage
    if all(machine.has_room(r, rs) for r in machine.rows_from(stage)):  # the engine's own check aside
        assert machine.choose_via_trigger(stage, rs) == row.dest
    assert machine.machine.models == []  # the slow path leaves no model behind


@settings(max_examples=200, deadline=None)
@given(rs=run_states)
def test_cycle_edges_only_fire_with_budget_left(rs: RunState) -> None:
    row = BUILT_IN_MACHINES["multi_agent"].choose(Stage.DECIDE, rs)
    if row.dest == Stage.PREPROCESS:
        assert rs.iteration < rs.limits.max_iterations
    if row.dest == "transfer":
        assert len(rs.features["multi_agent"].hops) < rs.limits.max_transfers
    row = CORE.choose(Stage.REASON, rs)
    if row.dest == Stage.REASON:
        assert rs.attempt <= (rs.turn_limits or rs.limits).max_model_retries  # (a pass budget: the agent's own)


def named_guard(rs: RunState) -> bool:
    return True


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([Row("start", "nowhere")], "row start -> nowhere (else) names state 'nowhere', which is not a state"),
        (
            [Row("start", "done", (named_guard,)), Row("start", "failed")]
            + [Row(s, "done") for s in CORE.states if s not in TERMINALS and s != "start"]
            + [Row("done", "start")],
            "leaves terminal state 'done'",
        ),
        (
            [Row(s, "done", (named_guard,)) for s in CORE.states if s not in TERMINALS],
            "state 'start' has no fallback row: when none of its guards holds, a run is stuck there",
        ),
        (
            [Row("start", "done"), Row("start", "failed")]
            + [Row(s, "done") for s in CORE.states if s not in TERMINALS and s != "start"],
            "state 'start' has rows after its fallback row start -> done (else), which can never fire",
        ),
        (
            [Row("start", "done", (lambda rs: True,))] + [Row(s, "done") for s in CORE.states if s not in TERMINALS],
            "guards are named functions",
        ),
        (
            [Row("start", "start", (named_guard,), bounded_by="max_loops")]
            + [Row(s, "done") for s in CORE.states if s not in TERMINALS],
            "is bounded by 'max_loops', which is not a budget",
        ),
    ],
)
def test_malformed_tables_are_refused_with_the_fix(rows: list[Row], message: str) -> None:
    with pytest.raises(MachineError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        LoopMachine(rows, states=CORE.states)


def _walked(machine: LoopMachine, state: str, rs: RunState) -> Row:
    """The table's choice as the table reads: its rows out of ``state`` in order, a bounded row
    skipped when its budget's charges have reached the cap in force, the first whose guards
    all hold (what the compiled choosers must give)."""
    for row, guards, budget in machine._compiled[state]:
        if budget is not None and rs.charges.get(budget.name, 0) >= budget.cap(rs):
            continue
        if all(guard(rs) for guard in guards):
            return row
    raise NoTransitionError(state)


@settings(max_examples=300, deadline=None)
@given(rs=run_states, machine=st.sampled_from(list(BUILT_IN_MACHINES.values())), data=st.data())
def test_the_compiled_choice_is_the_tables_rows_walked_in_order(
    rs: RunState, machine: LoopMachine, data: st.DataObject
) -> None:
    """Every state of every built-in machine, spent budgets included (the trigger comparison
    above leaves those out): the generated chooser picks the row the walk picks."""
    bounded = sorted({row.bounded_by for row in machine.rows if row.bounded_by})
    rs.charges = data.draw(st.dictionaries(st.sampled_from(bounded), st.integers(0, 6))) if bounded else {}
    for state in machine.states:
        if state not in machine.terminals:
            assert machine.choose(state, rs) is _walked(machine, state, rs)


def test_no_matching_row_is_a_loud_error() -> None:
    from loopwright.table.machine import _chooser

    machine = LoopMachine([Row(s, "done") for s in CORE.states if s not in TERMINALS])
    only = Row("start", "done", (has_response,))  # (the checks refuse a state without a fallback: made by hand)
    machine._compiled = {**machine._compiled, "start": ((only, (has_response,), None),)}
    machine.choosers["start"] = _chooser("start", machine._compiled["start"], machine.rows_from)
    rs = RunState(run_id="r", agent="a", limits=Limits(), input="x")
    with pytest.raises(NoTransitionError, match=r"no row out of state 'start' matched \(rows tried: start -> done"):
        machine.choose("start", rs)
    rs.response = ModelResponse()
    assert machine.choose("start", rs) is only


def _entered(machine: LoopMachine, state: str, rs: RunState) -> tuple[Row, set[str]]:
    """The row ``machine`` chooses out of ``state``, and the names of the Python functions entered."""
    import sys

    names: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            names.add(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        row = machine.choose(state, rs)
    finally:
        sys.setprofile(None)
    return row, names


@pytest.mark.parametrize("cap", [None, 0.5])
def test_a_budget_that_is_off_costs_its_guard_no_call(cap: float | None) -> None:
    """Issue 38: the cost guard of a run without ``max_cost_usd`` is not called (no frame, no
    Decimal made of the cap) on decide's way round; with a cap it is, and it still decides."""
    call = ToolCall(id="c1", name="add", args={"a": 1})
    rs = RunState(run_id="r", agent="a", input="x", limits=Limits(max_iterations=5, max_cost_usd=cap))
    rs.iteration, rs.response = 1, ModelResponse(parts=(call,), stop_reason="tool_use")
    row, names = _entered(CORE, Stage.DECIDE, rs)
    assert row.dest == Stage.PREPROCESS
    called = {"_cost_room", "has_tool_calls", "is_final_response", "turn_guard", "run_spent", "_time_left"} & names
    assert called == ({"_cost_room"} if cap is not None else set()), names
    rs.usage = Usage(input_tokens=10, requests=1)  # (a step of a model without a price: any cost budget is spent)
    row, _ = _entered(CORE, Stage.DECIDE, rs)
    assert row.dest == (Stage.PREPROCESS if cap is None else Stage.SALVAGE)
