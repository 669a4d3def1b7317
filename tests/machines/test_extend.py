"""extend: the worked example (a review state vetoing tool calls) runs, draws, verifies; bad ones are refused."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from loopwright import Agent, Limits, RunContext, Runner, RunState, ScriptedModel, ToolCall, tool
from loopwright.cli import main
from loopwright.data.errors import MachineError
from loopwright.machines.diagram import diagram
from loopwright.machines.extend import Rule, extend, veto
from loopwright.machines.verify import verify
from loopwright.table.machine import CORE, Row

FORBIDDEN = {"delete_account"}
deleted: list[str] = []


@tool
def delete_account(user: str) -> str:
    """Delete a user's account."""
    deleted.append(user)
    return f"deleted {user}"


@tool
def lookup(user: str) -> str:
    """Look a user up."""
    return f"{user}: active"


async def review(rs: RunState, ctx: RunContext) -> None:
    """Veto forbidden tool calls; act answers them with an error and runs the rest."""
    for call in rs.response.tool_calls if rs.response else ():
        if call.name in FORBIDDEN:
            veto(rs, call, "deleting accounts needs a human")


reviewed = extend(
    name="reviewed",
    states={"review": review},
    redirect={("postprocess", "act"): "review"},
    rows=[Rule("review", "cancelled", "cancel_requested"), Rule("review", "act")],
)


def _agent(script: list[object]) -> Agent:
    return Agent(name="support", model=ScriptedModel(script), tools=[lookup, delete_account], machine=reviewed)  # type: ignore[arg-type]


def test_the_extended_table_reads_as_written() -> None:
    assert [str(r) for r in reviewed.rows if "review" in (r.source, r.dest)] == [
        "postprocess -> review (has_tool_calls)",
        "review -> cancelled (cancel_requested)",
        "review -> act (else)",
    ]
    assert reviewed.states[-4:] == ("review", "done", "failed", "cancelled")
    assert CORE.rows_from("postprocess")[1].dest == "act"  # the base is untouched


def test_the_worked_example_vetoes_one_call_and_runs_the_other() -> None:
    deleted.clear()
    calls = [
        ToolCall(id="c1", name="lookup", args={"user": "ann"}),
        ToolCall(id="c2", name="delete_account", args={"user": "ann"}),
    ]
    result = Runner(_agent([calls, "Ann is active; deleting needs a human."])).run_sync("delete ann")
    assert result.outcome == "final" and deleted == []
    assert result.trace[:7] == ["start", "preprocess", "reason", "postprocess", "review", "act", "decide"]
    answers = result.messages[2]
    assert [(p.call_id, p.content, p.is_error) for p in answers.parts] == [  # type: ignore[union-attr]
        ("c1", "ann: active", False),
        ("c2", "tool 'delete_account' was vetoed: deleting accounts needs a human", True),
    ]
    answered = [(e.call_id, e.is_error) for e in result.events if e.type == "tool_answered"]
    assert sorted(answered) == [("c1", False), ("c2", True)]
    assert result.tool_calls == 2  # the model asked for two; one was refused
    assert result.run_state.vetoes == {}  # answered, so cleared


def test_vetoing_every_call_still_answers_them_and_the_loop_goes_round() -> None:
    deleted.clear()
    result = Runner(_agent([[ToolCall(id="d", name="delete_account", args={"user": "bob"})], "Sorry."])).run_sync("x")
    assert result.outcome == "final" and result.output == "Sorry." and deleted == []
    assert result.messages[2].parts[0].is_error  # type: ignore[union-attr]
    assert result.trace.count("preprocess") == 2


def test_calls_nobody_vetoes_run_as_usual() -> None:
    result = Runner(_agent([[ToolCall(name="lookup", args={"user": "cy"})], "ok"])).run_sync("x")
    assert result.outcome == "final" and result.messages[2].parts[0].content == "cy: active"  # type: ignore[union-attr]


def test_the_extension_verifies_and_draws() -> None:
    assert verify(reviewed).ok
    text = diagram(reviewed)
    assert "postprocess --> review: has_tool_calls" in text and "review --> act: else" in text


def test_veto_records_plain_data() -> None:
    rs = RunState(run_id="r", agent="a", limits=Limits(), input="")
    veto(rs, "call_1", "no")
    assert rs.vetoes == {"call_1": "no"}
    assert RunState.from_json(rs.to_json()).vetoes == {"call_1": "no"}  # plain data: survives saving


def test_an_extension_with_an_unbounded_cycle_is_refused() -> None:
    loop = {
        "name": "loopy",
        "states": {"review": review},
        "redirect": {("postprocess", "act"): "review"},
        "rows": [Rule("review", "preprocess", "has_tool_calls"), Rule("review", "act")],
    }
    with pytest.raises(MachineError) as err:
        extend(**loop)  # type: ignore[arg-type]
    message = str(err.value)
    assert message.startswith("extension 'loopy' breaks the loop's guarantees:\nmachine 'loopy': 11 states, 28 rows")
    assert "cycle preprocess -> reason -> postprocess -> review -> preprocess has no bounded edge" in message
    report = verify(extend(**loop, check=False))  # type: ignore[arg-type]
    assert [v.kind for v in report.violations] == ["unbounded_cycle"]


def test_check_rejects_the_unbounded_extension(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ext_target.py").write_text(
        textwrap.dedent("""
        from loopwright.extend import Rule, extend
        async def review(rs, ctx): pass
        machine = extend(name="loopy", states={"review": review}, redirect={("postprocess", "act"): "review"},
                         rows=[Rule("review", "preprocess", "has_tool_calls"), Rule("review", "act")], check=False)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ext_target", None)
    assert main(["check", "ext_target:machine"]) == 1
    out = capsys.readouterr().out
    assert "FAIL 3." in out and out.endswith("1 violation\n")


def test_a_guard_name_is_resolved_or_refused() -> None:
    def approved(rs: RunState) -> bool:
        return True

    machine = extend(name="g", rows=[Rule("act", "done", "approved")], guards={"approved": approved}, check=False)
    assert machine.rows_from("act")[1] == Row("act", "done", (approved,))
    with pytest.raises(MachineError) as err:
        extend(name="g", rows=[Rule("act", "done", "aproved")], guards={"approved": approved})
    assert str(err.value) == (
        "row act -> done (aproved) names guard 'aproved', which is not a guard (did you mean 'approved'?): define "
        "`def aproved(rs: RunState) -> bool` and pass guards={'aproved': aproved}, "
        "or use one of the guards loopwright.extend exports"
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"states": {"act": review}},
            "extension 'x': ['act'] is already in machine 'agent'; states= adds new states (pick another name)",
        ),
        (
            {"remove": [("act", "review")]},
            "extension 'x': remove=('act', 'review') matches no row; the rows out of "
            "'act' are: act -> cancelled (cancel_requested); act -> decide (else)",
        ),
        (
            {"redirect": {("act", "nowhere"): "review"}},
            "extension 'x': redirect={('act', 'nowhere'): 'review'} "
            "matches no row; the rows out of 'act' are: act -> cancelled (cancel_requested); act -> decide (else)",
        ),
        (
            {"rows": [Rule("act", "done")]},
            "extension 'x': row act -> done (else) would be a second fallback of "
            "'act', which already ends in act -> decide (else); remove=[('act', 'decide')] first to replace it",
        ),
    ],
)
def test_bad_changes_are_refused_with_the_fix(changes: dict[str, object], message: str) -> None:
    with pytest.raises(MachineError) as err:
        extend(name="x", **changes)  # type: ignore[arg-type]
    assert str(err.value) == message
