"""Plan-ReAct: the planning instruction, tagged text split into thoughts and the visible answer,
and replies that break the tag format handled on purpose."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from loopwright import (
    Agent,
    AnthropicModel,
    ConfigurationError,
    Limits,
    ModelResponse,
    Runner,
    RunResult,
    ScriptedModel,
    TextPart,
    ThoughtPart,
    ToolCall,
    tool,
)
from loopwright.features import BUILT_IN_MACHINES, PlanReAct, machine_for
from loopwright.features.plan_react import PLANNING_INSTRUCTION, split
from loopwright.testing import assert_run_invariants
from tests.fake_claude import FakeClaude, message, text, thinking, tool_use


@tool
def load_employees(department: str) -> list[dict[str, Any]]:
    """Employees of a department."""
    return [{"name": "Ana", "age": 30}, {"name": "Rui", "age": 35}]


PLAN = "/*PLANNING*/\n1. Load the Engineering employees with load_employees.\n2. Average their ages.\n"
ACT = "/*ACTION*/\nLoading the Engineering department.\n"
REASON = "/*REASONING*/\nTwo employees, aged 30 and 35: the average is 32.5.\n"
FINAL = "/*FINAL_ANSWER*/\nThe average age in Engineering is 32.5 years."


def reply(words: str, *calls: ToolCall) -> ModelResponse:
    return ModelResponse(parts=(TextPart(text=words), *calls), stop_reason="tool_use" if calls else "end_turn")


def load() -> ToolCall:
    return ToolCall(name="load_employees", args={"department": "Engineering"})


def make(script: Any, **kw: Any) -> Agent:
    return Agent(
        name="analyst",
        model=ScriptedModel(script),
        tools=[load_employees],
        planner=PlanReAct(),
        limits=Limits(retry_backoff_s=0),
        **kw,
    )


def test_only_the_final_answer_is_visible_the_plan_is_a_thought_in_the_history() -> None:
    agent = make([reply(PLAN + ACT, load()), reply(REASON + FINAL)])
    result = Runner(agent).run_sync("Average age of Engineering employees?")
    assert result.outcome == "final" and result.output == "The average age in Engineering is 32.5 years."
    first, second = (m for m in result.messages if m.role == "assistant")
    assert [type(p) for p in first.parts] == [ThoughtPart, ToolCall]  # the tool call ran as usual
    assert first.parts[0].text == PLAN + ACT  # type: ignore[union-attr]
    assert [type(p) for p in second.parts] == [ThoughtPart, TextPart]
    assert second.parts[0].text == REASON + "/*FINAL_ANSWER*/"  # type: ignore[union-attr]
    assert result.messages[2].parts[0].content == [{"name": "Ana", "age": 30}, {"name": "Rui", "age": 35}]  # type: ignore[union-attr]
    assert_run_invariants(result, agent)


def test_the_model_gets_the_instruction_and_its_own_plan_back_as_text() -> None:
    seen: list[Any] = []
    agent = make([reply(PLAN + ACT, load()), reply(REASON + FINAL)], before_model=lambda r, ctx: seen.append(r))
    Runner(agent).run_sync("go")
    assert all(any(i.text == PLANNING_INSTRUCTION for i in r.instructions) for r in seen)
    assistant = seen[1].messages[1]
    assert assistant.parts[0] == TextPart(text=PLAN + ACT)  # not a thought: providers drop unsigned ones


# ------------------------------------------------------------------ the split, rule by rule


def test_rule_1_a_reply_without_tags_is_taken_as_it_is() -> None:
    assert split("The average is 32.5 years.", False) == ("", "The average is 32.5 years.", None)
    result = Runner(make(["The average is 32.5 years."])).run_sync("go")
    assert result.output == "The average is 32.5 years."
    assert not any(e.type == "error_occurred" for e in result.events)


def test_rule_2_tags_without_a_final_answer_the_last_section_answers() -> None:
    words = PLAN + REASON.replace("the average is 32.5.", "so the average age is 32.5 years.")
    thought, answer, problem = split(words, False)
    assert thought == PLAN + "/*REASONING*/" and answer.endswith("so the average age is 32.5 years.")
    assert problem == "no /*FINAL_ANSWER*/ section"
    result = Runner(make([words])).run_sync("go")
    assert result.outcome == "final" and result.output == answer
    (event,) = [e for e in result.events if e.type == "error_occurred"]
    assert event.error.kind == "plan_react_format" and "no /*FINAL_ANSWER*/ section" in event.error.message


def test_rule_3_an_empty_final_answer_falls_back_to_the_last_section() -> None:
    thought, answer, problem = split(PLAN + REASON + "/*FINAL_ANSWER*/\n  ", False)
    assert answer == "Two employees, aged 30 and 35: the average is 32.5."
    assert thought == PLAN + "/*REASONING*/" and problem == "an empty /*FINAL_ANSWER*/ section"
    assert split("/*FINAL_ANSWER*/", False) == ("", "", "an empty /*FINAL_ANSWER*/ section")


def test_rule_4_tags_in_another_case_or_with_spaces_are_tags() -> None:
    words = "/* planning */ 1. load 2. average\n/* Final_Answer */ 32.5 years."
    assert split(words, False) == ("/* planning */ 1. load 2. average\n/* Final_Answer */", "32.5 years.", None)


def test_rule_5_a_final_answer_with_tool_calls_is_not_final() -> None:
    early = reply(PLAN + "/*FINAL_ANSWER*/\nProbably about 32.", load())
    result = Runner(make([early, reply(REASON + FINAL)])).run_sync("go")
    assert result.trace.count("act") == 1 and result.output == "The average age in Engineering is 32.5 years."


def test_the_last_final_answer_tag_wins_and_text_after_a_tool_call_is_kept() -> None:
    words = "/*FINAL_ANSWER*/ draft\n/*REASONING*/ check again\n/*FINAL_ANSWER*/ 32.5 years."
    assert split(words, False)[1] == "32.5 years."
    mixed = ModelResponse(
        parts=(TextPart(text=PLAN), load(), TextPart(text=ACT)), stop_reason="tool_use"
    )  # text on both sides of a call
    result = Runner(make([mixed, reply(FINAL)])).run_sync("go")
    first = next(m for m in result.messages if m.role == "assistant")
    assert [type(p) for p in first.parts] == [ThoughtPart, ToolCall] and first.parts[0].text == PLAN + ACT  # type: ignore[union-attr]


def test_claudes_own_signed_thinking_is_kept_first() -> None:
    signed = ThoughtPart(text="hmm", signature="sig")
    response = ModelResponse(parts=(signed, TextPart(text=PLAN + FINAL)), stop_reason="end_turn")
    result = Runner(make([response])).run_sync("go")
    parts = result.messages[-1].parts
    assert parts[0] == signed and isinstance(parts[1], ThoughtPart) and parts[2] == TextPart(text=FINAL.split("\n")[1])


def test_planner_must_be_a_planner_and_adds_no_rows() -> None:
    with pytest.raises(ConfigurationError, match="planner must be a planner"):
        Agent(name="x", model=ScriptedModel([]), planner="plan-react")
    agent = make([]).replace(limits=Limits(max_repeated_calls=None))
    assert machine_for(agent) is BUILT_IN_MACHINES["plan_react"]
    assert BUILT_IN_MACHINES["plan_react"].rows == BUILT_IN_MACHINES["agent"].rows


def test_a_custom_instruction_replaces_the_default() -> None:
    seen: list[Any] = []
    agent = make(["ok"], before_model=lambda r, ctx: seen.append(r)).replace(planner=PlanReAct(instruction="Plan."))
    Runner(agent).run_sync("go")
    assert [i.text for i in seen[0].instructions] == ["Plan."]


# ------------------------------------------------------------------ the fake Messages API over real HTTP


def test_plan_react_against_the_messages_api(fake: FakeClaude) -> None:
    fake.script += [
        message(
            thinking("The user wants an average.", "sig-1"),
            text(PLAN + ACT),
            tool_use("tu_1", "load_employees", {"department": "Engineering"}),
            stop_reason="tool_use",
        ),
        message(text(REASON + FINAL)),
    ]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    agent = make([]).replace(model=AnthropicModel("claude-test", max_tokens=512, client=client))

    async def go() -> RunResult:
        try:
            return await Runner(agent).run("Average age of Engineering employees?")
        finally:
            await client.close()

    result = asyncio.run(go())
    assert result.output == "The average age in Engineering is 32.5 years."
    first, second = fake.requests
    assert any(block["text"] == PLANNING_INSTRUCTION for block in first["system"])
    assert second["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "The user wants an average.", "signature": "sig-1"},
        {"type": "text", "text": PLAN + ACT},
    ]
