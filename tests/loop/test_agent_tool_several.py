"""An ``agent_tool`` child waiting on several calls asks for them all in one suspension, each
request with a compound id (``d1/r1``: the calling run's call, then the child's), and the top
run's resume hands every decision down at once (issue 37): a partial resume goes on with what
was decided and asks again for the rest (as a workflow's does), a denial of one runs the others
and the child reads it, a store keeps it across runners, the HTTP decisions endpoint takes the
compound ids, two levels down works the same, and a saved state forging a compound id is
refused before anything runs. Before, the child asked for its calls one at a time."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from loopwright import Agent, Limits, ResumeError, Runner, RunState, ScriptedModel, ToolCall, approve, deny
from loopwright.loop.subrun import agent_tool
from loopwright.stores import SQLiteStore
from loopwright.testing import CountingModel, CountingTools
from tests.loop.refunds import RAN, clear_ran, refund  # noqa: F401 (clear_ran: autouse)

SHOWN = [
    ("d1/r1", "billing.refund", {"amount": 5}, "confirmation"),
    ("d1/r2", "billing.refund", {"amount": 6}, "confirmation"),
]


def _billing(restarted: bool = False) -> tuple[Agent, CountingModel]:
    """Billing asks to refund 5 and 6 in one reply; then answers with what it read."""
    asks = [ToolCall(id="r1", name="refund", args={"amount": 5}), ToolCall(id="r2", name="refund", args={"amount": 6})]
    model = CountingModel(ScriptedModel([*([] if restarted else [asks]), "Billing is done."]))
    return Agent(name="billing", model=model, tools=[refund], limits=Limits(retry_backoff_s=0)), model


def _desk(helper: Agent, restarted: bool = False, calls: str = "billing") -> tuple[Agent, CountingModel, CountingTools]:
    counted = CountingTools()
    hands = [] if restarted else [[ToolCall(id="d1", name=calls, args={"task": "refund 5 and 6"})]]
    model = CountingModel(ScriptedModel([*hands, "All settled."]))
    desk = Agent(name="desk", model=model, tools=[counted.wrap(agent_tool(helper))], limits=Limits(retry_backoff_s=0))
    return desk, model, counted


def _shown(pending: list[object]) -> list[tuple[object, ...]]:
    return [(p.call_id, p.tool, p.args, p.kind) for p in pending]  # type: ignore[attr-defined]


def _read(model: CountingModel, call_id: str) -> list[tuple[object, bool]]:
    """What the model's last request holds as the answer to ``call_id``."""
    parts = [p for m in model.inner.requests[-1].messages for p in m.parts]
    return [(p.content, p.is_error) for p in parts if p.type == "tool_result" and p.call_id == call_id]


def test_a_partial_resume_runs_what_was_decided_and_asks_again_for_the_rest() -> None:
    """As a workflow's resume: the decided call runs once, the child waits again on the other,
    and the calling run shows it again; the child's model is not called in between."""
    billing, billing_model = _billing()
    desk, desk_model, counted = _desk(billing)
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert _shown(first.pending) == SHOWN
    second = runner.resume_sync(first, {"d1/r1": approve()})
    assert second.outcome == "suspended", (second.outcome, second.error)
    assert _shown(second.pending) == SHOWN[1:]
    assert RAN == [5]
    assert billing_model.calls == 1
    done = runner.resume_sync(second, {"d1/r2": approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [5, 6]
    assert (desk_model.calls, billing_model.calls, counted.runs) == (2, 2, 3)
    assert _read(billing_model, "r1") == [("refunded 5", False)]
    assert _read(billing_model, "r2") == [("refunded 6", False)]


def test_a_denial_of_one_runs_the_other_and_the_child_reads_the_denial() -> None:
    billing, billing_model = _billing()
    desk, desk_model, _ = _desk(billing)
    runner = Runner(desk)
    first = runner.run_sync("help")
    done = runner.resume_sync(first, {"d1/r1": deny("too much"), "d1/r2": approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [6]
    assert _read(billing_model, "r1") == [("denied by the user: too much", True)]
    assert _read(billing_model, "r2") == [("refunded 6", False)]
    assert _read(desk_model, "d1") == [("Billing is done.", False)]  # the child's answer is the call's result


def test_a_decision_for_an_id_nothing_waits_on_is_refused_naming_what_waits() -> None:
    billing, _ = _billing()
    desk, _, _ = _desk(billing)
    runner = Runner(desk)
    first = runner.run_sync("help")
    with pytest.raises(ResumeError, match=r"'d1/r9'.*d1/r1 \(billing\.refund, confirmation\), d1/r2"):
        runner.resume_sync(first, {"d1/r1": approve(), "d1/r9": approve()})
    assert RAN == []
    done = runner.resume_sync(first, {"d1/r1": approve(), "d1/r2": approve()})  # nothing changed: both still wait
    assert done.outcome == "final", (done.outcome, done.error)
    assert sorted(RAN) == [5, 6]


def test_with_a_store_a_new_runner_resumes_both_calls_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    billing, _ = _billing()
    desk, _, _ = _desk(billing)
    first = Runner(desk, store=SQLiteStore(path)).run_sync("help", run_id="t1")
    assert _shown(first.pending) == SHOWN
    billing2, billing2_model = _billing(restarted=True)
    desk2, desk2_model, counted2 = _desk(billing2, restarted=True)
    done = Runner(desk2, store=SQLiteStore(path)).resume_sync("t1", {"d1/r1": approve(), "d1/r2": approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert sorted(RAN) == [5, 6]
    assert (desk2_model.calls, billing2_model.calls, counted2.runs) == (1, 1, 1)


def test_two_levels_down_every_request_of_the_innermost_child_is_shown_and_decided_at_once() -> None:
    billing, billing_model = _billing()
    hands = [ToolCall(id="f1", name="billing", args={"task": "both"})]
    front_model = CountingModel(ScriptedModel([hands, "Front ok."]))
    front = Agent(name="front", model=front_model, tools=[agent_tool(billing)], limits=Limits(retry_backoff_s=0))
    desk, desk_model, _ = _desk(front, calls="front")
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    assert _shown(first.pending) == [
        ("d1/f1/r1", "front.billing.refund", {"amount": 5}, "confirmation"),
        ("d1/f1/r2", "front.billing.refund", {"amount": 6}, "confirmation"),
    ]
    with pytest.raises(ResumeError, match=r"d1/f1/r2 \(front\.billing\.refund\).*amount"):
        runner.resume_sync(first, {"d1/f1/r1": approve(), "d1/f1/r2": approve(args={"amount": "six"})})
    assert RAN == []
    done = runner.resume_sync(first, {"d1/f1/r1": deny("no"), "d1/f1/r2": approve(args={"amount": 3})})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [3]
    assert (desk_model.calls, front_model.calls, billing_model.calls) == (2, 2, 2)
    assert _read(billing_model, "r1") == [("denied by the user: no", True)]


def _forged(first: object, **change: object) -> RunState:
    """The suspended run's state with its second pending request changed."""
    rs = RunState.from_json(first.run_state.to_json())  # type: ignore[attr-defined]
    held = rs.features["waiting"]
    held.pending = [held.pending[0], held.pending[1].model_copy(update=change)]
    return RunState.from_json(rs.to_json())


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"call_id": "d1/r9"}, "its id names no request of the agent 'billing'"),
        ({"call_id": "d9/r2"}, "is not one of the reply's calls"),
        ({"tool": "billing.wire"}, "it shows 'wire' (confirmation) but the agent's request is for 'refund'"),
        ({"kind": "result"}, "it shows 'refund' (result)"),
    ],
)
def test_a_saved_state_forging_a_compound_request_is_refused_before_anything_runs(
    change: dict[str, object], said: str
) -> None:
    billing, billing_model = _billing()
    desk, _, counted = _desk(billing)
    runner = Runner(desk)
    first = runner.run_sync("help")
    forged = _forged(first, **change)
    decisions = {p.call_id: approve() for p in forged.features["waiting"].pending}
    with pytest.raises(ResumeError, match="pending call") as caught:
        runner.resume_sync(forged, decisions)
    assert said in str(caught.value)
    assert (RAN, billing_model.calls, counted.runs) == ([], 1, 1)


def test_a_forged_copy_of_the_childs_requests_is_refused() -> None:
    """What the calling run keeps of the child's requests must be what the child's saved run
    waits on: a state whose kept copy shows other arguments is refused."""
    billing, _ = _billing()
    desk, _, _ = _desk(billing)
    runner = Runner(desk)
    first = runner.run_sync("help")
    rs = RunState.from_json(first.run_state.to_json())
    (held,) = rs.features["agent_tool"].waiting.values()
    held.asks = [held.asks[0].model_copy(update={"args": {"amount": 500}}), held.asks[1]]
    with pytest.raises(ResumeError, match="is not what the agent's saved run waits on"):
        runner.resume_sync(RunState.from_json(rs.to_json()), {"d1/r1": approve(), "d1/r2": approve()})
    assert RAN == []


def test_over_http_the_decisions_endpoint_takes_the_compound_ids(tmp_path: Path) -> None:
    """``POST /runs/{id}/decisions`` over a real socket: the run's pending requests show the
    compound ids, one body with a decision for each resumes the tree once."""
    pytest.importorskip("starlette", reason="loopwright.serve needs the serve extra (pip install 'loopwright[serve]')")
    from loopwright.serve import app
    from tests.serve.test_serve import wait_for
    from tests.serve_agents import serving

    billing, billing_model = _billing()
    desk, _, counted = _desk(billing)
    asgi = app([desk], store=f"sqlite:///{tmp_path / 'runs.db'}")
    with serving(asgi) as base, httpx.Client(base_url=base, timeout=20) as client:
        started = client.post("/runs", json={"agent": "desk", "input": "help"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        pending = wait_for(client, run_id, "suspended")["pending"]
        assert [(p["call_id"], p["tool"], p["args"], p["kind"]) for p in pending] == SHOWN
        body = {"decisions": [{"call_id": "d1/r9", "action": "approve"}]}
        refused = client.post(f"/runs/{run_id}/decisions", json=body)
        assert refused.status_code == 409 and "d1/r1 (billing.refund, confirmation)" in refused.json()["error"]
        body = {
            "decisions": [
                {"call_id": "d1/r1", "action": "approve", "args": {"amount": 2}},
                {"call_id": "d1/r2", "action": "deny", "reason": "no"},
            ]
        }
        decided = client.post(f"/runs/{run_id}/decisions", json=body)
        assert decided.status_code == 202, decided.text
        done = wait_for(client, run_id, "final")
    assert done["output"] == "All settled."
    assert RAN == [2]
    assert (billing_model.calls, counted.runs) == (2, 2)


def test_a_parallel_workflow_as_the_tool_shows_both_branches_requests_at_once() -> None:
    """agent_tool(ParallelAgent): each branch waits on a refund; the calling run shows both,
    and one resume with both decisions resumes the workflow once, each refund run once."""
    from loopwright.workflows import ParallelAgent

    def one(name: str, call_id: str, amount: int) -> Agent:
        script = ScriptedModel([[ToolCall(id=call_id, name="refund", args={"amount": amount})], f"{name} done."])
        return Agent(name=name, model=script, tools=[refund], limits=Limits(retry_backoff_s=0))

    both = ParallelAgent("both", branches=[one("north", "n1", 5), one("south", "s1", 6)])
    desk, _, counted = _desk(both, calls="both")
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert first.outcome == "suspended", (first.outcome, first.error)
    assert sorted(_shown(first.pending)) == [
        ("d1/n1", "both.refund", {"amount": 5}, "confirmation"),
        ("d1/s1", "both.refund", {"amount": 6}, "confirmation"),
    ]
    done = runner.resume_sync(first, {"d1/n1": approve(), "d1/s1": approve(args={"amount": 2})})
    assert done.outcome == "final", (done.outcome, done.error)
    assert sorted(RAN) == [2, 5]
    assert counted.runs == 2


def test_a_call_that_cannot_wait_again_is_answered_once_however_many_requests_its_child_left() -> None:
    """Past ``max_suspensions`` a partial resume's call (its child waits again) is answered
    with one error, and the calling run goes on."""
    asks = [ToolCall(id=f"r{n}", name="refund", args={"amount": n}) for n in (1, 2, 3)]
    billing = Agent(name="billing", model=ScriptedModel([asks, "Done."]), tools=[refund])
    desk, desk_model, _ = _desk(billing)
    desk = Agent(name="desk", model=desk.model, tools=list(desk.tools.values()), limits=Limits(max_suspensions=1))
    runner = Runner(desk)
    first = runner.run_sync("help")
    assert len(first.pending) == 3
    done = runner.resume_sync(first, {"d1/r1": approve()})
    assert done.outcome == "final", (done.outcome, done.error)
    assert RAN == [1]
    (said,) = _read(desk_model, "d1")
    assert said[1] is True and "max_suspensions=1" in str(said[0])
    assert [e.call_id for e in done.events if e.type == "tool_answered"].count("d1") == 1
