"""No silent ends: every CLI feed (``run --json``, ``demo --json``, ``eval run``) writes every event
or exits non-zero saying why; ScriptedModel replies are cleaned as the adapters' are (a lone
surrogate becomes U+FFFD), so a scripted run's events can all be written. The CLI as a user
runs it (a subprocess), as in tests/cli/test_run_cli.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright import ModelResponse, ScriptedModel, TextPart, ToolCall
from loopwright.data.events import EVENT_ADAPTER, ModelRequest, ModelResponded
from loopwright.data.parts import Message

pytestmark = pytest.mark.slow  # the CLI as subprocesses

APP = """
from loopwright import Agent, ScriptedModel, ToolCall, tool


@tool
def echo(text: str) -> str:
    \"\"\"Say it back.\"\"\"
    return text


lone = Agent(name="lone", model=ScriptedModel(["bad \\ud800 text"]))
script = [[ToolCall(name="echo", args={"text": "x\\udfff"})], "ok"]
called = Agent(name="called", tools=[echo], model=ScriptedModel(script))
accented = Agent(name="accented", model=ScriptedModel(["h\\u00e9llo"]))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def cli(cwd: Path, *args: str | bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS", "PYTHONIOENCODING")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "loopwright", *args],
        cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, env=environment,
    )  # fmt: skip


def events_of(done: subprocess.CompletedProcess[bytes]) -> list[object]:
    return [EVENT_ADAPTER.validate_json(line) for line in done.stdout.splitlines()]


def quiet(done: subprocess.CompletedProcess[bytes]) -> str:
    """Standard error, checked to hold no traceback and no observer dropped along the way."""
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "was removed" not in err, err
    return err


def responded(reply: ModelResponse, seq: int) -> ModelResponded:
    return ModelResponded(response=reply, run_id="r", seq=seq, time=0.0, state="reason", iteration=1, agent="a")


# -- ScriptedModel cleans its replies as the adapters do


def test_scripted_replies_are_cleaned_as_the_adapters_are() -> None:
    import asyncio

    model = ScriptedModel(
        [
            "a\ud800b",
            [ToolCall(name="echo", args={"text": "x\udfff", "k\ud801": 1})],
            ModelResponse(parts=(TextPart(text="\ud83d\ude00 ok \udc00"),)),
        ]
    )
    request = ModelRequest(messages=[Message(role="user", parts=(TextPart(text="hi"),))])

    async def replies() -> list[ModelResponse]:
        return [await model.complete(request) for _ in range(3)]

    text, call, whole = asyncio.run(replies())  # (compared as ascii(): a report holding a lone surrogate breaks xdist)
    assert ascii(text.text) == ascii("a\ufffdb")
    assert ascii(call.tool_calls[0].args) == ascii({"text": "x\ufffd", "k\ufffd": 1})
    assert ascii(whole.text) == ascii("\U0001f600 ok \ufffd")  # a pair joined, a lone one replaced
    for reply in (text, call, whole):
        responded(reply, 1).model_dump_json()

    function = ScriptedModel(lambda request: ModelResponse(parts=(TextPart(text="f\ud800"),)))
    assert ascii(asyncio.run(function.complete(request)).text) == ascii("f\ufffd")


# -- run --json


def test_run_json_writes_every_event_of_a_reply_holding_a_lone_surrogate(project: Path) -> None:
    done = cli(project, "run", "app:lone", "hi", "--json")
    quiet(done)
    assert done.returncode == 0
    events = events_of(done)
    assert events[-1].type == "run_finished" and events[-1].outcome == "final"  # type: ignore[attr-defined]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # type: ignore[attr-defined]
    assert "bad \ufffd text" in done.stdout.decode()


def test_run_json_writes_every_event_of_tool_arguments_holding_a_lone_surrogate(project: Path) -> None:
    done = cli(project, "run", "app:called", "hi", "--json")
    quiet(done)
    assert done.returncode == 0 and events_of(done)[-1].type == "run_finished"  # type: ignore[attr-defined]


def test_run_json_writes_every_event_of_an_input_holding_undecodable_bytes(project: Path) -> None:
    done = cli(project, "run", "app:accented", b"hi \xff", "--json")
    quiet(done)
    assert done.returncode == 0
    events = events_of(done)
    assert events[0].input == "hi \ufffd" and events[-1].type == "run_finished"  # type: ignore[attr-defined]


def test_run_json_that_cannot_write_an_event_exits_1_saying_why(project: Path) -> None:
    done = cli(project, "run", "app:accented", "hi", "--json", PYTHONIOENCODING="ascii")
    err = quiet(done)
    assert done.returncode == 1, err
    assert "writing the events failed" in err and "ascii" in err and "event 5 (model_responded)" in err


def test_a_feed_that_cannot_write_an_event_stops_and_says_which() -> None:
    from loopwright import Agent
    from loopwright.cli.run_command import RunView, _Feed  # the feed itself: an event no JSON can hold

    out = io.StringIO()
    feed = _Feed(RunView(Agent(name="a", model=ScriptedModel(["ok"]))), out)
    ok, lone = ModelResponse(parts=(TextPart(text="ok"),)), ModelResponse(parts=(TextPart(text="\ud800"),))
    for event in (responded(ok, 1), responded(lone, 2), responded(ok, 3)):
        feed.on_event(event)
    assert len(out.getvalue().splitlines()) == 1
    assert feed.failed is not None and "event 2 (model_responded)" in feed.why()


# -- demo --json


def test_demo_json_writes_every_event_of_an_input_holding_undecodable_bytes(tmp_path: Path) -> None:
    done = cli(tmp_path, "demo", "--json", "--input", b"trip \xff")
    quiet(done)
    assert done.returncode == 0
    events = events_of(done)
    assert events[0].input == "trip \ufffd" and events[-1].type == "run_finished"  # type: ignore[attr-defined]


def test_demo_json_that_cannot_write_an_event_exits_1_saying_why(tmp_path: Path) -> None:
    done = cli(tmp_path, "demo", "--json", "--input", "caf\u00e9", PYTHONIOENCODING="ascii")
    err = quiet(done)
    assert done.returncode == 1, err
    assert "loopwright demo: writing the events failed" in err and "event 1 (run_started)" in err


# -- eval run


def test_eval_writes_its_report_of_a_case_holding_a_lone_surrogate(project: Path) -> None:
    (project / "set.json").write_text(
        json.dumps({"cases": [{"name": "c", "input": "hi \ud800", "expected_response": "bad \ufffd text"}]})
    )
    done = cli(project, "eval", "run", "app:lone", "set.json", "--json", "--save", "report.json", "-o", "r.html")
    quiet(done)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["passed"] and report["cases"][0]["runs"][0]["events"][0]["input"] == "hi \ufffd"
    assert json.loads((project / "report.json").read_text())["passed"] and (project / "r.html").exists()


def test_eval_that_cannot_write_its_report_exits_non_zero_saying_why(project: Path) -> None:
    (project / "set.json").write_text(
        json.dumps({"cases": [{"name": "c", "input": "hi", "expected_response": "h\u00e9llo"}]})
    )
    for extra in ((), ("--json",)):
        done = cli(project, "eval", "run", "app:accented", "set.json", *extra, PYTHONIOENCODING="ascii")
        err = quiet(done)
        assert done.returncode == 1, err
        assert "loopwright eval run: writing the report failed" in err and "ascii" in err
