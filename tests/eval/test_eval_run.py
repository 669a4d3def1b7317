"""evaluate(): tool mocks (and mock_all), a set naming a tool the agent lacks refused before any
run, repeats with mean and spread, bounded concurrency, cancelling, multi-turn cases, per-case
limits, every run's events kept, the progress bar."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from loopwright import Agent, ModelRequest, ModelResponse, ScriptedModel, TextPart, ToolCall, ToolResult, tool
from loopwright.demo import DEMO_INPUT, demo_agent
from loopwright.eval import (
    EvalCase,
    EvalSet,
    EvalSetError,
    ExpectedCall,
    FunctionCheck,
    JudgeCheck,
    ResponseCheck,
    RunCheck,
    ToolMock,
    TrajectoryCheck,
    evaluate,
)

ran: list[str] = []


@tool
def charge(card: str, amount: float) -> str:
    """Charge a card (a side effect an eval must not cause)."""
    ran.append(card)
    return f"charged {amount} to {card}"


def echo_model(request: ModelRequest) -> ModelResponse:
    """Calls charge once, then answers with what it returned."""
    results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResult)]
    if not results:
        return ModelResponse(parts=(ToolCall(name="charge", args={"card": "4242", "amount": 10.0}),))
    return ModelResponse(parts=(TextPart(text=f"result: {results[-1].content}"),))


def shop() -> Agent:
    return Agent(name="shop", model=ScriptedModel(echo_model), tools=[charge])


def run(agent: Agent, eval_set: EvalSet, **options: Any) -> Any:
    return asyncio.run(evaluate(agent, eval_set, progress=False, **options))


def test_mocks_answer_instead_of_the_tool_and_mock_all_stops_unmocked_calls() -> None:
    ran.clear()
    mocked = EvalCase(
        name="mocked",
        input="pay",
        mocks=[ToolMock(tool="charge", args={"card": "4242"}, result="pretend charged")],
        expected_response="result: pretend charged",
    )
    failing = EvalCase(
        name="mock-error",
        input="pay",
        mocks=[ToolMock(tool="charge", error="card declined")],
        expected_response="result: tool 'charge' raised MockedToolError: card declined",
    )
    unmocked = EvalCase(
        name="unmocked",
        input="pay",
        mock_all=True,
        evaluators=[ResponseCheck(match="contains", value="no mock answers")],
    )
    report = run(shop(), EvalSet(cases=[mocked, failing, unmocked]))
    assert report.passed, report.summary()
    assert ran == []  # no real charge
    live = run(
        shop(), EvalSet(cases=[EvalCase(name="live", input="pay", expected_response="result: charged 10.0 to 4242")])
    )
    assert live.passed and ran == ["4242"]


def test_a_mocked_tool_still_validates_its_arguments() -> None:
    report = run(
        demo_agent(),
        EvalSet(
            mock_all=True,
            mocks=[ToolMock(tool="hotel_price", result={"total_eur": 1})],
            cases=[EvalCase(name="c", input=DEMO_INPUT, evaluators=[FunctionCheck(function=lambda c, r: True)])],
        ),
    )
    events = report.cases[0].runs[0].events
    answers = [e for e in events if e.type == "tool_answered" and e.name == "hotel_price"]
    assert answers[0].is_error and "invalid arguments" in str(answers[0].content)  # "three" nights
    assert answers[1].content == {"total_eur": 1}


def test_a_tool_the_agent_lacks_is_refused_before_any_run() -> None:
    ran.clear()
    eval_set = EvalSet(
        cases=[
            EvalCase(name="fine", input="pay"),
            EvalCase(name="typo", input="pay", expected_calls=[ExpectedCall(name="chrage")]),
            EvalCase(name="mocks", input="pay", mocks=[ToolMock(tool="refund", result=1)]),
        ]
    )
    with pytest.raises(EvalSetError) as caught:
        run(shop(), eval_set)
    assert str(caught.value).splitlines() == [
        "case 'typo' expects a call of tool 'chrage', which agent 'shop' lacks",
        "case 'mocks' mocks tool 'refund', which agent 'shop' lacks",
        "agent 'shop' has these tools: charge",
    ]
    assert ran == []


def test_bad_case_limits_and_unknown_functions_are_refused_before_any_run() -> None:
    with pytest.raises(EvalSetError, match=r"case 'c': its limits do not validate: Limits\(max_iterations=0\)"):
        run(shop(), EvalSet(cases=[EvalCase(name="c", input="x", limits={"max_iterations": 0})]))
    with pytest.raises(EvalSetError, match="cannot import 'no_such_module'"):
        run(
            shop(),
            EvalSet(
                cases=[EvalCase(name="c", input="x", rubric="r")], evaluators=[JudgeCheck(model="no_such_module:judge")]
            ),
        )
    with pytest.raises(EvalSetError, match="has no attribute 'nope'"):
        run(
            shop(),
            EvalSet(
                cases=[
                    EvalCase(name="c", input="x", evaluators=[FunctionCheck(function="tests.eval.test_eval_run:nope")])
                ]
            ),
        )


def test_repeats_give_mean_spread_and_pass_rate() -> None:
    rng = random.Random(7)

    def flaky(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=rng.choice(["yes", "no"])),))

    agent = Agent(name="flaky", model=ScriptedModel(flaky))
    eval_set = EvalSet(cases=[EvalCase(name="c", input="?", expected_response="yes")], threshold=0.3)
    report = run(agent, eval_set, repeats=20)
    (summary,) = report.cases[0].scores
    passes = sum(r.status == "passed" for r in report.cases[0].runs)
    assert 0 < passes < 20 and summary.runs == 20
    assert summary.mean == pytest.approx(passes / 20) and summary.pass_rate == pytest.approx(passes / 20)
    assert summary.spread == pytest.approx((summary.mean * (1 - summary.mean)) ** 0.5)
    assert report.passed == (passes / 20 >= 0.3)


def test_concurrency_is_bounded() -> None:
    running, most = 0, 0

    @tool
    async def slow() -> str:
        """Take a while."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1
        return "done"

    agent = Agent(name="s", model=ScriptedModel([[ToolCall(name="slow")], "ok"]), tools=[slow])
    cases = [EvalCase(name=f"c{i}", input="go", expected_response="ok") for i in range(8)]
    report = run(agent, EvalSet(cases=cases), repeats=2, concurrency=3)
    assert report.passed and most == 3
    assert len({r.run_ids[0] for c in report.cases for r in c.runs}) == 16


def test_cancelling_evaluate_cancels_the_runs() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    @tool
    async def forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.sleep(3600)
        finished.append("x")
        return "never"

    agent = Agent(name="f", model=ScriptedModel([[ToolCall(name="forever")], "ok"]), tools=[forever])

    async def main() -> None:
        before = asyncio.all_tasks()
        task = asyncio.create_task(
            evaluate(agent, EvalSet(cases=[EvalCase(name="c", input="go")]), repeats=4, progress=False)
        )
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert asyncio.all_tasks() - before == set()  # no run left behind

    asyncio.run(asyncio.wait_for(main(), 10))
    assert finished == []


def test_a_conversation_runs_turn_after_turn_and_keeps_every_runs_events() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        users = [m.text for m in request.messages if m.role == "user" and m.text]
        return ModelResponse(parts=(TextPart(text=" / ".join(users)),))

    agent = Agent(name="c", model=ScriptedModel(reply))
    case = EvalCase(
        name="chat", conversation=["hello", "and more"], state={"k": 1}, expected_response="hello / and more"
    )
    report = run(agent, EvalSet(cases=[case]))
    (only,) = report.cases[0].runs
    assert only.status == "passed" and len(only.run_ids) == 2
    assert [e.type for e in only.events].count("run_started") == 2
    assert {e.run_id for e in only.events} == set(only.run_ids)


def test_per_case_limits_apply_to_that_case_only() -> None:
    cases = [
        EvalCase(
            name="tight", input=DEMO_INPUT, limits={"max_iterations": 2}, evaluators=[RunCheck(outcomes=["salvaged"])]
        ),
        EvalCase(
            name="roomy",
            input=DEMO_INPUT,
            evaluators=[RunCheck(), TrajectoryCheck(match="subset")],
            expected_calls=[ExpectedCall(name="convert_currency")],
        ),
    ]
    report = run(demo_agent(), EvalSet(cases=cases))
    assert report.passed, report.summary()


def test_the_progress_bar_shows_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(evaluate(shop(), EvalSet(cases=[EvalCase(name="c", input="x", mock_all=True)]), progress=True))
    assert "1/1" in capsys.readouterr().err
