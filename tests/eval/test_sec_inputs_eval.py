"""Hostile eval inputs (issue 42, S7, S8, S14): an eval set file nested 1,000 deep, a YAML
"billion laughs" in a mock's result or a call's expected arguments, and a judge that answers
"Score: 1e999", nests its JSON 1,000 deep or sends a lone surrogate. Each ends in a clear
loopwright error or a "not judged" score, never a raw RecursionError, a 2 GiB allocation or a
report that cannot be saved."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, ModelResponse, ScriptedModel, TextPart
from loopwright.data.errors import ConfigurationError
from loopwright.eval import EvalCase, EvalReport, EvalSet, JudgeCheck, evaluate
from loopwright.eval.base import EvalSetError
from loopwright.eval.files import MAX_ALIAS_NODES, MAX_NESTING
from loopwright.eval.judge import parse_verdict
from tests import ROOT

# ---------------------------------------------------------------- S7: nesting


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def _json_set(value: str) -> str:
    return '{\n  "cases": [\n    {"name": "a", "input": "hi",\n     "state": {"x": ' + value + "}}\n  ]\n}\n"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_set_nested_1000_deep_is_a_clear_error_with_its_file_and_line(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(_json_set(_deep(1000)))  # (JSON is YAML: the same text both ways)
    with pytest.raises(EvalSetError) as caught:
        EvalSet.load(path)
    said = str(caught.value)
    assert isinstance(caught.value, ConfigurationError)
    assert said.startswith(f"{path}:4: "), said
    assert f"more than {MAX_NESTING} levels" in said and "flatten" in said, said


def test_a_block_yaml_set_nested_1000_deep_is_a_clear_error(tmp_path: Path) -> None:
    lines = ["cases:", "- name: a", "  input: hi", "  state:"]
    lines += [" " * (4 + 2 * i) + f"k{i}:" for i in range(1000)]
    lines[-1] += " 1"
    path = tmp_path / "deep.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(EvalSetError, match=rf"^{path}:\d+: .*more than {MAX_NESTING} levels"):
        EvalSet.load(path)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_set_nested_within_the_limit_loads(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"ok{suffix}"
    path.write_text(_json_set(_deep(MAX_NESTING - 10)))
    loaded = EvalSet.load(path)
    assert "x" in loaded.cases[0].state


def test_brackets_inside_strings_are_not_nesting(tmp_path: Path) -> None:
    path = tmp_path / "strings.json"
    path.write_text(_json_set(json.dumps("[" * 5000 + '\\"{' * 100)))
    assert EvalSet.load(path).cases[0].state["x"] == "[" * 5000 + '\\"{' * 100


def test_a_judge_reply_nested_1000_deep_is_not_judged() -> None:
    reply = '{"score": 4, "reasoning": ' + _deep(1000) + "}"
    run = _judged(reply)
    assert run.status == "not_judged", run
    assert f"more than {MAX_NESTING} levels" in run.scores[0].reason, run.scores[0].reason


# ---------------------------------------------------------------- S8: YAML aliases


def laughs(where: str) -> str:
    """An eval set whose mocks' results (or expected calls' arguments) are a billion laughs:
    nine anchors, each a list of nine of the one before (9**9 "lol"s), about 430 bytes of them."""
    head, item = {
        "mock_result": ("  mocks:\n", "  - {{tool: t, result: {v}}}\n"),
        "expected_args": ("  expected_calls:\n", "  - {{name: t, args: {{x: {v}}}}}\n"),
    }[where]
    values = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    values += [f"&{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    return "cases:\n- name: lol\n  input: hi\n" + head + "".join(item.format(v=v) for v in values)


_PROBE = textwrap.dedent(
    """\
    import resource, sys, tracemalloc
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))  # (unfixed: a MemoryError, not a dead host)
    from loopwright.eval import EvalSet
    tracemalloc.start()
    try:
        EvalSet.load(sys.argv[1])
        said = "loaded"
    except MemoryError:
        said = "MemoryError"
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}"
    print(tracemalloc.get_traced_memory()[1])
    print(said)
    """
)


def _load_in_a_child(path: Path) -> tuple[int, str]:
    """Load ``path`` in a child process whose address space is capped: the peak of memory the
    load allocated (tracemalloc) and what it came to."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak, said = done.stdout.split("\n", 1)
    return int(peak), said.strip()


@pytest.mark.slow  # a process of its own, its memory capped: before the fix this load took 2 GiB
@pytest.mark.parametrize("where", ["mock_result", "expected_args"])
def test_a_billion_laughs_is_refused_at_once_in_bounded_memory(tmp_path: Path, where: str) -> None:
    text = laughs(where)
    assert len(text.encode()) < 700
    path = tmp_path / "laughs.yaml"
    path.write_text(text)
    peak, said = _load_in_a_child(path)
    assert said.startswith(f"EvalSetError: {path}:"), said
    assert "aliases" in said and f"{MAX_ALIAS_NODES:,}" in said, said
    assert peak < 8 * 2**20, f"the refusal allocated {peak / 2**20:.1f} MiB"


def test_a_billion_laughs_is_refused_in_this_process_with_little_memory(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "laughs.yaml"
    path.write_text(laughs("mock_result"))
    tracemalloc.start()
    try:
        with pytest.raises(EvalSetError, match=rf"^{path}:9: the YAML aliases stand for more than 10,000 nodes"):
            EvalSet.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"the refusal allocated {peak / 2**20:.1f} MiB"


def test_a_few_aliases_within_the_budget_load(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            mocks:
            - &weather {tool: weather, result: {temp_c: 21, sky: [clear, dry]}}
            cases:
            - {name: a, input: hi, mocks: [*weather]}
            - {name: b, input: ho, mocks: [*weather]}
            """
        )
    )
    loaded = EvalSet.load(path)
    assert loaded.cases[1].mocks[0].result == {"temp_c": 21, "sky": ["clear", "dry"]}


def test_aliases_in_one_line_of_json_data_are_counted_by_what_they_expand_to(tmp_path: Path) -> None:
    """The budget counts what aliases stand for, not how many there are: a wide anchor used
    a few times is refused as surely as a deep chain."""
    wide = "[" + ",".join(["1"] * 5000) + "]"
    path = tmp_path / "wide.yaml"
    path.write_text(f"cases:\n- name: a\n  input: hi\n  state: {{w: &w {wide}, x: [*w, *w, *w]}}\n")
    with pytest.raises(EvalSetError, match=rf"^{path}:4: .*aliases"):
        EvalSet.load(path)


# ---------------------------------------------------------------- S14: the judge's reply


def _judged(reply: str) -> Any:
    judge = ScriptedModel(lambda request: ModelResponse(parts=(TextPart(text=reply),)))
    agent = Agent(name="a", model=ScriptedModel(["Thank you!"]))
    case = EvalCase(name="c", input="?", rubric="Is it polite?")
    report = asyncio.run(evaluate(agent, EvalSet(cases=[case], evaluators=[JudgeCheck()]), judge=judge, progress=False))
    (run,) = report.cases[0].runs
    return run


@pytest.mark.parametrize(
    "reply",
    [
        "Score: 1e999",
        "score: 1e2",
        "Score: 3e999",
        '{"score": 1e999, "reasoning": "big"}',
        '{"score": NaN, "reasoning": "odd"}',
        '{"score": -Infinity, "reasoning": "odd"}',
        '{"score": 1' + "0" * 400 + ', "reasoning": "an int too large for a float"}',
        "Score: 4.5.6",
        "Score: 0x4",
    ],
)
def test_a_score_that_is_not_a_finite_number_on_the_scale_is_not_judged(reply: str) -> None:
    run = _judged(reply)
    assert run.status == "not_judged", (reply, run.scores[0])
    assert run.scores[0].passed is None and run.scores[0].value is None


def test_the_score_is_read_whole() -> None:
    assert parse_verdict("Score: 1e999") is not None  # read, and refused by the judge as not finite
    verdict = parse_verdict("Score: 1e999")
    assert verdict is not None and verdict[0] != 1.0
    assert parse_verdict("Score: 4") == (4.0, "Score: 4")
    assert parse_verdict("Score: 3.5, fine") == (3.5, "Score: 3.5, fine")
    assert parse_verdict("score = 2.") == (2.0, "score = 2.")


def test_a_lone_surrogate_in_the_judge_s_reply_is_cleaned_and_the_report_saves(tmp_path: Path) -> None:
    run = _judged('{"score": 4, "reasoning": "polite \ud800 and short"}')
    assert run.status == "passed" and run.scores[0].reason == "polite \ufffd and short"
    not_judged = _judged("no score here \udfff")
    assert not_judged.scores[0].details["reply"] == "no score here \ufffd"
    judge = ScriptedModel(lambda request: ModelResponse(parts=(TextPart(text="Score: 4 \udc80 fine"),)))
    agent = Agent(name="a", model=ScriptedModel(["Thank you!"]))
    case = EvalCase(name="c", input="?", rubric="Is it polite?")
    report = asyncio.run(evaluate(agent, EvalSet(cases=[case], evaluators=[JudgeCheck()]), judge=judge, progress=False))
    saved = report.save(tmp_path / "report.json")
    back = EvalReport.load(saved)
    assert back.cases[0].runs[0].scores[0].reason == "Score: 4 \ufffd fine"


def test_an_escaped_surrogate_in_the_judge_s_json_is_cleaned_too() -> None:
    run = _judged('{"score": 5, "reasoning": "kind \\ud83d words"}')  # (valid JSON text: json.loads makes it lone)
    assert run.status == "passed" and run.scores[0].reason == "kind \ufffd words"


def test_an_answer_nested_1000_deep_is_not_json_for_the_schema_check() -> None:
    from loopwright.eval.response import parse_json

    data, why = parse_json('{"a": ' + _deep(1000) + "}")
    assert data is None and why == f"the answer nests JSON more than {MAX_NESTING} levels deep"
    assert parse_json('{"a": ' + _deep(20) + "}")[1] is None


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text("cases:\n- name: a\n  input: hi\n  state: {x: &loop [1, *loop]}\n")
    with pytest.raises(EvalSetError, match=rf"^{path}:4: the alias \*loop is inside its own anchor"):
        EvalSet.load(path)
