"""Hardening: tool values that cannot become JSON are error results naming their type, and a
tool result longer than ``max_tool_result_chars`` is cut with a note the model sees."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from loopwright import Agent, ConfigurationError, Limits, Runner, ScriptedModel, ToolCall, tool
from loopwright.testing import assert_run_invariants


class _NoStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


def _closed_file_lines() -> Iterator[str]:
    f = io.StringIO("a\nb\n")

    def lines() -> Iterator[str]:
        yield from f

    gen = lines()
    f.close()
    return gen


def _cycle() -> list[Any]:
    cyc: list[Any] = []
    cyc.append(cyc)
    return cyc


def _deep() -> list[Any]:
    deep: list[Any] = []
    cur = deep
    for _ in range(5000):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    return deep


CASES: dict[str, tuple[Any, str]] = {
    "bytes that are not UTF-8": (lambda: b"\xff\x00\xfe", "bytes"),
    "a generator over a closed file": (_closed_file_lines, "generator"),
    "a cycle": (_cycle, "list"),
    "a raising __str__": (_NoStr, "_NoStr"),
    "deep nesting": (_deep, "list"),
    "an infinite iterator": (lambda: itertools.count(), "count"),
    "a generator inside a dict": (lambda: {"rows": itertools.repeat(1)}, "repeat"),
}


def _run(value_factory: Any, **limits: Any) -> Any:
    @tool
    def produce(x: int) -> Any:
        """Produces a value."""
        return value_factory()

    agent = Agent(
        name="t",
        model=ScriptedModel([[ToolCall(name="produce", args={"x": 1})], "done"]),
        instruction="Test.",
        tools=[produce],
        limits=Limits(**limits),
    )
    runner = Runner(agent)
    result = asyncio.run(asyncio.wait_for(runner.run("go"), 10))
    assert runner.active_runs == []
    assert_run_invariants(result, agent)
    return result


@pytest.mark.parametrize("case", list(CASES))
def test_values_that_cannot_become_json_are_error_results_naming_the_type(case: str) -> None:
    factory, type_name = CASES[case]
    result = _run(factory)
    assert result.outcome == "final"
    [answer] = result.messages[2].parts
    assert answer.is_error
    assert f"returned a {type_name}" in answer.content or f"contains a {type_name}" in answer.content, answer.content


def test_utf8_bytes_are_their_text() -> None:
    [answer] = _run(lambda: "héllo".encode()).messages[2].parts
    assert not answer.is_error and answer.content == "héllo"


def test_a_long_result_is_cut_with_a_note_the_model_sees() -> None:
    result = _run(lambda: "x" * 5000, max_tool_result_chars=1000)
    [answer] = result.messages[2].parts
    assert not answer.is_error
    assert answer.content.startswith("x" * 1000) and len(answer.content) < 1200
    assert "cut" in answer.content and "5000" in answer.content and "max_tool_result_chars=1000" in answer.content


def test_a_long_structured_result_is_cut_as_json_text() -> None:
    result = _run(lambda: {"rows": list(range(5000))}, max_tool_result_chars=200)
    [answer] = result.messages[2].parts
    assert isinstance(answer.content, str) and answer.content.startswith('{"rows":[0,1,2')
    assert "max_tool_result_chars=200" in answer.content


def test_the_default_cap_is_finite() -> None:
    cap = Limits().max_tool_result_chars
    assert cap is not None
    [answer] = _run(lambda: "y" * (cap * 2)).messages[2].parts
    assert answer.content.startswith("y" * cap) and "cut" in answer.content and len(answer.content) < cap + 200


def test_the_cap_may_be_lifted_explicitly() -> None:
    [answer] = _run(lambda: "z" * 300_000, max_tool_result_chars=None).messages[2].parts
    assert answer.content == "z" * 300_000


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_tool_result_chars"):
        Limits(max_tool_result_chars=0)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"max_iterations": -1}, ["max_iterations takes a whole number > 0", "it bounds the passes"]),
        ({"timeout_s": 0}, ["timeout_s takes a number of seconds > 0 or None", "wall-clock"]),
        ({"max_model_retries": -2}, ["max_model_retries takes a whole number >= 0"]),
        ({"salvage": "maybe"}, ["salvage takes True or False"]),
        ({"max_iteration": 3}, ["Limits has no field 'max_iteration'", "max_iterations"]),
    ],
)
def test_limits_errors_name_the_field_its_range_and_why(values: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Limits(**values)
    for word in words:
        assert word in str(caught.value)
