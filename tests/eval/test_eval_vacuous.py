"""No vacuous eval passes: a check with nothing to compare against is refused when the set is
made or loaded (file:line for set files), naming the case and the check; a check that cannot
fail is refused; a case with no check is reported "no checks" and never counts as passed (the
report, its summary, the HTML page, ``loopwright eval run``'s exit code, the pytest items)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from loopwright import Agent, ScriptedModel
from loopwright.eval import (
    EvalCase,
    EvalSet,
    EvalSetError,
    FunctionCheck,
    JudgeCheck,
    ResponseCheck,
    RunCheck,
    TrajectoryCheck,
    evaluate,
)
from loopwright.eval.html import report_html
from tests import ROOT


def hello() -> Agent:
    return Agent(name="hello", model=ScriptedModel(["hello there"]))


def run(agent: Agent, eval_set: EvalSet, **options: Any) -> Any:
    return asyncio.run(evaluate(agent, eval_set, progress=False, **options))


# -- a check with nothing to compare against is refused, naming the case and the check


def test_a_response_check_with_nothing_to_compare_against_is_refused_when_the_set_is_made() -> None:
    with pytest.raises(ValidationError) as caught:
        EvalSet(cases=[EvalCase(name="c", input="hi")], evaluators=[ResponseCheck(match="contains")])
    (error,) = caught.value.errors()
    assert error["loc"] == ("evaluators", 0)
    assert "case 'c'" in error["msg"] and "response:contains" in error["msg"]
    assert "nothing to compare against" in error["msg"] and "expected_response" in error["msg"]


@pytest.mark.parametrize(
    ("check", "wanted"),
    [
        (TrajectoryCheck(), "expected_calls"),
        (JudgeCheck(), "rubric"),
        (ResponseCheck(match="regex"), "expected_response"),
    ],
)
def test_each_kind_of_check_needing_the_case_names_what_is_missing(check: Any, wanted: str) -> None:
    with pytest.raises(ValidationError) as in_set:
        EvalSet(cases=[EvalCase(name="c", input="hi")], evaluators=[check])
    with pytest.raises(ValidationError) as in_case:
        EvalCase(name="own", input="hi", evaluators=[check])
    for caught, name in ((in_set, "c"), (in_case, "own")):
        (error,) = caught.value.errors()
        assert f"case {name!r}" in error["msg"] and check.label() in error["msg"] and wanted in error["msg"]
        assert "nothing to compare against" in error["msg"]


def test_a_set_check_applying_to_some_cases_is_kept_and_the_others_get_no_checks() -> None:
    eval_set = EvalSet(
        cases=[EvalCase(name="answered", input="hi", expected_response="hello"), EvalCase(name="bare", input="hi")],
        evaluators=[ResponseCheck(match="contains")],
    )
    report = run(hello(), eval_set)
    assert report.case("answered").passed
    assert [r.status for r in report.case("bare").runs] == ["no_checks"]
    assert not report.case("bare").passed and report.pass_rate == 0.5 and not report.passed


def test_an_empty_expected_trajectory_is_refused_unless_matched_exactly() -> None:
    with pytest.raises(ValidationError, match=r"case 'c'.*expected_calls is empty.*trajectory:in_order.*exact"):
        EvalSet(cases=[EvalCase(name="c", input="hi", expected_calls=[])])
    exact = EvalSet(
        cases=[EvalCase(name="c", input="hi", expected_calls=[])], evaluators=[TrajectoryCheck(match="exact")]
    )
    assert run(hello(), exact).passed  # "no tool calls" is a check that can fail


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: ResponseCheck(match="contains", value=""), "empty"),
        (lambda: ResponseCheck(match="regex", value=""), "empty"),
        (lambda: ResponseCheck(match="regex", value="(unclosed"), "not a regular expression"),
        (lambda: ResponseCheck(match="rouge", threshold=0), "threshold 0"),
        (lambda: TrajectoryCheck(threshold=0), "threshold 0"),
        (lambda: JudgeCheck(threshold=1), "threshold 1 .*lowest score"),
    ],
)
def test_a_check_that_cannot_fail_is_refused(make: Any, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        make()


def test_a_set_threshold_of_0_is_refused() -> None:
    with pytest.raises(ValidationError, match="threshold 0 passes the set whatever its runs do"):
        EvalSet(cases=[EvalCase(name="c", input="hi", expected_response="hello")], threshold=0)


def test_extra_evaluators_given_to_evaluate_are_held_to_the_same_rule() -> None:
    eval_set = EvalSet(cases=[EvalCase(name="c", input="hi", evaluators=[RunCheck()])])
    with pytest.raises(EvalSetError, match=r"response:exact has nothing to compare against in case 'c'"):
        run(hello(), eval_set, evaluators=[ResponseCheck()])


def test_a_set_file_with_a_vacuous_check_is_refused_at_the_line_of_the_case(tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: vacuous
            evaluators:
              - kind: response
                match: contains
            cases:
              - name: fine
                input: hi
                expected_response: hello
              - name: bare
                input: hi
                evaluators:
                  - kind: trajectory
                    match: any_order
            """
        )
    )
    with pytest.raises(EvalSetError) as caught:
        EvalSet.load(path)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{path}:12: cases[1](bare).evaluators[0]: case 'bare'"), line
    assert "trajectory:any_order" in line and "expected_calls" in line
    bare = path.read_text().replace("evaluators:\n      - kind: trajectory\n        match: any_order\n", "")
    path.write_text(bare.replace("    expected_response: hello\n", ""))
    with pytest.raises(EvalSetError) as caught:
        EvalSet.load(path)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{path}:3: evaluators[0]: response:contains has nothing to compare against"), line
    assert "cases 'fine', 'bare'" in line and "expected_response" in line


def test_a_file_check_that_cannot_fail_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "set.json"
    path.write_text('{"cases": [{"name": "c", "input": "hi", "expected_calls": [{"name": "t"}]}],\n'
                    ' "evaluators": [\n  {"kind": "trajectory", "threshold": 0}\n ]}\n')  # fmt: skip
    with pytest.raises(EvalSetError, match=rf"{path}:3: evaluators\[0\]: .*threshold 0"):
        EvalSet.load(path)


# -- a case with no check is "no checks" and never passes


def no_expectations() -> EvalSet:
    return EvalSet(name="bare", cases=[EvalCase(name="c", input="hi")])


def test_a_set_with_no_expectations_never_passes() -> None:
    report = run(hello(), no_expectations())
    (case,) = report.cases
    assert [r.status for r in case.runs] == ["no_checks"] and case.runs[0].scores == []
    assert not case.passed and case.pass_rate == 0 and not report.passed
    summary = report.summary()
    assert "NO CHECKS  c" in summary and "no checks:" in summary and "MISSED the threshold" in summary
    page = report_html(report)
    assert "passed" not in page.split("id='verdict'>")[1].split("</div>")[0]
    assert "no checks" in page and "class='no_checks'" in page


def test_a_function_check_given_to_evaluate_is_a_check() -> None:
    report = run(hello(), no_expectations(), evaluators=[FunctionCheck(function=lambda case, result: True)])
    assert report.passed


def test_a_run_that_fails_with_no_checks_is_failed() -> None:
    def boom(request: Any) -> Any:
        raise RuntimeError("the model is down")

    report = run(Agent(name="down", model=ScriptedModel(boom)), no_expectations())
    assert report.cases[0].runs[0].status == "failed" and not report.passed


def test_loopwright_eval_run_exits_1_on_a_set_with_no_checks(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "from loopwright import Agent, ScriptedModel\n"
        "agent = Agent(name='hello', model=ScriptedModel(['hello there']))\n"
    )
    (tmp_path / "set.yaml").write_text("cases:\n  - name: c\n    input: hi\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    done = subprocess.run(
        [sys.executable, "-m", "loopwright", "eval", "run", "app:agent", "set.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NO CHECKS  c" in done.stdout and "MISSED the threshold" in done.stdout


def test_a_pytest_item_of_a_case_with_no_checks_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bare="""
        from loopwright import Agent, ScriptedModel
        from loopwright.eval import EvalCase, EvalSet, pytest_cases

        agent = Agent(name="hello", model=ScriptedModel(["hello there"]))
        cases = [EvalCase(name="c", input="hi"), EvalCase(name="ok", input="hi", expected_response="hello there")]
        test_bare = pytest_cases(EvalSet(cases=cases), agent=agent)
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*eval case 'c' (repeat 1) no checks*"])
