"""Hardening: the errors a user meets say what was wrong and what to do."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopwright import Agent, ConfigurationError, Runner, ScriptedModel, ToolCall, tool
from loopwright.cli import main


def test_a_tool_parameter_without_an_annotation_is_refused_with_the_fix() -> None:
    def lookup(city, days: int = 1) -> str:  # type: ignore[no-untyped-def]
        """Looks up the weather."""
        return ""

    with pytest.raises(ConfigurationError, match=r"tool 'lookup': parameter 'city' has no type annotation.*city: str"):
        tool(lookup)


def test_an_unannotated_ctx_parameter_is_still_the_context() -> None:
    def where(city: str, ctx) -> str:  # type: ignore[no-untyped-def]
        """Says where."""
        return city

    assert tool(where).ctx_param == "ctx"


def _agent() -> Agent:
    return Agent(name="a", model=ScriptedModel(["hi"]), instruction="T.")


@pytest.mark.parametrize("call", ["run_sync", "start", "new_run"])
def test_unknown_run_options_are_refused_naming_the_valid_ones(call: str) -> None:
    runner = Runner(_agent())
    with pytest.raises(ConfigurationError, match=r"unknown run option 'sesion_state'.*run_id, state, after, agent"):
        getattr(runner, call)("hi", sesion_state={"a": 1})


def test_resume_sync_inside_a_running_loop_says_to_await() -> None:
    runner = Runner(_agent())
    result = runner.run_sync("hi")

    async def inside() -> None:
        runner.resume_sync(result)

    with pytest.raises(ConfigurationError, match=r"resume_sync\(\) cannot be called inside a running event loop"):
        asyncio.run(inside())


def test_a_transfer_from_an_agent_without_targets_names_the_target() -> None:
    from loopwright.testing import scripted

    helper = Agent(name="helper", model=ScriptedModel([]), instruction="H.", disallow_transfer_to_parent=True)
    root = Agent(name="root", model=ScriptedModel([]), instruction="R.", sub_agents=[helper])
    go = ToolCall(name="transfer_to_agent", args={"agent_name": "helper", "task": "t"})
    back = ToolCall(name="transfer_to_agent", args={"agent_name": "root", "task": "t"})
    result = Runner(scripted(root, [[go], [back], "done"])).run_sync("x")
    answers = [p for m in result.messages for p in m.parts if getattr(p, "call_id", None) == back.id]
    assert answers and "'root'" in answers[0].content and "helper" in answers[0].content


def _project(tmp_path: Path) -> Path:
    (tmp_path / "myagents.py").write_text(
        textwrap.dedent(
            """
            from loopwright import Agent, ScriptedModel
            support = Agent(name="support", model=ScriptedModel(["hi"]), instruction="Help.")
            """
        )
    )
    return tmp_path


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(Path(sys.executable).parent / "loopwright"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.slow
def test_check_and_diagram_find_modules_in_the_current_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = _cli(["check", "myagents:support"], project)
    assert done.returncode == 0, done.stderr
    done = _cli(["diagram", "--agent", "myagents:support"], project)
    assert done.returncode == 0, done.stderr
    assert "stateDiagram" in done.stdout or "flowchart" in done.stdout


@pytest.mark.slow
def test_diagram_with_no_arguments_outside_the_project_writes_nothing(tmp_path: Path) -> None:
    done = _cli(["diagram"], tmp_path)
    assert done.returncode == 2
    assert "--out" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_diagram_with_no_arguments_in_this_project_regenerates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagram", "--format", "mermaid", "--out", str(tmp_path)]) == 0
    assert any(tmp_path.iterdir())


def test_demo_input_reaches_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json", "--input", "Is Oslo warmer than Rome?"]) in (0, 1)
    out = capsys.readouterr().out
    assert '"input":"Is Oslo warmer than Rome?"' in out
