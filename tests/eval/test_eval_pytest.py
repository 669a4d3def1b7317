"""Eval cases as pytest tests: the worked example's set runs under pytest one test per case, and a
failing case reports its failed evaluators and the trajectory diff."""

from __future__ import annotations

import shutil

import pytest

from tests import ROOT

EXAMPLE = ROOT / "examples" / "eval"


NESTED = ("-p", "no:randomly", "-p", "no:cacheprovider")
"""The inner session runs in this process (with loopwright's plugin: it keeps this session's row
coverage whole, tests/testing/test_plugin_nested.py)."""


def copy_example(pytester: pytest.Pytester) -> None:
    for name in ("trip_agent.py", "trip.yaml", "test_trip.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    pytester.syspathinsert()


def test_the_worked_example_runs_under_pytest_one_test_per_case(pytester: pytest.Pytester) -> None:
    copy_example(pytester)
    result = pytester.runpytest("-v", *NESTED)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_trip.py::test_trip[[]affordable-lisbon[]] PASSED*"])


def test_a_failing_case_shows_the_trajectory_diff(pytester: pytest.Pytester) -> None:
    copy_example(pytester)
    text = (pytester.path / "trip.yaml").read_text()
    (pytester.path / "trip.yaml").write_text(
        text.replace(
            "{name: get_weather, args: {city: Porto}}\n    expected_response",
            "{name: get_weather, args: {city: Faro}}\n    expected_response",
        )
    )
    result = pytester.runpytest(*NESTED)
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*eval case 'porto-heatwave' (repeat 1) failed: outcome final",
            "*trajectory:in_order: 0/1 expected calls matched (in_order)",
            "*trajectory (- expected, not made; + made, not expected):",
            '*+ get_weather(city="Lisbon")',
            '*+ get_weather(city="Porto")',
            '*- get_weather(city="Faro")',
        ]
    )


def test_a_set_naming_a_missing_tool_is_a_collection_error(pytester: pytest.Pytester) -> None:
    copy_example(pytester)
    text = (pytester.path / "trip.yaml").read_text()
    (pytester.path / "trip.yaml").write_text(
        text.replace("{tool: get_weather, args: {city: Porto}", "{tool: get_forecast, args: {city: Porto}")
    )
    result = pytester.runpytest(*NESTED)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*case 'porto-heatwave' mocks tool 'get_forecast', which agent 'trip_assistant' lacks*"]
    )
