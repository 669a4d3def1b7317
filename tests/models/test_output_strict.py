"""A structured answer holds finite numbers: NaN and Infinity (as JSON text, bare, or a number too
large for a float) do not validate against ``output_type`` and go back to the model, like any
validation error, unless the type's own config allows them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from loopwright import Agent, Limits, Runner, ScriptedModel, ToolCall
from loopwright.testing import assert_run_invariants


class Leg(BaseModel):
    km: float


class Quote(BaseModel):
    price: float
    history: list[float] = []
    legs: dict[str, Leg] = {}


GOOD = '{"price": 12.5}'


def run(*replies: Any, output_type: type[BaseModel] = Quote, **limits: Any) -> Any:
    agent = Agent(
        name="quoter",
        model=ScriptedModel(list(replies)),
        output_type=output_type,
        limits=Limits(retry_backoff_s=0, **limits),
    )
    result = Runner(agent).run_sync("a quote, please")
    assert_run_invariants(result, agent)
    return result


@pytest.mark.parametrize(
    ("reply", "where"),
    [
        ('{"price": "NaN"}', "price"),
        ('{"price": NaN}', "price"),
        ('{"price": "Infinity"}', "price"),
        ('{"price": -Infinity}', "price"),
        ('{"price": 1e999}', "price"),
        ('{"price": 1, "history": [1.0, "nan"]}', "history.1"),
        ('{"price": 1, "legs": {"out": {"km": "inf"}}}', "legs.out.km"),
    ],
)
def test_a_non_finite_number_goes_back_to_the_model(reply: str, where: str) -> None:
    result = run(reply, GOOD)
    assert result.outcome == "final" and result.output == Quote(price=12.5), result.output
    retry = [m.text for m in result.messages if m.role == "user"][-1]
    assert retry.startswith("Your final answer is not valid Quote JSON:"), retry
    assert f"- {where}: " in retry and "finite number" in retry, retry


def test_retries_spent_on_non_finite_numbers_fail_the_run_naming_them() -> None:
    result = run('{"price": "NaN"}', max_parse_retries=0)
    assert result.outcome == "failed" and result.error.kind == "output_validation"
    assert "- price: " in result.error.message and result.output is None


def test_a_type_that_allows_non_finite_numbers_gets_them() -> None:
    class Reading(BaseModel):
        model_config = ConfigDict(allow_inf_nan=True)
        value: float

    result = run('{"value": "NaN"}', output_type=Reading)
    assert result.outcome == "final" and math.isnan(result.output.value)


def test_a_salvaged_answer_with_nan_stays_text() -> None:
    call = [ToolCall(name="nothing", args={})]
    result = run(call, '{"price": "NaN"}', max_iterations=1)
    assert result.outcome == "salvaged" and result.output == '{"price": "NaN"}'


def test_finite_numbers_validate_as_before() -> None:
    result = run('{"price": 3, "history": [1, 2.5], "legs": {"out": {"km": 1e300}}}')
    assert result.output == Quote(price=3, history=[1, 2.5], legs={"out": Leg(km=1e300)})
