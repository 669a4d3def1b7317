"""verify: the five rules catch broken tables with actionable messages; every built-in variant passes."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Limits, ModelResponse, TextPart, ToolCall, Usage
from loopwright.data.errors import MachineError
from loopwright.data.events import ErrorInfo
from loopwright.data.run_state import RunState
from loopwright.features import BUILT_IN_MACHINES
from loopwright.features.multi_agent import Transfers
from loopwright.features.waiting import Waiting
from loopwright.machines.extend import Rule
from loopwright.machines.verify import verify
from loopwright.table.guards import cancel_requested, has_tool_calls, within_iteration_budget
from loopwright.table.machine import LoopMachine, Row

STATES = ["start", "work", "extra", "done", "failed", "cancelled"]


def test_every_built_in_variant_passes() -> None:
    for name, machine in BUILT_IN_MACHINES.items():
        report = verify(machine)
        assert report.ok, f"{name}:\n{report}"


def test_the_report_reads_as_the_check_command_prints_it() -> None:
    assert str(verify(BUILT_IN_MACHINES["agent"])) == textwrap.dedent(
        """\
        machine 'agent': 10 states, 26 rows
          ok   1. every state is reachable from start
          ok   2. every working state can reach a terminal (done, failed, cancelled)
          ok   3. every cycle passes through a bounded edge, so every run terminates
          ok   4. every working state ends in one fallback row, so no run gets stuck
          ok   5. every state, guard and budget the table names exists
        no violations: every run of this machine ends"""
    )


def test_an_unbounded_cycle_is_caught() -> None:
    rows = [
        Row("start", "work"),
        Row("work", "extra", (has_tool_calls,)),
        Row("work", "done"),
        Row("extra", "work"),
    ]
    report = verify(rows, states=STATES[:4], terminals=["done"])
    (v,) = report.violations
    assert (v.rule, v.kind, v.states) == (3, "unbounded_cycle", ("work", "extra"))
    assert v.message == (
        "cycle work -> extra -> work has no bounded edge, so a run could go round it forever; bound one of its rows "
        "(Row(..., bounded_by='max_iterations') with a guard that tests that budget, e.g. within_iteration_budget) "
        "or break the cycle. Rows: work -> extra (has_tool_calls); extra -> work (else)"
    )
    bounded = [
        rows[0],
        rows[1],
        rows[2],
        Row("extra", "work", (within_iteration_budget,), "max_iterations"),
        Row("extra", "done"),
    ]
    assert verify(bounded, states=STATES[:4], terminals=["done"]).ok


def test_a_self_loop_without_a_bound_is_a_cycle() -> None:
    rows = [Row("start", "work"), Row("work", "work", (has_tool_calls,)), Row("work", "done")]
    (v,) = verify(rows, terminals=["done"]).violations
    assert v.kind == "unbounded_cycle" and v.rows == ("work -> work (has_tool_calls)",)


def test_a_dead_end_is_caught() -> None:
    rows = [
        Row("start", "work"),
        Row("work", "extra", (has_tool_calls,)),
        Row("work", "done"),
        Row("extra", "extra", (within_iteration_budget,), bounded_by="max_iterations"),
        Row("extra", "extra"),
    ]
    report = verify(rows, terminals=["done"])
    kinds = [(v.rule, v.kind) for v in report.violations]
    assert kinds == [(2, "dead_end"), (3, "unbounded_cycle")]
    assert report.violations[0].message == (
        "state extra cannot reach a terminal (done): a run that enters them never ends; add a row from them toward "
        "a terminal (e.g. -> cancelled if cancel_requested, or a fallback -> done)"
    )


def test_an_unreachable_state_is_caught() -> None:
    rows = [Row("start", "work"), Row("work", "done"), Row("extra", "done")]
    (v,) = verify(rows, terminals=["done"]).violations
    assert (v.rule, v.kind, v.states) == (1, "unreachable", ("extra",))
    assert v.message == (
        "state extra cannot be reached from 'start': no path of rows leads there; add a row into it from a "
        "reachable state, or remove it and its rows"
    )


def test_a_state_with_no_fallback_is_caught() -> None:
    rows = [Row("start", "work"), Row("work", "done", (has_tool_calls,)), Row("work", "cancelled", (cancel_requested,))]
    report = verify(rows, terminals=["done", "cancelled"])
    (v,) = report.violations
    assert (v.rule, v.kind, v.states) == (4, "no_fallback", ("work",))
    assert v.message == (
        "state 'work' has no fallback row: when none of its guards holds, a run is stuck there; add a last row "
        "work -> ... with no guards (after work -> cancelled (cancel_requested))"
    )
    with pytest.raises(MachineError):  # the machine refuses to build it; verify still reports it
        LoopMachine(rows, terminals=["done", "cancelled"])


def test_rows_after_a_fallback_and_states_without_rows_are_caught() -> None:
    rows = [Row("start", "work"), Row("work", "done"), Row("work", "failed", (has_tool_calls,))]
    report = verify(rows, states=["start", "work", "idle", "done", "failed"], terminals=["done", "failed"])
    kinds = [v.kind for v in report.violations]
    assert kinds == ["unreachable", "dead_end", "rows_after_fallback", "no_rows"]
    assert report.broken(4)[0].message == (
        "state 'work' has rows after its fallback row work -> done (else), which can never fire: "
        "work -> failed (has_tool_calls); move the fallback last"
    )


def test_an_unknown_guard_and_budget_are_caught() -> None:
    def approved(rs: RunState) -> bool:
        return True

    rows = [
        Rule("start", "work"),
        Rule("work", "done", "has_tool_cals"),
        Rule("work", "work", "approved", bounded_by="max_loops"),
        Rule("work", "done"),
    ]
    report = verify(rows, terminals=["done"], guards={"approved": approved})
    assert [(v.rule, v.kind) for v in report.violations] == [(5, "unknown_guard"), (5, "unknown_budget")]
    assert report.violations[0].message == (
        "row work -> done (has_tool_cals) names guard 'has_tool_cals', which is not a guard (did you mean "
        "'has_tool_calls'?): define `def has_tool_cals(rs: RunState) -> bool` and pass "
        "guards={'has_tool_cals': has_tool_cals}, or use one of the guards loopwright.extend exports"
    )
    assert report.violations[1].message.startswith(
        "row work -> work (approved) [bounded: max_loops] is bounded by 'max_loops', which is not a budget; use one "
        "of max_iterations, "
    )
    assert not verify(rows, terminals=["done"]).ok  # without the user's guard, 'approved' is unknown too


def test_a_bound_without_a_guard_and_rows_out_of_a_terminal_are_caught() -> None:
    rows = [Row("start", "work"), Row("work", "work", bounded_by="max_iterations"), Row("done", "work")]
    kinds = [v.kind for v in verify(rows, terminals=["done"]).violations]
    assert "unguarded_bound" in kinds and "terminal_has_rows" in kinds


def test_a_bounded_row_is_not_a_fallback() -> None:
    rows = [
        Row("start", "work"),
        Row("work", "done", (has_tool_calls,)),
        Row("work", "work", bounded_by="max_iterations"),
    ]
    (v,) = verify(rows, terminals=["done"]).violations
    assert (v.rule, v.kind, v.states) == (4, "unguarded_bound", ("work",))
    assert v.message == (
        "row work -> work (else) [bounded: max_iterations] is bounded by 'max_iterations' but has no guard: a bounded "
        "row is skipped once its budget is spent, so it cannot be the fallback; add a guard (or a fallback row after "
        "it)"
    )
    assert verify([*rows, Row("work", "done")], terminals=["done"]).ok  # the fix: a fallback after it


def test_budgets_are_the_names_a_bound_may_use() -> None:
    rows = [
        Row("start", "work"),
        Row("work", "work", (has_tool_calls,), bounded_by="max_loops"),
        Row("work", "done"),
    ]
    (v,) = verify(rows, terminals=["done"]).violations
    assert v.message == (
        "row work -> work (has_tool_calls) [bounded: max_loops] is bounded by 'max_loops', which is not a budget; "
        "use one of max_iterations, max_model_retries, max_suspensions, max_transfers"
    )
    assert verify(rows, terminals=["done"], budgets=["max_loops"]).ok
    v = verify(BUILT_IN_MACHINES["agent"], budgets=["max_loops"]).broken(5)[0]
    assert v.kind == "unknown_budget" and v.message.endswith("use one of max_loops")


def test_a_machine_names_its_budgets() -> None:
    machine = LoopMachine(
        [
            Row("start", "work"),
            Row("work", "work", (has_tool_calls,), bounded_by="max_model_retries"),
            Row("work", "done"),
        ],
        terminals=["done"],
    )
    assert verify(machine).ok  # the core's budget registry: max_model_retries may bound a row
    (v,) = verify(machine.rows, terminals=["done"], budgets=["max_iterations"]).violations
    assert v.kind == "unknown_budget" and v.message.endswith("use one of max_iterations")


def test_the_report_names_every_failure() -> None:
    rows = [Row("start", "work"), Row("work", "extra", (has_tool_calls,)), Row("work", "done"), Row("extra", "work")]
    text = str(verify(rows, terminals=["done"], name="broken"))
    assert text.splitlines()[0] == "machine 'broken': 4 states, 4 rows"
    assert "  FAIL 3. every cycle passes through a bounded edge, so every run terminates" in text
    assert text.endswith("1 violation")


# ------------------------------------------------------------------ rule 4, as a property

_RESPONSES = st.one_of(
    st.none(),
    st.builds(
        lambda text, stop: ModelResponse(parts=(TextPart(text=text),), stop_reason=stop),
        st.text(max_size=3),
        st.sampled_from(["end_turn", "max_tokens", "pause_turn", None]),
    ),
    st.builds(
        lambda n: ModelResponse(parts=tuple(ToolCall(name="t") for _ in range(n)), stop_reason="tool_use"),
        st.integers(1, 3),
    ),
)
_ERRORS = st.one_of(st.none(), st.builds(lambda r: ErrorInfo(kind="model", message="x", retryable=r), st.booleans()))


@st.composite
def run_states(draw: st.DrawFn) -> RunState:
    limits = Limits(
        max_iterations=draw(st.integers(1, 5)),
        max_model_retries=draw(st.integers(0, 3)),
        max_tool_calls=draw(st.none() | st.integers(1, 5)),
        max_total_tokens=draw(st.none() | st.integers(1, 100)),
        salvage=draw(st.booleans()),
    )
    rs = RunState(run_id="r", agent="a", limits=limits, input="hi")
    rs.features = {"multi_agent": Transfers(to=draw(st.none() | st.just("b"))), "waiting": Waiting()}
    rs.iteration = draw(st.integers(0, 6))
    rs.attempt = draw(st.integers(0, 5))
    rs.response = draw(_RESPONSES)
    rs.model_error = draw(_ERRORS)
    rs.error = draw(st.none() | st.just(ErrorInfo(kind="x", message="y")))
    rs.deadline_hit = draw(st.booleans())
    rs.cancel_requested = draw(st.booleans())
    rs.tool_calls_made = draw(st.integers(0, 6))
    rs.usage = Usage(input_tokens=draw(st.integers(0, 120)))
    return rs


@settings(max_examples=150, deadline=None)
@given(run_states(), st.sampled_from(sorted(BUILT_IN_MACHINES)))
def test_rule_4_the_table_always_yields_exactly_one_next_state(rs: RunState, variant: str) -> None:
    machine = BUILT_IN_MACHINES[variant]
    for state in machine.states:
        if state in machine.terminals:
            continue
        row = machine.choose(state, rs)
        assert row.source == state and row.dest in machine.states
        if all(machine.has_room(r, rs) for r in machine.rows_from(state)):  # the engine's own check aside
            assert machine.choose_via_trigger(state, rs) == row.dest


async def _noop_stage(rs: RunState, ctx: object) -> None:
    """A state of the user's that does nothing."""


def _over_budget(rs: RunState) -> bool:
    return rs.iteration > 99


def _agent_that_waits() -> object:
    from loopwright import Agent, ScriptedModel, tool

    @tool(requires_confirmation=True)
    def wire(amount: int) -> str:
        """Send money (asks a person first)."""
        return f"sent {amount}"

    return Agent(name="w", model=ScriptedModel(["done"]), tools=[wire])


def test_a_state_on_acts_exit_looping_back_while_calls_wait_is_caught() -> None:
    """Issue 13: with the waiting feature, a state of the user's between act and decide that
    goes back to preprocess carries the run past its held calls; verify names the row and what
    to do. The same state going on to decide is fine, as are the built-in machines that wait."""
    from loopwright.machines.extend import extend

    back = Row("x0", "preprocess", (_over_budget,), bounded_by="max_iterations")
    loops = extend(
        _agent_that_waits(),  # type: ignore[arg-type]
        name="loops",
        states={"x0": _noop_stage},
        redirect={("act", "decide"): "x0"},
        rows=[Rule("x0", "cancelled", "cancel_requested"), back, Rule("x0", "decide")],
        check=False,
    )
    report = verify(loops)
    assert not report.ok and [v.rule for v in report.violations] == [6]
    message = report.violations[0].message
    assert "row x0 -> preprocess (_over_budget) [bounded: max_iterations]" in message
    assert "decide -> suspended (has_pending_requests & within_suspension_budget)" in message
    assert "End 'x0''s way with a row to 'decide'" in message
    assert "FAIL 6. calls held by act wait before the loop goes on" in str(report)
    with pytest.raises(MachineError, match="FAIL 6"):  # extend() checks the machine it builds
        extend(
            _agent_that_waits(),  # type: ignore[arg-type]
            name="loops",
            states={"x0": _noop_stage},
            redirect={("act", "decide"): "x0"},
            rows=[Rule("x0", "cancelled", "cancel_requested"), back, Rule("x0", "decide")],
        )

    goes_on = extend(
        _agent_that_waits(),  # type: ignore[arg-type]
        name="goes_on",
        states={"x0": _noop_stage},
        redirect={("act", "decide"): "x0"},
        rows=[Rule("x0", "cancelled", "cancel_requested"), Rule("x0", "decide")],
    )
    assert verify(goes_on).ok
    assert "6. calls held" not in str(verify(BUILT_IN_MACHINES["agent"]))  # a machine that does not wait
