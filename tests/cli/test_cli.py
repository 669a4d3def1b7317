"""The loopwright command: the demo, JSON events, check and diagram, and clear errors for bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopwright.cli import main
from loopwright.data.events import EVENT_ADAPTER
from loopwright.features import BUILT_IN_MACHINES
from loopwright.machines.diagram import markdown
from loopwright.table.machine import CORE


def test_demo_json_prints_every_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    events = [EVENT_ADAPTER.validate_json(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [e.type for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    calls = [e for e in events if e.type == "tool_called"]
    results = [e for e in events if e.type == "tool_answered"]
    assert len(calls) == len(results) == 5
    assert any(r.is_error for r in results)  # the recovered tool error
    by_iteration: dict[int, int] = {}
    for c in calls:
        by_iteration[c.iteration] = by_iteration.get(c.iteration, 0) + 1
    assert max(by_iteration.values()) == 2  # one parallel step
    assert events[-1].outcome == "final"


def test_demo_view_shows_the_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "path taken: start → preprocess → reason" in out
    assert "outcome final" in out and "Lisbon is warmer" in out


def test_bad_argument_gets_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--delay", "soon"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --delay: expected a number of seconds, got 'soon'" in err
    assert "Run `loopwright demo --help` for the options." in err


@pytest.mark.slow
def test_demo_with_a_model_and_no_key_says_what_is_missing() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "demo", "--model", "claude-sonnet-5-5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "set ANTHROPIC_API_KEY" in done.stderr


@pytest.mark.slow
def test_console_script_runs_the_demo() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "demo", "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "run_finished"


# ------------------------------------------------------------------ check


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    (tmp_path / "check_target.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("check_target", None)


def test_check_prints_the_report_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "loopwright.table.machine:CORE"]) == 0
    assert capsys.readouterr().out.endswith("no violations: every run of this machine ends\n")


def test_check_takes_an_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _module(
        tmp_path,
        monkeypatch,
        """
        from loopwright import Agent, ScriptedModel
        agent = Agent(name="a", model=ScriptedModel(["hi"]))
    """,
    )
    assert main(["check", "check_target:agent"]) == 0
    assert capsys.readouterr().out.startswith("machine 'agent': 10 states")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nocolon", "'nocolon' is not module:attr; name the object, e.g. myapp.agents:support"),
        (
            "no_such_module_xyz:agent",
            "cannot import module 'no_such_module_xyz' (No module named "
            "'no_such_module_xyz'); run from your project's folder or install it",
        ),
        ("loopwright.table.machine:NOPE", "module 'loopwright.table.machine' has no attribute 'NOPE'"),
        (
            "loopwright.table.machine:CORE_ROWS",
            "loopwright.table.machine:CORE_ROWS is a tuple; name an Agent, a LoopMachine or a function making one",
        ),
    ],
)
def test_check_explains_a_bad_target(target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", target]) == 2
    assert capsys.readouterr().err == f"loopwright check: {message}\n"


def test_check_builds_an_agent_from_a_factory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "loopwright.demo:helpdesk_agent"]) == 0
    assert "machine 'multi_agent+loop_detection': 11 states, 29 rows" in capsys.readouterr().out


def test_check_exits_1_on_a_violation_or_a_machine_that_cannot_be_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _module(
        tmp_path,
        monkeypatch,
        """
        from loopwright.table.guards import has_tool_calls
        from loopwright.table.machine import LoopMachine, Row
        loopy = LoopMachine([Row("start", "work"), Row("work", "work", (has_tool_calls,)), Row("work", "done")],
                            terminals=["done"])
        def broken():
            return LoopMachine([Row("start", "work"), Row("work", "done", (has_tool_calls,))], terminals=["done"])
    """,
    )
    assert main(["check", "check_target:loopy"]) == 1
    out = capsys.readouterr().out
    assert "  FAIL 3. every cycle passes through a bounded edge" in out and out.endswith("1 violation\n")
    assert main(["check", "check_target:broken"]) == 1
    assert capsys.readouterr().err.startswith("loopwright check: check_target:broken: the machine cannot be built: ")


# ------------------------------------------------------------------ diagram


def test_diagram_regenerates_the_diagrams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--out", str(tmp_path), "--format", "mermaid"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.md" for n in BUILT_IN_MACHINES)
    assert (tmp_path / "agent.md").read_text() == markdown(CORE)
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path / n}.md" for n in BUILT_IN_MACHINES]


def test_diagram_notes_the_svgs_it_cannot_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.modules["loopwright.machines.diagram"], "dot_available", lambda: False)
    assert main(["diagram", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "skipped the SVGs: Graphviz is not installed (pip install graphviz; apt-get install graphviz)"
    assert len(out) == len(BUILT_IN_MACHINES) + 1


def test_diagram_draws_one_agent_to_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--format", "mermaid", "--agent", "loopwright.demo:helpdesk_agent"]) == 0
    assert capsys.readouterr().out.startswith("---\ntitle: multi_agent+loop_detection\n")


def test_diagram_overlays_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    events = tmp_path / "events.jsonl"
    events.write_text(capsys.readouterr().out)
    assert main(["diagram", "--trace", str(events)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("---\ntitle: loop_detection\n") and "✔ 1×" in out  # the demo agent has tools
    argv = ["diagram", "--out", str(tmp_path), "--trace", str(events), "--agent", "loopwright.demo:demo_agent"]
    assert main(argv) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'loop_detection-trace.md'}\n"
    page = (tmp_path / "loop_detection-trace.md").read_text()
    assert "```mermaid" in page and "Edges the run took read `✔ n×`" in page


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--format", "gif"], "unknown format 'gif'; use one of mermaid, dot, svg, png"),
        (["--agent", "loopwright.table.machine:NOPE"], "module 'loopwright.table.machine' has no attribute 'NOPE'"),
    ],
)
def test_diagram_explains_a_bad_argument(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", *argv]) == 2
    assert capsys.readouterr().err == f"loopwright diagram: {message}\n"


def test_diagram_explains_a_bad_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["diagram", "--trace", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"loopwright diagram: line 1 of trace {str(bad)!r} is not a loopwright ")


def test_diagram_exits_1_when_the_drawing_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)  # no `dot` program (and maybe no graphviz package)
    assert main(["diagram", "--format", "png", "--agent", "loopwright.table.machine:CORE"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("loopwright diagram: ") and "png diagrams need the" in err
    assert main(["diagram", "--format", "svg", "--agent", "loopwright.table.machine:CORE"]) == 0  # pure Python's
