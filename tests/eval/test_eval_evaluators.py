"""The evaluators on real runs: response checks, schema validity, the LLM judge (and a judge that
fails: "not judged", never passed), run properties (outcome, limits, counts, rows taken) and user
functions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from loopwright import Agent, Limits, ModelError, ModelResponse, RunResult, ScriptedModel, TextPart, ToolCall, tool
from loopwright.eval import (
    EvalCase,
    EvalSet,
    FunctionCheck,
    JudgeCheck,
    ResponseCheck,
    RunCheck,
    SchemaCheck,
    Score,
    evaluate,
)
from loopwright.eval.judge import parse_verdict
from loopwright.eval.response import rouge1, schema_problems


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is sunny"


def agent_answering(text: str, *, calls: int = 0, limits: Limits | None = None) -> Agent:
    script: list[Any] = [[ToolCall(name="lookup", args={"city": f"c{i}"})] for i in range(calls)]
    return Agent(name="a", model=ScriptedModel([*script, text]), tools=[lookup], limits=limits)


def score_of(agent: Agent, case: EvalCase, spec: Any, judge: Any = None) -> Score:
    report = asyncio.run(evaluate(agent, EvalSet(cases=[case], evaluators=[spec]), judge=judge, progress=False))
    (run,) = report.cases[0].runs
    (score,) = run.scores
    return score


@pytest.mark.parametrize(
    ("match", "value", "passed"),
    [
        ("exact", "  The answer is 42. ", True),
        ("exact", "The answer is 41.", False),
        ("contains", "is 42", True),
        ("regex", r"answer is \d+\.$", True),
        ("regex", r"^\d+$", False),
        ("rouge", "the answer is forty-two", True),
        ("rouge", "completely unrelated words", False),
    ],
)
def test_response_checks(match: str, value: str, passed: bool) -> None:
    case = EvalCase(name="c", input="?")
    score = score_of(agent_answering("The answer is 42."), case, ResponseCheck(match=match, value=value))  # type: ignore[arg-type]
    assert score.passed is passed, score


def test_rouge_is_the_word_overlap_f1() -> None:
    assert rouge1("the cat sat", "the cat sat") == 1.0
    assert rouge1("the cat", "the dog") == 0.5
    assert rouge1("", "x") == 0.0


class Answer(BaseModel):
    total: float
    city: str


def test_schema_validity_by_json_schema_and_by_output_type() -> None:
    case = EvalCase(name="c", input="?")
    good = agent_answering(json.dumps({"total": 3.5, "city": "Lisbon"}))
    bad = agent_answering(json.dumps({"total": "lots"}))
    schema = {"type": "object", "required": ["total", "city"], "properties": {"total": {"type": "number"}}}
    assert score_of(good, case, SchemaCheck(json_schema=schema)).passed
    failed = score_of(bad, case, SchemaCheck(json_schema=schema))
    assert not failed.passed and "expected number" in failed.reason and "missing 'city'" in failed.reason
    assert score_of(good, case, SchemaCheck(output_type=Answer)).passed
    assert not score_of(bad, case, SchemaCheck(output_type="tests.eval.test_eval_evaluators:Answer")).passed
    assert not score_of(agent_answering("not json"), case, SchemaCheck(output_type=Answer)).passed
    assert schema_problems(True, {"type": "integer"}) == ["$: expected integer, got bool"]


def judge_saying(text: str) -> ScriptedModel:
    return ScriptedModel(lambda request: ModelResponse(parts=(TextPart(text=text),)))


def test_the_judge_scores_on_its_scale_and_keeps_its_reasoning() -> None:
    case = EvalCase(name="c", input="?", rubric="Is it polite?")
    seen: list[str] = []

    def reply(request: Any) -> ModelResponse:
        seen.append(request.messages[-1].text)
        return ModelResponse(parts=(TextPart(text='Sure. {"reasoning": "polite and short", "score": 4}'),))

    score = score_of(agent_answering("Thank you!"), case, JudgeCheck(), judge=ScriptedModel(reply))
    assert score.passed and score.value == 0.75 and score.reason == "polite and short"
    assert "Is it polite?" in seen[0] and "Thank you!" in seen[0]
    strict = JudgeCheck(scale=(0, 10), threshold=9, prompt="Rubric {rubric}. Answer {response}. {low}-{high}")
    assert not score_of(agent_answering("ok"), case, strict, judge=judge_saying("score: 7")).passed


@pytest.mark.parametrize(
    ("judge", "why"),
    [
        (ScriptedModel([ModelError("overloaded", retryable=False)]), "the judge model raised ModelError"),
        (judge_saying("I cannot decide."), "holds no score"),
        (judge_saying('{"score": 11, "reasoning": "great"}'), "off the scale"),
        (None, "no judge model"),
    ],
)
def test_a_judge_that_fails_leaves_the_run_not_judged_never_passed(judge: Any, why: str) -> None:
    case = EvalCase(name="c", input="?", rubric="r")
    report = asyncio.run(
        evaluate(agent_answering("hi"), EvalSet(cases=[case], evaluators=[JudgeCheck()]), judge=judge, progress=False)
    )
    (run,) = report.cases[0].runs
    assert run.status == "not_judged" and run.scores[0].passed is None and why in run.scores[0].reason
    assert report.pass_rate == 0.0 and not report.passed


def test_parse_verdict() -> None:
    assert parse_verdict('{"score": 3, "reasoning": "ok"}') == (3.0, "ok")
    assert parse_verdict("Reasoning...\nScore: 4.5") == (4.5, "Reasoning...\nScore: 4.5")
    assert parse_verdict('{"score": true}') is None


def test_run_properties_outcome_counts_and_rows() -> None:
    case = EvalCase(name="c", input="?")
    two_calls = agent_answering("done", calls=2)
    assert score_of(two_calls, case, RunCheck(max_tool_calls=2, never_states=["salvage"])).passed
    failed = score_of(two_calls, case, RunCheck(max_tool_calls=1, max_iterations=2, required_rows=["reason->salvage"]))
    assert failed.reason == "3 iterations > 2; 2 tool calls > 1; never took row reason->salvage"
    tight = agent_answering("done", calls=5, limits=Limits(max_iterations=2))
    salvaged = score_of(tight, case, RunCheck(outcomes=["salvaged"], required_states=["salvage"]))
    assert salvaged.passed, salvaged.reason
    assert not score_of(tight, case, RunCheck(never_states=["salvage"])).passed
    no_salvage = agent_answering("done", calls=5, limits=Limits(max_iterations=2, salvage=False))
    assert score_of(no_salvage, case, RunCheck(outcomes=["limit"], limit="max_iterations")).passed


def test_user_functions_return_a_score_a_bool_or_a_number() -> None:
    case = EvalCase(name="c", input="?")
    agent = agent_answering("short")

    def short(case: EvalCase, result: RunResult) -> Score:
        return Score(value=1.0, passed=len(str(result.output)) < 10, reason="length")

    async def shouty(case: EvalCase, result: RunResult) -> bool:
        return str(result.output).isupper()

    assert score_of(agent, case, FunctionCheck(function=short)).evaluator == "short"
    assert score_of(agent, case, FunctionCheck(function=short)).passed
    assert not score_of(agent, case, FunctionCheck(function=shouty)).passed
    assert score_of(agent, case, FunctionCheck(function=lambda c, r: 0.5)).value == 0.5
    broken = score_of(agent, case, FunctionCheck(function=lambda c, r: 1 / 0))
    assert broken.passed is False and "ZeroDivisionError" in broken.reason
    report = asyncio.run(evaluate(agent, EvalSet(cases=[case], evaluators=[]), evaluators=[short], progress=False))
    assert report.passed
    in_the_set = EvalSet(cases=[EvalCase(name="c", input="?", evaluators=[shouty])], evaluators=[short])
    assert [type(e).__name__ for e in in_the_set.evaluators + in_the_set.cases[0].evaluators] == ["FunctionCheck"] * 2
    assert not asyncio.run(evaluate(agent, in_the_set, progress=False)).passed
