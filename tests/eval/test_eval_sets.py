"""Eval sets as files: YAML and JSON round trips, the published JSON schema, and a file that does
not validate reported as file, line and field, one line per problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwright.eval import EvalCase, EvalSet, EvalSetError, ExpectedCall, ToolMock, TrajectoryCheck, eval_set_schema
from tests import ROOT

EXAMPLE = ROOT / "examples" / "eval" / "trip.yaml"


def a_set() -> EvalSet:
    return EvalSet(
        name="s",
        cases=[
            EvalCase(
                name="one",
                input="hi",
                expected_calls=[ExpectedCall(name="search", args={"q": "x"}, args_match="subset")],
                mocks=[ToolMock(tool="search", result=["a"])],
                tags=["t"],
            ),
            EvalCase(name="two", conversation=["hi", "and then?"], expected_response="ok", rubric="polite"),
        ],
        evaluators=[TrajectoryCheck(match="any_order")],
    )


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_set_round_trips_through_its_file(tmp_path: Path, suffix: str) -> None:
    original = a_set()
    path = original.save(tmp_path / f"set{suffix}")
    assert EvalSet.load(path) == original


def test_the_worked_example_loads() -> None:
    loaded = EvalSet.load(EXAMPLE)
    assert len(loaded.cases) >= 5 and any(c.mocks for c in loaded.cases)


def test_the_published_schema_is_the_current_one() -> None:
    published = json.loads((ROOT / "docs" / "reference" / "eval-set.schema.json").read_text())
    assert published == eval_set_schema(), "regenerate it: loopwright eval schema > docs/reference/eval-set.schema.json"


BAD = """\
name: broken
cases:
  - name: first
    input: hello
    expected_calls:
      - {name: search, args_match: sometimes}
  - name: second
    input: hi
    conversation: [hi]
  - name: third
    input: hey
    limits: {max_iterations: 3}
    evaluators:
      - {kind: trajectory, match: backwards}
"""


def test_a_file_that_does_not_validate_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    with pytest.raises(EvalSetError) as caught:
        EvalSet.load(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"{path}:6: cases[0](first).expected_calls[0](search).args_match: Input should be")
    assert lines[1].startswith(f"{path}:7: cases[1](second): Value error, give the case exactly one of `input`")
    assert lines[2].startswith(f"{path}:14: cases[2](third).evaluators[0].match: Input should be")


def test_json_sets_get_lines_too_and_broken_syntax_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "cases": [\n    {"name": "x"}\n  ]\n}\n')
    with pytest.raises(EvalSetError, match=r"bad.json:3: cases\[0\]\(x\): Value error"):
        EvalSet.load(path)
    path.write_text('{"cases": [\n  {"name": "x",}\n]}')
    with pytest.raises(EvalSetError, match=r"bad.json:2: not valid JSON"):
        EvalSet.load(path)
    broken = tmp_path / "broken.yaml"
    broken.write_text("cases:\n  - name: [unclosed\n")
    with pytest.raises(EvalSetError, match=r"broken.yaml:3: not valid YAML"):
        EvalSet.load(broken)
    with pytest.raises(EvalSetError, match="cannot read the eval set"):
        EvalSet.load(tmp_path / "missing.yaml")


def test_case_names_are_unique() -> None:
    with pytest.raises(ValueError, match="two cases are named 'a'"):
        EvalSet(cases=[EvalCase(name="a", input="x"), EvalCase(name="a", input="y")])
