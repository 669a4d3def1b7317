"""``loopwright runs list|show|resume|diagram --store URL``: the runs a store holds, resumed and
drawn from the command line; bad stores, runs and agents exit 2 with a message."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from loopwright import Runner
from loopwright.cli import main
from loopwright.stores import SQLiteStore
from tests.store_app import EXECUTED, make_agent
from tests.stores.test_store_sqlite import PAY_SCRIPT


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    EXECUTED.clear()
    db = tmp_path / "runs.db"
    asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))
    (tmp_path / "cli_app.py").write_text(
        textwrap.dedent(
            """
            from tests.store_app import make_agent
            from tests.stores.test_store_sqlite import PAY_SCRIPT
            agent = make_agent(PAY_SCRIPT)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"sqlite:///{db}"
    sys.modules.pop("cli_app", None)


def test_runs_list_and_show(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "list", "--store", store_url]) == 0
    listing = capsys.readouterr().out
    assert "r1" in listing and "suspended" in listing and "durable" in listing
    assert main(["runs", "show", "r1", "--store", store_url]) == 0
    shown = capsys.readouterr().out
    assert "trace: start -> preprocess -> reason -> postprocess -> act -> decide -> suspended" in shown
    assert 'waits: c-pay pay({"amount": 500, "seconds": 0.2}) for a confirmation' in shown
    assert main(["runs", "show", "r1", "--json", "--store", store_url]) == 0
    assert '"stage":"suspended"' in capsys.readouterr().out


def test_runs_resume_approves_once(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["runs", "resume", "r1", "--store", store_url, "--agent", "cli_app:agent", "--approve", "c-pay"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["run r1: final", "paid and noted"]
    assert main(args) == 1
    assert "run 'r1' has ended" in capsys.readouterr().err
    assert [label for label, _ in EXECUTED].count("pay 500") == 1


def test_runs_diagram_draws_the_path(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "diagram", "r1", "--store", store_url]) == 0
    drawn = capsys.readouterr().out
    assert "stateDiagram-v2" in drawn
    assert "decide --> suspended: ⟲ has_pending_requests & within_suspension_budget" in drawn
    assert "[bounded: max_suspensions] ✔ 1×" in drawn


def test_runs_bad_arguments_exit_2(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "show", "nope", "--store", store_url]) == 2
    assert "no run 'nope' in sqlite:///" in capsys.readouterr().err
    assert main(["runs", "list", "--store", "redis://x"]) == 2
    assert "unknown store URL 'redis://x'" in capsys.readouterr().err
    assert main(["runs", "resume", "r1", "--store", store_url]) == 2
    assert "name the run's agent: --agent" in capsys.readouterr().err
    assert main(["runs", "resume", "r1", "--store", store_url, "--agent", "nowhere:agent"]) == 2
    assert "cannot import module 'nowhere'" in capsys.readouterr().err
