"""A provider that reuses a call id of an earlier turn: every call still runs once and is
answered once under an id unique in the history (the earlier call keeps the provider's id), in
one run, across ``after=`` and across a resume; over real HTTP too (tests/fake_claude.py)."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, Limits, Runner, RunResult, ScriptedModel, ToolCall, approve, tool
from loopwright.data.events import ToolResult
from loopwright.testing import assert_run_invariants
from tests.fake_claude import FakeClaude, message, text, tool_use

RAN: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    RAN.append((a, b))
    return a + b


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


def ids_in_history(result: RunResult) -> tuple[list[str], list[str]]:
    calls = [p.id for m in result.messages for p in m.parts if isinstance(p, ToolCall)]
    answers = [p.call_id for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    return calls, answers


def test_an_id_reused_in_a_later_reply_runs_and_is_answered_under_a_new_id() -> None:
    model = ScriptedModel(
        [
            [ToolCall(id="c1", name="add", args={"a": 1, "b": 2})],
            [ToolCall(id="c1", name="add", args={"a": 3, "b": 4})],  # the provider reuses c1
            [
                ToolCall(id="c1", name="add", args={"a": 5, "b": 6}),
                ToolCall(id="c1", name="add", args={"a": 7, "b": 8}),
            ],
            "done",
        ]
    )
    agent = Agent(name="a", model=model, tools=[add], limits=Limits(max_repeated_calls=None))
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and sorted(RAN) == [(1, 2), (3, 4), (5, 6), (7, 8)]
    calls, answers = ids_in_history(result)
    assert calls == answers and len(set(calls)) == 4
    assert calls[0] == "c1" and all(c.startswith("c1_") for c in calls[1:])
    results = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert results == [3, 7, 11, 15]
    assert_run_invariants(result, agent)  # the kit's "called twice" check holds


def test_an_id_of_an_earlier_run_of_the_conversation_is_renamed_too() -> None:
    model = ScriptedModel(
        [
            [ToolCall(id="c1", name="add", args={"a": 1, "b": 2})],
            "3",
            [ToolCall(id="c1", name="add", args={"a": 2, "b": 2})],
            "4",
        ]
    )
    runner = Runner(Agent(name="a", model=model, tools=[add]))
    first = runner.run_sync("1+2?")
    second = runner.run_sync("2+2?", after=first)
    calls, answers = ids_in_history(second)
    assert calls == answers and calls[0] == "c1" and calls[1].startswith("c1_") and RAN == [(1, 2), (2, 2)]


def test_an_id_reused_after_a_resume_is_renamed() -> None:
    @tool(requires_confirmation=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    model = ScriptedModel(
        [
            [ToolCall(id="p1", name="pay", args={"amount": 5})],
            [ToolCall(id="p1", name="add", args={"a": 1, "b": 1})],
            "ok",
        ]
    )
    runner = Runner(Agent(name="a", model=model, tools=[pay, add]))
    first = runner.run_sync("pay")
    done = runner.resume_sync(first, {"p1": approve()})
    calls, answers = ids_in_history(done)
    assert done.outcome == "final" and calls == answers and calls[0] == "p1" and calls[1].startswith("p1_")
    assert RAN == [(1, 1)]


def test_over_http_the_api_sees_each_call_and_its_answer_under_one_id() -> None:
    with FakeClaude() as fake:
        fake.script += [
            message(tool_use("toolu_1", "add", {"a": 1, "b": 2}), stop_reason="tool_use"),
            message(tool_use("toolu_1", "add", {"a": 3, "b": 4}), stop_reason="tool_use"),
            message(text("3 and 7")),
        ]

        async def go() -> RunResult:
            async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0) as client:
                model = AnthropicModel("claude-sonnet-5-5", max_tokens=256, client=client, cache=None)
                return await Runner(Agent(name="a", model=model, tools=[add])).run("add twice")

        result = asyncio.run(go())
        assert result.output == "3 and 7" and RAN == [(1, 2), (3, 4)]
        sent = fake.requests[2]["messages"]
        uses = [b["id"] for m in sent for b in m["content"] if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for m in sent for b in m["content"] if b["type"] == "tool_result"]
        assert uses == answered and uses[0] == "toolu_1" and uses[1].startswith("toolu_1_") and len(set(uses)) == 2
