"""The CLI's doors, run as a user runs them (a subprocess): a waiting run is resumed once, read-only
commands change no file, bad input is one line and exit 2, and what `run --json` writes `trace` reads."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from loopwright.data.events import EVENT_ADAPTER
from tests import ROOT

pytestmark = pytest.mark.slow  # the CLI as subprocesses


CONSOLE_SCRIPT = Path(sys.executable).with_name("loopwright")
ODD = "one\u2028two\u2029three\x85four"
"""A text with the line separators that ``str.splitlines()`` splits at, but JSON keeps raw."""

APP = f'''
from loopwright import Agent, ToolCall, tool
from loopwright.data.events import ModelRequest, ModelResponse
from loopwright.models.scripted import ScriptedModel, to_response


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (each refund is a line of refunds.log)."""
    with open("refunds.log", "a") as log:
        log.write(order + "\\n")
    return f"refunded {{order}}"


def reply(request: ModelRequest) -> ModelResponse:
    results = [p for p in request.messages[-1].parts if p.type == "tool_result"]
    if not results:
        return to_response([ToolCall(name="refund", args={{"order": "A1"}})])
    return to_response(f"done: {{results[0].content}}")


def make() -> Agent:
    return Agent(name="desk", tools=[refund], model=ScriptedModel(reply))


odd = Agent(name="odd", model=ScriptedModel([{ODD!r}]))
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env.update(extra)
    return env


def cli(
    cwd: Path, *args: str, script: bool = False, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``loopwright ARGS`` in ``cwd`` (``python -m loopwright``, or the venv's console script),
    no terminal, output captured."""
    argv = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "loopwright"]
    return subprocess.run(
        [*argv, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or environment(),
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exit 2 and said why in one line on standard error (no traceback)."""
    said = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert len(said.splitlines()) == 1, said
    return said


# ------------------------------------------------------------ --version, python -m loopwright


def test_version_prints_the_installed_version(project: Path) -> None:
    done = cli(project, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loopwright {version('loopwright')}"


# ------------------------------------------------------------ 1. a waiting run is resumed once


def test_a_saved_wait_is_resumed_once_so_an_approved_call_runs_once(project: Path) -> None:
    first = cli(project, "run", "app:make", "refund A1")
    assert first.returncode == 3, first.stdout + first.stderr
    (saved,) = (project / ".loopwright" / "runs").glob("*.json")
    run_id = saved.stem
    again = cli(project, "run", "app:make", "--resume", run_id, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "answer: done: refunded A1" in again.stdout
    twice = cli(project, "run", "app:make", "--resume", run_id, "--yes")
    said = one_line(twice)
    assert f"run {run_id} was already resumed" in said and "resumed once" in said
    assert (project / "refunds.log").read_text() == "A1\n"  # the refund ran once
    by_path = cli(project, "run", "app:make", "--resume", str(saved), "--yes")  # its file's path: the same claim
    assert "already resumed" in one_line(by_path)
    assert (project / "refunds.log").read_text() == "A1\n"


# ------------------------------------------------------------ 2. read-only commands open read-only


def _unrelated_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (name TEXT)")
    db.execute("INSERT INTO customers VALUES ('Ada')")
    db.commit()
    db.close()


def _tables_and_mode(path: Path) -> tuple[list[str], str]:
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return tables, db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize(
    "verb",
    [["runs", "list"], ["runs", "show", "r1"], ["runs", "diagram", "r1"], ["trace", "r1", "-o", "t.html"]],
    ids=["runs-list", "runs-show", "runs-diagram", "trace"],
)
def test_read_only_commands_leave_an_unrelated_database_alone(project: Path, verb: list[str]) -> None:
    other = project / "other.db"
    _unrelated_database(other)
    said = one_line(cli(project, *verb, "--store", "sqlite:///other.db"))
    assert "other.db" in said and "not a loopwright run store" in said
    assert _tables_and_mode(other) == (["customers"], "delete")  # no lw_* table, not switched to WAL


def test_read_only_commands_leave_an_unrelated_postgres_database_alone(project: Path, pg_url: str) -> None:
    import psycopg

    said = one_line(cli(project, "runs", "list", "--store", pg_url))
    assert "is not a loopwright run store" in said
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'lw_%'").fetchone() == (0,)
    made = cli(project, "run", "app:make", "refund A1", "--store", pg_url, "--json")  # a store made there: it is read
    assert made.returncode == 3, made.stderr
    listed = cli(project, "runs", "list", "--store", pg_url)
    assert listed.returncode == 0 and "desk" in listed.stdout, listed.stderr


def test_a_mistyped_store_path_makes_no_file(project: Path) -> None:
    said = one_line(cli(project, "runs", "list", "--store", "sqlite:///typo.db"))
    assert "no run store at 'typo.db'" in said
    assert not (project / "typo.db").exists()


def test_read_only_commands_read_a_real_store(project: Path) -> None:
    made = cli(project, "run", "app:make", "refund A1", "--store", "sqlite:///runs.db", "--json")
    assert made.returncode == 3, made.stderr
    run_id = EVENT_ADAPTER.validate_json(made.stdout.splitlines()[0]).run_id
    listed = cli(project, "runs", "list", "--store", "sqlite:///runs.db")
    assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
    shown = cli(project, "runs", "show", run_id, "--store", "sqlite:///runs.db")
    assert shown.returncode == 0 and "waits:" in shown.stdout, shown.stderr


# ------------------------------------------------------------ 3. one line, exit 2


BAD_MODULES = {
    "syntax.py": "def broken(:\n",
    "boom.py": "raise RuntimeError('the config server is down')\n",
    "factory.py": "def make():\n    raise RuntimeError('no API key in the vault')\n",
}


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize(
    ("target", "cause"),
    [
        ("syntax:agent", "syntax.py, line 1"),
        ("boom:agent", "RuntimeError: the config server is down"),
        ("factory:make", "RuntimeError: no API key in the vault"),
        ("../../etc/passwd:x", "'../../etc/passwd' is not a module name"),
    ],
    ids=["syntax-error", "raises-at-import", "factory-raises", "a-path"],
)
def test_a_target_that_fails_is_one_line(project: Path, command: str, target: str, cause: str) -> None:
    for name, body in BAD_MODULES.items():
        (project / name).write_text(body)
    args = [command, target, "hi"] if command == "run" else [command, target]
    said = one_line(cli(project, *args))
    assert cause in said and target.partition(":")[0] in said


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list", "--store", "sqlite:///junk.db"],
        ["run", "app:make", "hi", "--store", "sqlite:///junk.db"],
        ["trace", "r1", "--store", "sqlite:///junk.db"],
    ],
    ids=["runs-list", "run", "trace"],
)
def test_a_file_that_is_not_sqlite_is_one_line(project: Path, args: list[str]) -> None:
    (project / "junk.db").write_bytes(b"these are my notes, not a database" * 40)
    said = one_line(cli(project, *args))
    assert "junk.db" in said and "not a SQLite database" in said
    assert (project / "junk.db").read_bytes() == b"these are my notes, not a database" * 40


def test_a_store_in_a_missing_folder_is_one_line(project: Path) -> None:
    said = one_line(cli(project, "run", "app:make", "hi", "--store", "sqlite:///nofolder/runs.db"))
    assert "nofolder" in said and "does not exist" in said
    said = one_line(cli(project, "runs", "list", "--store", "sqlite:///nofolder/runs.db"))
    assert "no run store at 'nofolder/runs.db'" in said


@pytest.mark.parametrize("command", [["runs", "list"], ["run", "app:make", "hi"]], ids=["runs-list", "run"])
def test_a_mistyped_postgres_database_fails_at_once(project: Path, pg_url: str, command: list[str]) -> None:
    base, _, _ = pg_url.rpartition("/")
    started = time.monotonic()
    said = one_line(cli(project, *command, "--store", f"{base}/no_such_db"))
    assert time.monotonic() - started < 8  # not the pool's 10 s timeout
    assert 'database "no_such_db" does not exist' in said


# ------------------------------------------------------------ 4. demo --input


def test_demo_says_when_its_scripted_model_does_not_read_the_input(project: Path) -> None:
    done = cli(project, "demo", "--json", "--input", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert "--input" in done.stderr and "--model" in done.stderr and "scripted" in done.stderr
    plain = cli(project, "demo", "--json")
    assert plain.returncode == 0 and plain.stderr == ""


# ------------------------------------------------------------ 5. worker --app, Graphviz, skips


def test_worker_imports_its_app_from_the_current_folder(project: Path) -> None:
    (project / "workerapp.py").write_text("open('imported.txt', 'w').write('yes')\n")
    done = cli(project, "worker", "--db", "postgresql://nobody@127.0.0.1:1/none", "--app", "workerapp", script=True)
    assert (project / "imported.txt").exists(), done.stderr
    assert "registered no agent" in one_line(done)
    (project / "brokenapp.py").write_text("raise RuntimeError('no queue config')\n")
    said = one_line(cli(project, "worker", "--db", "postgresql://x@127.0.0.1:1/x", "--app", "brokenapp", script=True))
    assert "brokenapp" in said and "RuntimeError: no queue config" in said


def test_the_trace_command_draws_the_page_without_graphviz(project: Path, tmp_path: Path) -> None:
    """Without Graphviz's `dot` the page still has the machine drawn (pure-Python SVG), lit by the run."""
    events = cli(project, "run", "app:odd", "hi", "--json")
    (project / "events.jsonl").write_text(events.stdout)
    bin_dir = tmp_path / "bin"  # a PATH with Python and loopwright, but no Graphviz `dot`
    bin_dir.mkdir()
    for name in ("python", "loopwright"):
        (bin_dir / name).symlink_to(Path(sys.executable).with_name(name))
    done = cli(project, "trace", "events.jsonl", "-o", "page.html", script=True, env=environment(PATH=str(bin_dir)))
    assert done.returncode == 0, done.stderr
    assert "no drawing" not in done.stderr
    page = (project / "page.html").read_text()
    assert "<svg" in page and "The drawing needs Graphviz" not in page


def test_skipped_tests_print_their_reason(tmp_path: Path) -> None:
    test = tmp_path / "test_skips.py"
    test.write_text("import pytest\n\ndef test_x():\n    pytest.skip('no GPU on this machine')\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), str(test)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert "no GPU on this machine" in done.stdout, done.stdout


# ------------------------------------------------------------ 6. what run --json writes, trace reads


def test_trace_reads_events_whose_texts_hold_line_separators(project: Path) -> None:
    done = cli(project, "run", "app:odd", "hi", "--json")
    assert done.returncode == 0, done.stderr
    (project / "events.jsonl").write_text(done.stdout, encoding="utf-8")
    page = cli(project, "trace", "events.jsonl", "-o", "page.html")
    assert page.returncode == 0, page.stderr
    assert ODD in (project / "page.html").read_text(encoding="utf-8")  # the answer, on the page
    drawn = cli(project, "diagram", "--trace", "events.jsonl")
    assert drawn.returncode == 0, drawn.stderr


def test_run_json_fails_when_its_events_cannot_be_written(project: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "loopwright", "run", "app:odd", "hi", "--json"],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=environment(),
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "writing the events failed" in done.stderr and "No space left on device" in done.stderr
