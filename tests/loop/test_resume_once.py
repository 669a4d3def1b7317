"""A suspension is resumed once: a second resume of one state is refused, naming the store that makes it hold."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from loopwright import Agent, Limits, ResumeError, Runner, RunState, ScriptedModel, ToolCall, approve, tool
from tests import ROOT

RAN: list[int] = []


@tool(requires_confirmation=True)
async def pay(amount: int) -> str:
    """Pay an amount (needs approval)."""
    RAN.append(amount)
    await asyncio.sleep(0.01)
    return f"paid {amount}"


CALL = [ToolCall(id="c1", name="pay", args={"amount": 500})]


def _agent(*script: object) -> Agent:
    """The paying agent; its model replies ``script`` (by default: the call, then "Paid.")."""
    script = script or (CALL, "Paid.")
    return Agent(name="ops", tools=[pay], model=ScriptedModel(list(script)), limits=Limits(retry_backoff_s=0))


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_a_second_resume_of_one_state_is_refused_and_names_the_store() -> None:
    runner = Runner(_agent())
    state = RunState.from_json(runner.run_sync("pay").run_state.to_json())
    assert runner.resume_sync(state, {"c1": approve()}).outcome == "final"
    with pytest.raises(ResumeError, match=r"resumed once.*SQLiteStore"):
        runner.resume_sync(state, {"c1": approve()})
    assert RAN == [500]


def test_a_second_resume_of_one_result_is_refused_on_another_runner_too() -> None:
    waiting = Runner(_agent()).run_sync("pay")
    assert Runner(_agent("Paid.")).resume_sync(waiting, {"c1": approve()}).outcome == "final"
    with pytest.raises(ResumeError, match=r"resumed from this state.*store"):
        Runner(_agent("Paid.")).resume_sync(waiting, {"c1": approve()})
    assert RAN == [500]


def test_two_resumes_of_one_state_at_once_run_the_call_once() -> None:
    """Two runners resume the same RunState object concurrently: the second is refused as
    being resumed (not with a puzzling "no pending request"), and the call runs once."""
    waiting = Runner(_agent()).run_sync("pay")

    async def both() -> list[object]:
        return await asyncio.gather(
            Runner(_agent("Paid.")).resume(waiting.run_state, {"c1": approve()}),
            Runner(_agent("Paid.")).resume(waiting.run_state, {"c1": approve()}),
            return_exceptions=True,
        )

    first, second = asyncio.run(both())
    assert getattr(first, "outcome", None) == "final"
    assert isinstance(second, ResumeError) and "is being resumed" in str(second), second
    assert RAN == [500]


def test_two_resumes_at_once_without_decisions_do_not_answer_the_step_twice() -> None:
    waiting = Runner(_agent()).run_sync("pay")

    async def both() -> list[object]:
        return await asyncio.gather(
            Runner(_agent("Paid.")).resume(waiting.run_state, {"c1": approve()}),
            Runner(_agent("Paid.")).resume(waiting.run_state),
            return_exceptions=True,
        )

    first, second = asyncio.run(both())
    assert isinstance(second, ResumeError), second
    assert getattr(first, "outcome", None) == "final"
    turns = [m for m in first.messages if m.role == "user"]  # type: ignore[attr-defined]
    assert len(turns) == 2  # the input and one answer to the held step


@pytest.mark.slow
def test_the_readme_resume_example_in_a_fresh_interpreter() -> None:
    """The user's path: ``from loopwright import ...`` is the first line (no asyncio imported
    before it), a sync tool approved on resume runs and its result is used."""
    script = textwrap.dedent(
        """
        from loopwright import Agent, RunState, Runner, ScriptedModel, ToolCall, approve, tool

        @tool(requires_confirmation=lambda args: args["amount"] > 100)
        def pay(amount: int) -> str:
            \"\"\"Pay an invoice.\"\"\"
            return f"paid {amount}"

        agent = Agent(name="ops", tools=[pay],
                      model=ScriptedModel([[ToolCall(id="c1", name="pay", args={"amount": 500})], "Paid."]))
        runner = Runner(agent)
        waiting = runner.run_sync("Pay the 500 invoice")
        saved = waiting.run_state.to_json()
        done = runner.resume_sync(RunState.from_json(saved), {"c1": approve()})
        print(done.messages[2].parts[0].content)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "paid 500"
