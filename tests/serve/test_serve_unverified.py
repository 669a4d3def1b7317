"""The serve door runs only bounded machines: ``serve.app(...)`` and ``loopwright serve`` refuse an
agent whose machine ``verify`` rejects, with the Runner's message naming the violation and the
opt-in; opted in (``unverified=True``, ``--unverified``), its run over HTTP still ends by its
``timeout_s``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright import Agent, Limits, RunState, ScriptedModel
from loopwright.data.errors import MachineError
from loopwright.extend import Rule, extend
from loopwright.serve import app
from tests.helpers import serve_process, serving_cli
from tests.serve_agents import free_port, serving


async def _spin(rs: RunState, ctx: Any) -> None:
    """A stage that does nothing: no model call."""


def _keep_spinning(rs: RunState) -> bool:
    return True


SPINNING = extend(
    name="served_spinning",
    states={"spin": _spin},
    rows_before={("preprocess", "reason"): [Rule("preprocess", "spin", "keep_spinning")]},
    rows=[Rule("spin", "preprocess")],
    guards={"keep_spinning": _keep_spinning},
    check=False,
)
"""``preprocess -> spin -> preprocess``: a handler-only cycle verify reports as unbounded."""

spinner = Agent(name="spinner", model=ScriptedModel(["never asked"]), machine=SPINNING, limits=Limits(timeout_s=1))


def test_app_refuses_an_unverified_machine_naming_the_violation_and_the_opt_in(tmp_path: Path) -> None:
    with pytest.raises(MachineError) as caught:
        app(spinner, store=f"sqlite:///{tmp_path / 'runs.db'}")
    message = str(caught.value)
    assert "spinner" in message and "spin" in message and "FAIL 3." in message
    assert "unverified=True" in message and "--unverified" in message


def test_opted_in_the_unverified_run_ends_by_its_timeout_over_http(tmp_path: Path) -> None:
    served = app(spinner, store=f"sqlite:///{tmp_path / 'runs.db'}", unverified=True)
    with serving(served) as base:
        started = httpx.post(f"{base}/runs", json={"input": "go"})
        assert started.status_code == 202, started.text
        with httpx.stream("GET", f"{base}{started.json()['events']}", timeout=30) as response:
            data = [json.loads(x[6:]) for x in response.iter_lines() if x.startswith("data: ")]
        finished = [d for d in data if d.get("type") == "run_finished"]
        assert finished and finished[0]["outcome"] == "limit", data[-3:]
        run = httpx.get(f"{base}/runs/{started.json()['run_id']}").json()
        assert run["outcome"] == "limit"


SPINNER = "tests.serve.test_serve_unverified:spinner"


@pytest.mark.slow
def test_the_cli_refuses_an_unverified_machine_and_serves_it_with_the_opt_in(tmp_path: Path) -> None:
    refused = serve_process(SPINNER, "--store", f"sqlite:///{tmp_path / 'a.db'}", "--port", str(free_port()))
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2, (out, err)
    assert "verify rejects" in err and "--unverified" in err and "Traceback" not in err

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serving_cli(SPINNER, "--store", f"sqlite:///{tmp_path / 'b.db'}", "--unverified", port=port):
        run_id = httpx.post(f"{base}/runs", json={"input": "go"}).json()["run_id"]
        with httpx.stream("GET", f"{base}/runs/{run_id}/events", timeout=30) as response:
            data = [json.loads(x[6:]) for x in response.iter_lines() if x.startswith("data: ")]
        assert [d["outcome"] for d in data if d.get("type") == "run_finished"] == ["limit"]
