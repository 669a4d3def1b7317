"""The README's promises: its code examples run, its commands are the ones CI runs, and its
state table is the machine's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopwright.machine import CORE

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_examples_run(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": f"readme_{index}"}
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), namespace)
    for name, value in namespace.items():  # an example that defines tests: run them too
        if name.startswith("test_") and callable(value):
            value()
        elif name.startswith("Test") and isinstance(value, type) and hasattr(value, "runTest"):
            value("runTest").runTest()


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"```sh\n(.*?)\n```", README, flags=re.S)
    demo, tests = commands[0], commands[1]
    assert demo.endswith("loopwright demo") and tests.endswith("python -m pytest")
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci_lines, "README's test command and .ci/run differ"


def test_the_state_table_is_the_machine() -> None:
    rows = re.findall(r"^\| (\w+) \| (\w+) \| ([\w &]+) \| ?(\w*) ?\| ?(\w*) ?\|$", README, flags=re.M)
    assert [(s, d, g, b or None, o or None) for s, d, g, b, o in rows] == [
        (r.source, r.dest, r.label, r.bounded_by, r.outcome if r.dest in CORE.terminals else None) for r in CORE.rows
    ]


def test_the_readme_shows_the_generated_diagram() -> None:
    generated = (ROOT / "diagrams" / "agent.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", generated, flags=re.S)
    assert block is not None and block.group(0) in README, "run `loopwright diagram` and paste diagrams/agent.md"


def test_a_result_draws_its_own_trace() -> None:
    from loopwright import Agent, Runner, ScriptedModel, diagram

    result = Runner(Agent(name="a", model=ScriptedModel(["hi"]))).run_sync("go")
    drawing = diagram(result)
    assert isinstance(drawing, str) and "decide --> done" in drawing and "✔" in drawing
