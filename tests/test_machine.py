"""The transition table and the machine built from it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Limits, ModelResponse, TextPart, ToolCall, Usage
from loopwright.errors import MachineError, NoTransitionError
from loopwright.events import ErrorInfo
from loopwright.guards import has_response
from loopwright.machine import DEFAULT_MACHINE, TABLE, LoopMachine, Row
from loopwright.run_state import RunState
from loopwright.stage import TERMINALS, Stage


def test_every_working_state_ends_in_its_fallback() -> None:
    for stage in Stage:
        rows = DEFAULT_MACHINE.rows_from(stage)
        if stage in TERMINALS:
            assert rows == ()
        else:
            assert rows[-1].is_fallback and not any(r.is_fallback for r in rows[:-1]), stage


def test_only_the_cycle_closing_rows_are_bounded() -> None:
    bounded = {(r.source, r.dest, r.bounded_by) for r in TABLE if r.bounded_by}
    assert bounded == {("reason", "reason", "max_model_retries"), ("decide", "preprocess", "max_iterations")}


def test_the_transitions_machine_holds_the_table_in_order() -> None:
    event = DEFAULT_MACHINE.machine.events["advance"]
    for state in DEFAULT_MACHINE.states:
        built = [(t.dest, tuple(c.func for c in t.conditions)) for t in event.transitions.get(state, [])]
        assert built == [(r.dest, r.guards) for r in TABLE if r.source == state]
    assert set(DEFAULT_MACHINE.machine.states) == set(Stage)


def test_table_reads_like_the_diagram() -> None:
    assert [str(r) for r in DEFAULT_MACHINE.rows_from(Stage.DECIDE)] == [
        "decide -> cancelled (cancel_requested)",
        "decide -> done (is_final_response)",
        "decide -> preprocess (within_iteration_budget & within_tool_call_budget & within_token_budget & "
        "within_time_budget) [bounded: max_iterations]",
        "decide -> salvage (salvage_allowed)",
        "decide -> done (else)",
    ]


responses = st.one_of(
    st.none(),
    st.just(ModelResponse(parts=(TextPart(text="hi"),), stop_reason="end_turn")),
    st.just(ModelResponse(parts=(TextPart(text="cut"),), stop_reason="max_tokens")),
    st.just(ModelResponse(parts=(ToolCall(name="t"),))),
    st.just(ModelResponse(parts=())),
)
run_states = st.builds(
    lambda it, att, calls, tokens, resp, merr, err, dl, cancel, lim: RunState(
        run_id="r",
        agent="a",
        limits=lim,
        input="x",
        iteration=it,
        attempt=att,
        tool_calls_made=calls,
        usage=Usage(input_tokens=tokens),
        response=resp,
        model_error=merr,
        error=err,
        deadline_hit=dl,
        cancel_requested=cancel,
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
    ),
)


@settings(max_examples=300, deadline=None)
@given(rs=run_states, stage=st.sampled_from([s for s in Stage if s not in TERMINALS]))
def test_choose_agrees_with_the_transitions_trigger(rs: RunState, stage: Stage) -> None:
    row = DEFAULT_MACHINE.choose(stage, rs)
    assert row.source == stage
    assert DEFAULT_MACHINE.choose_via_trigger(stage, rs) == row.dest
    assert DEFAULT_MACHINE.machine.models == []  # the slow path leaves no model behind


@settings(max_examples=200, deadline=None)
@given(rs=run_states)
def test_cycle_edges_only_fire_with_budget_left(rs: RunState) -> None:
    row = DEFAULT_MACHINE.choose(Stage.DECIDE, rs)
    if row.dest == Stage.PREPROCESS:
        assert rs.iteration < rs.limits.max_iterations
    row = DEFAULT_MACHINE.choose(Stage.REASON, rs)
    if row.dest == Stage.REASON:
        assert rs.attempt <= rs.limits.max_model_retries


def named_guard(rs: RunState) -> bool:
    return True


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([Row("start", "nowhere")], "row start -> nowhere (else) names state 'nowhere', which is not a state"),
        (
            [Row("start", "done", (named_guard,)), Row("start", "failed")]
            + [Row(s, "done") for s in Stage if s not in TERMINALS and s != "start"]
            + [Row("done", "start")],
            "leaves terminal state 'done'",
        ),
        (
            [Row(s, "done", (named_guard,)) for s in Stage if s not in TERMINALS],
            "state 'start' must end in exactly one fallback row (a row with no guards) and it has none",
        ),
        (
            [Row("start", "done"), Row("start", "failed")]
            + [Row(s, "done") for s in Stage if s not in TERMINALS and s != "start"],
            "state 'start' must end in exactly one fallback row (a row with no guards) "
            "and it has one at position 1 of 2",
        ),
        (
            [Row("start", "done", (lambda rs: True,))] + [Row(s, "done") for s in Stage if s not in TERMINALS],
            "guards are named functions",
        ),
        (
            [Row("start", "start", (named_guard,), bounded_by="max_loops")]
            + [Row(s, "done") for s in Stage if s not in TERMINALS],
            "is bounded by 'max_loops', which is not a budget",
        ),
    ],
)
def test_malformed_tables_are_refused_with_the_fix(rows: list[Row], message: str) -> None:
    with pytest.raises(MachineError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        LoopMachine(rows)


def test_no_matching_row_is_a_loud_error() -> None:
    machine = LoopMachine([Row(s, "done") for s in Stage if s not in TERMINALS])
    object.__setattr__(
        machine,
        "_compiled",
        {**machine._compiled, "start": ((Row("start", "done", (has_response,)), (has_response,)),)},
    )
    rs = RunState(run_id="r", agent="a", limits=Limits(), input="x")
    with pytest.raises(NoTransitionError, match="no row out of state 'start' matched"):
        machine.choose("start", rs)
