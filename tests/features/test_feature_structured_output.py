"""Structured output: the final answer validates against ``output_type``, with bounded parse retries."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import anthropic
import pytest
from pydantic import BaseModel, Field

from loopwright import (
    Agent,
    AnthropicModel,
    ConfigurationError,
    Limits,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    ToolCall,
    tool,
)
from loopwright.features import BUILT_IN_MACHINES, machine_for
from loopwright.testing import assert_run_invariants
from tests.fake_claude import FakeClaude, message, text, tool_use


class Trip(BaseModel):
    """What the user gets."""

    city: str
    nights: int = Field(ge=1)
    affordable: bool
    currency: Literal["EUR", "USD"] = "USD"


@tool
def price(city: str) -> dict[str, Any]:
    """Nightly price of a hotel in a city."""
    return {"city": city, "nightly_eur": 180.0, "html": "<div class='rate'>180 EUR</div>"}


GOOD = '{"city": "Lisbon", "nights": 3, "affordable": true}'


def make(script: Any, **limits: Any) -> Agent:
    return Agent(
        name="planner",
        model=ScriptedModel(script),
        tools=[price],
        output_type=Trip,
        limits=Limits(retry_backoff_s=0, **limits),
    )


def user_texts(result: RunResult) -> list[str]:
    return [m.text for m in result.messages if m.role == "user"]


def test_the_output_is_the_validated_object_and_the_model_saw_raw_tool_results() -> None:
    agent = make([[ToolCall(name="price", args={"city": "Lisbon"})], GOOD])
    result = Runner(agent).run_sync("3 nights in Lisbon for 900 USD?")
    assert result.outcome == "final"
    assert result.output == Trip(city="Lisbon", nights=3, affordable=True)  # for people
    assert result.messages[2].parts[0].content["html"] == "<div class='rate'>180 EUR</div>"  # type: ignore[index,union-attr]
    assert result.run_state.text == GOOD  # the raw JSON text the model wrote
    assert result.trace[-3:] == ["decide", "validate", "done"]
    assert_run_invariants(result, agent)


def test_the_request_carries_the_schema_as_an_instruction() -> None:
    seen: list[Any] = []
    model = ScriptedModel([GOOD])
    agent = make([]).replace(model=model, before_model=lambda request, ctx: seen.append(request))
    Runner(agent).run_sync("go")
    (instruction,) = [i for i in seen[0].instructions if "JSON schema" in i.text]
    assert '"affordable"' in instruction.text and '"nights"' in instruction.text and instruction.cache


def test_a_reply_that_does_not_validate_goes_back_with_the_error_then_validates() -> None:
    bad = '{"city": "Lisbon", "nights": 0}'
    result = Runner(make([bad, GOOD])).run_sync("go")
    assert result.outcome == "final" and isinstance(result.output, Trip)
    retry = user_texts(result)[-1]
    assert retry.startswith("Your final answer is not valid Trip JSON:")
    assert "- nights: Input should be greater than or equal to 1" in retry
    assert "- affordable: Field required" in retry
    assert result.trace.count("validate") == 2 and result.run_state.charges["max_parse_retries"] == 1
    kinds = [e.error.kind for e in result.events if e.type == "error_occurred"]
    assert kinds == ["output_validation"]


def test_retries_are_bounded_then_the_run_fails_with_the_error_named() -> None:
    script = ["Sure! Lisbon is lovely.", "{not json", '{"city": 3}', GOOD]
    agent = make(script, max_parse_retries=2)
    result = Runner(agent).run_sync("go")
    assert result.outcome == "failed" and result.limit == "max_parse_retries"
    assert result.error is not None and result.error.kind == "output_validation"
    assert result.error.message.startswith("the final answer did not validate against Trip (3 tries):")
    assert "- city: Input should be a valid string" in result.error.message
    assert result.output is None and result.iterations == 3  # GOOD was never asked for
    assert len([t for t in user_texts(result) if t.startswith("Your final answer")]) == 2  # no phantom 3rd retry
    assert_run_invariants(result, agent)


def test_no_retries_at_all() -> None:
    result = Runner(make(["nope"], max_parse_retries=0)).run_sync("go")
    assert result.outcome == "failed" and result.limit == "max_parse_retries" and result.iterations == 1


def test_the_iteration_budget_still_bounds_retries() -> None:
    result = Runner(make(["x", "y", GOOD], max_iterations=2)).run_sync("go")
    assert result.outcome == "failed" and result.limit == "max_iterations"


@pytest.mark.parametrize(
    "reply",
    [
        f"```json\n{GOOD}\n```",
        f"Here is the answer:\n{GOOD}\nHope that helps.",
        f"  {GOOD}  ",
    ],
)
def test_json_in_a_code_fence_or_prose_is_accepted(reply: str) -> None:
    result = Runner(make([reply])).run_sync("go")
    assert result.output == Trip(city="Lisbon", nights=3, affordable=True)


def test_the_validated_answer_survives_a_json_round_trip_of_the_run_state() -> None:
    result = Runner(make([GOOD])).run_sync("go")
    loaded = RunState.from_json(result.run_state.to_json())
    assert Trip.model_validate(loaded.features["structured_output"].value) == result.output


def test_output_type_must_be_a_pydantic_model() -> None:
    with pytest.raises(ConfigurationError, match="output_type must be a pydantic model class"):
        Agent(name="x", model=ScriptedModel([]), output_type=dict)  # type: ignore[arg-type]


def test_an_agent_with_output_type_runs_on_the_structured_output_machine() -> None:
    agent = make([]).replace(limits=Limits(max_repeated_calls=None))
    assert machine_for(agent) is BUILT_IN_MACHINES["structured_output"]
    assert "structured_output" in machine_for(make([])).features


def test_a_sub_agent_without_output_type_answers_in_text() -> None:
    def hand(to: str) -> list[ToolCall]:
        return [ToolCall(name="transfer_to_agent", args={"agent_name": to, "task": "t"})]

    helper = Agent(name="helper", model=ScriptedModel([]))
    root = make([hand("helper"), "plain text from helper"]).replace(sub_agents=[helper])
    from loopwright.testing import scripted

    result = Runner(scripted(root, [hand("helper"), "plain text from helper"])).run_sync("go")
    assert result.outcome == "final" and result.output == "plain text from helper"


# ------------------------------------------------------------------ the fake Messages API over real HTTP


def test_structured_output_against_the_messages_api(fake: FakeClaude) -> None:
    fake.script += [
        message(
            text("I'll check the price first."),
            tool_use("tu_1", "price", {"city": "Lisbon"}),
            stop_reason="tool_use",
        ),
        message(text("Lisbon works: 3 nights at 180 EUR is within 900 USD.")),  # prose: not valid
        message(text('```json\n{"city": "Lisbon", "nights": 3, "affordable": true, "currency": "EUR"}\n```')),
    ]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    agent = Agent(
        name="claude",
        model=AnthropicModel("claude-test", max_tokens=512, client=client),
        tools=[price],
        output_type=Trip,
        limits=Limits(retry_backoff_s=0),
    )

    async def go() -> RunResult:
        try:
            return await Runner(agent).run("3 nights in Lisbon for 900 USD?")
        finally:
            await client.close()

    result = asyncio.run(go())
    assert result.output == Trip(city="Lisbon", nights=3, affordable=True, currency="EUR")
    first, _, third = fake.requests
    assert any("JSON schema" in block["text"] for block in first["system"])
    retry = third["messages"][-1]
    assert retry["role"] == "user" and retry["content"][0]["text"].startswith(
        "Your final answer is not valid Trip JSON"
    )


def test_a_salvaged_answer_is_the_object_when_it_validates_else_its_text() -> None:
    seen: list[Any] = []
    agent = make([[ToolCall(name="price", args={"city": "Lisbon"})], GOOD], max_iterations=1)
    agent = agent.replace(before_model=lambda request, ctx: seen.append(request))
    result = Runner(agent).run_sync("go")
    assert result.outcome == "salvaged" and result.output == Trip(city="Lisbon", nights=3, affordable=True)
    assert any("JSON schema" in i.text for i in seen[-1].instructions)  # salvage asked for the JSON
    result = Runner(make([[ToolCall(name="price", args={"city": "Lisbon"})], "no idea"], max_iterations=1)).run_sync(
        "go"
    )
    assert result.outcome == "salvaged" and result.output == "no idea"
