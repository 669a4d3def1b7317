"""The workflow examples as users run them (scripts, ``loopwright check``, ``loopwright diagram``
as subprocesses), and the docs page's drawing of the write-critique loop kept in step with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

pytestmark = pytest.mark.slow  # subprocesses


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONPATH"))}
    return subprocess.run([*args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "loopwright", *args, cwd=cwd)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("workflows_research.py", ["trace: start -> researcher -> writer -> editor -> done", "answer: Brief: Tides"]),
        ("workflows_fanout.py", ["trace: start -> reviewers -> summary -> done", "answer: 3 findings: security"]),
        ("workflows_loop.py", ["rounds: 2 of at most 4", "draft: a 12-word haiku about autumn"]),
    ],
)
def test_each_workflow_example_runs_checks_and_draws(name: str, says: list[str]) -> None:
    done = _run(sys.executable, str(ROOT / "examples" / name))
    assert done.returncode == 0, done.stderr
    assert "outcome: final" in done.stdout
    for line in says:
        assert line in done.stdout, done.stdout
    module = f"examples.{name.removesuffix('.py')}"
    attr = {"workflows_research.py": "pipeline", "workflows_fanout.py": "review", "workflows_loop.py": "refine"}[name]
    checked = _cli("check", f"{module}:{attr}")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no violations: every run of this machine ends" in checked.stdout
    drawn = _cli("diagram", "--agent", f"{module}:{attr}")
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout == _run(sys.executable, str(ROOT / "examples" / name), "diagram").stdout
    assert re.search(r"^  state \w+ \{$", drawn.stdout, flags=re.M)  # its children as composite states


def test_check_refuses_a_loop_without_a_bound(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "from loopwright import Agent, ScriptedModel\n"
        "from loopwright.workflows import LoopAgent\n"
        'loop = LoopAgent("forever", body=[Agent(name="w", model=ScriptedModel(["x"]))])\n'
    )
    done = _cli("check", "app:loop", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "loopwright check: app:loop: the machine cannot be built: LoopAgent 'forever' has no max_iterations: a loop "
        "needs a bound (there is no default); pass max_iterations=N, and end it early with the exit_loop tool or "
        "until=..."
    )


def test_the_guides_drawing_is_the_loop_examples_own() -> None:
    page = (ROOT / "docs" / "guide" / "workflows.md").read_text()
    drawn = re.findall(r"```mermaid\n(.*?)```", page, flags=re.S)
    assert drawn, "docs/guide/workflows.md draws the write-critique loop"
    ran = _run(sys.executable, str(ROOT / "examples" / "workflows_loop.py"), "diagram")
    assert drawn[0] == ran.stdout.rstrip("\n") + "\n", "regenerate: python examples/workflows_loop.py diagram"
