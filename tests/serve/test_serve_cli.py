"""`loopwright serve` as a user runs it: a subprocess serving an agent from module:attr, the API and
the dev UI on the port it was given, runs kept in the store it was given; bad input exits 2 with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests import ROOT
from tests.helpers import serve_process, serving_cli
from tests.serve_agents import free_port

pytestmark = pytest.mark.slow


def test_serve_runs_the_api_and_the_ui_and_keeps_runs_in_the_store(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "runs.db"
    base = f"http://127.0.0.1:{port}"
    with serving_cli("tests.serve_agents:support", "--store", f"sqlite:///{db}", port=port) as server:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert f"support on http://127.0.0.1:{port}/" in line
        agents = httpx.get(f"{base}/agents")
        assert agents.json()["agents"] == ["support"]
        page = httpx.get(f"{base}/")
        assert page.status_code == 200 and "<title>loopwright serve</title>" in page.text
        assert "loopwright" in httpx.get(f"{base}/ui/app.js").text
        run_id = httpx.post(f"{base}/runs", json={"input": "hello"}).json()["run_id"]
        with httpx.stream("GET", f"{base}/runs/{run_id}/events") as response:
            data = [json.loads(x[6:]) for x in response.iter_lines() if x.startswith("data: ")]
        assert data[-2]["type"] == "run_finished" and data[-2]["output"] == "you said: hello"
        trace = httpx.get(f"{base}/runs/{run_id}/trace")
        assert trace.status_code == 200 and "<html" in trace.text and run_id[:12] in trace.text
    assert db.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["tests.serve_agents:nobody"], "loopwright serve: "),
        (["tests.serve_agents:ONE"], "name an Agent"),
    ],
)
def test_serve_explains_a_bad_target_in_one_line(args: list[str], words: str) -> None:
    done = serve_process(*args, "--port", str(free_port()))
    _, err = done.communicate(timeout=60)
    assert done.returncode == 2
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_without_the_extra_the_app_and_the_command_say_what_to_install() -> None:
    """Starlette and uvicorn made unimportable: one line naming pip install 'loopwright[serve]'."""
    hide = "import sys; sys.modules['starlette'] = sys.modules['uvicorn'] = None; "
    app = hide + "import loopwright.serve as s; from tests.serve_agents import support; s.app([support], store='x.db')"
    done = subprocess.run([sys.executable, "-c", app], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: loopwright.serve needs Starlette and uvicorn: pip install 'loopwright[serve]'"
    )
    cli = hide + "from loopwright.cli import main; sys.exit(main(['serve', 'tests.serve_agents:support']))"
    done = subprocess.run([sys.executable, "-c", cli], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == "loopwright serve: Starlette and uvicorn are missing: pip install 'loopwright[serve]'\n"
