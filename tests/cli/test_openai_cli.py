"""`loopwright demo/run --model openai:... --base-url ...` as a user runs them: the CLI as a
subprocess against the fake OpenAI server over HTTP, and against a server that is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright.testing.adapter_kit import dead_port
from tests.fake_openai import FakeOpenAI, function_call, response, text

pytestmark = pytest.mark.slow


def cli(*args: str, key: str | None = "test-key", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd or ""), env.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "loopwright.cli", *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
    )


def test_demo_runs_on_an_openai_compatible_server(openai_fake: FakeOpenAI) -> None:
    openai_fake.script += [
        response(function_call("c1", "get_weather", {"city": "Paris"})),
        response(text("Paris is sunny; the trip costs 420 EUR.")),
    ]
    done = cli(
        "demo", "--model", "openai:llama3.2", "--base-url", openai_fake.base_url, "--json", "--input", "Trip to Paris?"
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "run_finished" and events[-1]["outcome"] == "final"
    assert openai_fake.paths == ["/v1/chat/completions"] * 2  # --base-url: Chat Completions
    assert openai_fake.requests[0]["model"] == "llama3.2"
    assert [m["role"] for m in openai_fake.requests[1]["messages"]][-2:] == ["assistant", "tool"]


def test_run_takes_the_model_from_the_command_line(openai_fake: FakeOpenAI, tmp_path: Path) -> None:
    (tmp_path / "myagent.py").write_text(
        "from loopwright import Agent, ScriptedModel\nagent = Agent(name='a', model=ScriptedModel(['scripted']))\n"
    )
    openai_fake.script.append(response(text("from the server")))
    url = openai_fake.base_url
    done = cli("run", "myagent:agent", "hello", "--json", "--model", "openai:gpt-5.5", "--base-url", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"from the server"' in done.stdout
    assert openai_fake.requests[0]["messages"][-1] == {"role": "user", "content": "hello"}


def test_a_server_that_is_down_fails_the_run_with_its_address_and_no_traceback() -> None:
    port = dead_port()
    done = cli("demo", "--model", "openai:llama3.2", "--base-url", f"http://127.0.0.1:{port}/v1", "--json")
    assert done.returncode == 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["outcome"] == "failed"
    assert f"could not reach http://127.0.0.1:{port}" in json.dumps(finished)
    assert any(e["type"] == "error_occurred" and e["error"]["retryable"] for e in events)  # retried first
    assert "Traceback" not in done.stderr + done.stdout


def test_a_missing_key_is_one_line_naming_the_variable() -> None:
    done = cli("demo", "--model", "openai:gpt-5.5", key=None)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "set OPENAI_API_KEY" in done.stderr


def test_an_unknown_provider_is_one_line_naming_the_valid_ones() -> None:
    done = cli("demo", "--model", "mistral:large")
    assert done.returncode == 2
    assert "unknown provider 'mistral'" in done.stderr and "openai:MODEL" in done.stderr
    assert "Traceback" not in done.stderr
