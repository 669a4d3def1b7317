"""The docs' promises: every Python block of README.md and of docs/**/*.md runs, the README's
commands are the ones CI runs, and the machine page's table and diagram are the machine's own.

Block conventions (the fresh-interpreter runner of the user-path tier reads the same blocks):

- A fence opened by exactly three backticks and ``python`` at the start of a line, then the end
  of that line, is an example: it runs as one test, ``{page}:{line}`` (the fence's line), in a
  namespace of its own (``__name__`` is ``readme_{n}``), with no set-up beyond the ``[dev]``
  install: no network, no API key, no file outside a temporary folder it makes itself.
- Every other fence is not run: ``sh``/``bash`` (commands), ``text`` (output shown), ``mermaid``,
  ``toml``. A Python fence with anything after ``python`` on its line (a title, say) is shown,
  not run: write no such fence unless it truly cannot run, and say why beside it.
- A block checks itself with ``assert``. Functions named ``test_*`` and classes named ``Test*``
  with a ``runTest`` (a hypothesis state machine's ``TestCase``) that a block defines are run
  too, after the block.
- A docs page that includes README text (``--8<-- "README.md:section"``, pymdownx.snippets) holds
  no copy of its blocks: they run once, from README.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopwright.table.machine import CORE
from tests import ROOT

README = (ROOT / "README.md").read_text()
MACHINE_PAGE = ROOT / "docs" / "guide" / "machine.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def python_blocks(page: Path) -> list[tuple[str, str]]:
    """``(id, code)`` of each Python example of a page: id ``page:line`` (the fence's line)."""
    text = page.read_text()
    name = page.relative_to(ROOT).as_posix()
    return [(f"{name}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1)) for m in _FENCE.finditer(text)]


BLOCKS = [block for page in PAGES for block in python_blocks(page)]


def _marks(code: str) -> list[pytest.MarkDecorator]:
    """A block that runs DBOS is marked ``dbos`` (it launches DBOS: seconds), as the DBOS tests
    are; one that runs a hypothesis property or starts a server process is ``slow``."""
    marks = [pytest.mark.dbos] if re.search(r"^from dbos import|^import dbos", code, flags=re.M) else []
    slow = any(sign in code for sign in ("@given(", "McpToolset.stdio(", "subprocess.Popen("))
    return marks + ([pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("code", [pytest.param(code, id=where, marks=_marks(code)) for where, code in BLOCKS])
def test_python_examples_run(
    code: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the files an example writes (a server script, runs.db) stay out of the checkout
    where = request.node.callspec.id
    namespace: dict[str, object] = {"__name__": f"readme_{BLOCKS.index((where, code))}"}
    exec(compile(code, where, "exec"), namespace)
    for name, value in namespace.items():  # an example that defines tests: run them too
        if name.startswith("test_") and callable(value):
            value()
        elif name.startswith("Test") and isinstance(value, type) and hasattr(value, "runTest"):
            value("runTest").runTest()


def test_every_page_with_python_has_its_blocks_collected() -> None:
    """A block written with another opening (`` ```py ``, ``` ```python3 ```) would silently not run."""
    for page in PAGES:
        odd = re.findall(r"^```(py|python3|Python|pycon)\s*$", page.read_text(), flags=re.M)
        assert not odd, f"{page.relative_to(ROOT)}: write ```python (the blocks that run), not ```{odd[0]}"


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"```sh\n(.*?)\n```", README, flags=re.S)
    demo, tests = commands[0], commands[1]
    assert demo.endswith("loopwright demo") and tests.endswith("python -m pytest")
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci_lines, "README's test command and .ci/run differ"


def test_the_state_table_is_the_machine() -> None:
    page = MACHINE_PAGE.read_text()
    rows = re.findall(r"^\| (\w+) \| (\w+) \| ([\w &]+) \| ?(\w*) ?\| ?(\w*) ?\|$", page, flags=re.M)
    assert [(s, d, g, b or None, o or None) for s, d, g, b, o in rows] == [
        (r.source, r.dest, r.label, r.bounded_by, r.outcome if r.dest in CORE.terminals else None) for r in CORE.rows
    ]


def test_the_machine_page_shows_the_generated_diagram() -> None:
    generated = (ROOT / "diagrams" / "agent.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", generated, flags=re.S)
    page = MACHINE_PAGE.relative_to(ROOT)
    assert block is not None and block.group(0) in MACHINE_PAGE.read_text(), (
        f"run `loopwright diagram` and paste diagrams/agent.md into {page}"
    )


def test_a_result_draws_its_own_trace() -> None:
    from loopwright import Agent, Runner, ScriptedModel, diagram

    result = Runner(Agent(name="a", model=ScriptedModel(["hi"]))).run_sync("go")
    drawing = diagram(result)
    assert isinstance(drawing, str) and "decide --> done" in drawing and "✔" in drawing
