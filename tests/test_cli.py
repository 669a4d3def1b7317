"""The loopwright command: the demo, JSON events, and clear errors for bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loopwright.cli import main
from loopwright.events import EVENT_ADAPTER


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


def test_demo_with_a_model_and_no_key_says_what_is_missing() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "demo", "--model", "claude-sonnet-4-5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "set ANTHROPIC_API_KEY" in done.stderr


def test_console_script_runs_the_demo() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "demo", "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "run_finished"
