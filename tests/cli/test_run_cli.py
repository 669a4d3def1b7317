"""`loopwright run module:agent "input"` drives a user's agent from the project's own folder: the
live view on a terminal (checked through a pseudo-terminal), confirmations asked there, --json
event lines, and a waiting run saved and resumed with --resume."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopwright.data.events import EVENT_ADAPTER

APP = '''
import asyncio
from loopwright import Agent, Limits, ToolCall, tool
from loopwright.data.events import ModelRequest, ModelResponse
from loopwright.models.scripted import ScriptedModel, to_response


@tool
async def rate(currency: str) -> float:
    """Exchange rate to euros."""
    await asyncio.sleep(0.05)
    return 0.9


@tool(requires_confirmation=True)
def wire(amount: int) -> str:
    """Wire money out of the account."""
    return f"wired {amount}"


def reply(request: ModelRequest) -> ModelResponse:
    """Look the rate up, then wire; then say what the wire came to (the history decides, so a
    resumed run in a new process goes on where it stopped)."""
    last = request.messages[-1]
    results = [p for p in last.parts if p.type == "tool_result"]
    if not results:
        return to_response([ToolCall(name="rate", args={"currency": "USD"})])
    if results[0].name == "rate":
        return to_response([ToolCall(name="wire", args={"amount": 500})])
    return to_response(f"wire: {results[0].content}")


agent = Agent(name="treasurer", tools=[rate, wire], model=ScriptedModel(reply),
              limits=Limits(max_iterations=6, max_tool_calls=5, max_total_tokens=10_000))
'''

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "treasury.py").write_text(APP)
    return tmp_path


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "loopwright.cli", "run", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
    env.update(TERM="xterm-256color", COLUMNS="110", LINES="40", PYTHONUNBUFFERED="1")
    return env


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``loopwright ARGS`` run in ``project`` with no terminal (stdin closed), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "loopwright.cli", *args],
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment(),
    )


class Terminal:
    """A process on a pseudo-terminal: read what it shows, type answers."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        main, secondary = pty.openpty()
        self.fd = main
        self.process = subprocess.Popen(
            argv, cwd=cwd, stdin=secondary, stdout=secondary, stderr=secondary, env=environment(), close_fds=True
        )
        os.close(secondary)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text not in ANSI.sub("", self.screen):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the terminal showed:\n{ANSI.sub('', self.screen)}")
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.screen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:  # the process ended
                    time.sleep(0.05)
        return ANSI.sub("", self.screen)

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        code = self.process.wait(timeout=timeout)
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                break
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.screen += chunk.decode(errors="replace")
        os.close(self.fd)
        return code, ANSI.sub("", self.screen)


@pytest.mark.slow
def test_on_a_terminal_the_live_view_runs_and_a_confirmation_is_asked(project: Path) -> None:
    term = Terminal(command("treasury:agent", "Send 500 USD to the supplier", "--trace", "out/trace.html"), project)
    shown = term.read_until("Approve this call? [y/N]")
    # the live view: agent, stage, iteration, budgets left, the tool call, the path so far
    assert "loopwright · treasurer" in shown
    assert "budgets left" in shown and "iterations" in shown and "tool calls" in shown and "tokens" in shown
    assert "rate" in shown and "currency='USD'" in shown and "ok" in shown
    assert "path" in shown and "start → preprocess → reason" in shown
    assert "wire(amount=500)" in shown and "needs your approval" in shown
    term.type("y")
    code, shown = term.finish()
    assert code == 0, shown
    assert "answer: wire: wired 500" in shown
    assert "suspended" in shown and "outcome final" in shown
    assert not (project / ".loopwright").exists()  # decided at once: nothing saved
    page = (project / "out" / "trace.html").read_text()  # --trace: both legs of the run on one page
    assert "trace page: out/trace.html" in shown and '"type": "resumed"' in page and "wire: wired 500" in page


@pytest.mark.slow
def test_a_denied_confirmation_reaches_the_model_with_the_reason(project: Path) -> None:
    term = Terminal(command("treasury:agent", "Send 500 USD"), project)
    term.read_until("Approve this call? [y/N]")
    term.type("n")
    term.read_until("Reason (optional):")
    term.type("over the limit")
    code, shown = term.finish()
    assert code == 0, shown
    assert "denied by the user: over the limit" in shown


def test_json_lines_then_a_saved_wait_then_resume(project: Path) -> None:
    first = cli(project, "run", "treasury:agent", "Send 500 USD", "--json")
    assert first.returncode == 3, first.stderr
    events = [EVENT_ADAPTER.validate_json(line) for line in first.stdout.splitlines()]
    assert events[0].type == "run_started" and events[-1].type == "suspended"
    run_id = events[0].run_id
    saved = project / ".loopwright" / "runs" / f"{run_id}.json"
    assert saved.exists()
    assert f"loopwright run treasury:agent --resume {run_id}" in first.stderr

    again = cli(project, "run", "treasury:agent", "--resume", run_id, "--yes", "--json")
    assert again.returncode == 0, again.stderr
    resumed = [EVENT_ADAPTER.validate_json(line) for line in again.stdout.splitlines()]
    assert resumed[0].type == "resumed" and resumed[0].seq == events[-1].seq + 1
    finished = resumed[-1]
    assert finished.type == "run_finished" and finished.outcome == "final" and finished.output == "wire: wired 500"
    assert "approved wire(amount=500) (--yes)" in again.stderr

    # both legs' lines make one trace page
    (project / "events.jsonl").write_text(first.stdout + again.stdout)
    page = cli(project, "trace", "events.jsonl", "-o", "trace.html")
    assert page.returncode == 0, page.stderr
    assert json.dumps("wire: wired 500") in (project / "trace.html").read_text()


def test_bad_arguments_say_what_to_do(project: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(project, "run", *args)

    missing = run("nosuch:agent", "hi")
    assert missing.returncode == 2 and "cannot import module 'nosuch'" in missing.stdout + missing.stderr
    neither = run("treasury:agent")
    assert neither.returncode == 2 and "give the input, or --resume RUN" in neither.stdout + neither.stderr
    unknown = run("treasury:agent", "--resume", "nope")
    assert unknown.returncode == 2 and "cannot read the saved run" in unknown.stdout + unknown.stderr


def test_a_run_kept_in_a_store_waits_and_is_resumed_from_it_by_id(project: Path) -> None:
    """``--store URL``: the run is checkpointed there (no file is written), and ``--resume RUN``
    with the same store claims the wait and goes on, in a new process."""
    store = f"sqlite:///{project / 'runs.db'}"

    def stored(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(project, "run", "treasury:agent", *args, "--store", store, "--json")

    first = stored("Send 500 USD")
    assert first.returncode == 3, first.stderr
    run_id = EVENT_ADAPTER.validate_json(first.stdout.splitlines()[0]).run_id
    assert not (project / ".loopwright" / "runs" / f"{run_id}.json").exists()
    assert f"--store {store} --resume {run_id}" in " ".join(first.stderr.split())  # rich wraps lines
    again = stored("--resume", run_id, "--yes")
    assert again.returncode == 0, again.stderr
    finished = EVENT_ADAPTER.validate_json(again.stdout.splitlines()[-1])
    assert finished.type == "run_finished" and finished.output == "wire: wired 500"
    twice = stored("--resume", run_id, "--yes")  # the wait was claimed: a second resume is refused
    assert twice.returncode == 2 and "has ended" in twice.stdout + twice.stderr
    page = cli(project, "trace", run_id, "--store", store, "-o", "stored.html")  # both legs' events, from the store
    assert page.returncode == 0, page.stderr
    html = (project / "stored.html").read_text()
    assert json.dumps("wire: wired 500") in html and '"type": "suspended"' in html
