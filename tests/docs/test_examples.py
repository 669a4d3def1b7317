"""Each app in examples/ runs as a user runs it (``python examples/NAME.py`` in a fresh interpreter,
no pytest in the child) and prints what its docstring promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT
from tests.fake_claude import FakeClaude, message, text, tool_use

EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """Run ``examples/{name}`` as a script; its exit code and its output (stdout and stderr)."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PYTEST_"))}
    child_env.update(env or {})
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env,
        cwd=cwd or ROOT,
    )
    return done.returncode, done.stdout + done.stderr


def test_every_example_is_run_here_and_listed_in_the_docs() -> None:
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py"))
    tested = sorted({name for name in TESTED})
    assert scripts == tested, "add a test for each example here (and its row in README.md and docs/examples.md)"
    for page in (ROOT / "README.md", ROOT / "docs" / "examples.md"):
        missing = [s for s in scripts if s not in page.read_text()]
        assert not missing, f"{page.relative_to(ROOT)} does not mention {missing}"
    for script in scripts:
        source = (EXAMPLES / script).read_text()
        assert 'if __name__ == "__main__":' in source and source.startswith('"""'), script


@pytest.mark.slow
def test_the_tool_agent_runs_offline_on_a_scripted_model() -> None:
    code, out = run_example("claude_tool_agent.py")
    assert code == 0, out
    assert "model: scripted" in out and "tools called: temperature, temperature, subtract" in out
    assert "outcome: final" in out and "12.5 °C warmer" in out


@pytest.mark.slow
def test_the_tool_agent_runs_on_claude_when_a_key_is_set() -> None:
    """The same script on AnthropicModel, the SDK talking HTTP to the fake Messages API (the key and
    the base URL come from the environment, as a user's would)."""
    with FakeClaude() as fake:
        fake.script = [
            message(
                tool_use("toolu_1", "temperature", {"city": "Lisbon"}),
                tool_use("toolu_2", "temperature", {"city": "Oslo"}),
                stop_reason="tool_use",
            ),
            message(tool_use("toolu_3", "subtract", {"a": 24.0, "b": 11.5}), stop_reason="tool_use"),
            message(text("Lisbon is 12.5 degrees warmer.")),
        ]
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.base_url, "LOOPWRIGHT_MODEL": "claude-test"}
        code, out = run_example("claude_tool_agent.py", "How much warmer is Lisbon?", env=env)
    assert code == 0, out
    assert "model: claude-test" in out and "answer: Lisbon is 12.5 degrees warmer." in out
    assert [t["name"] for t in fake.requests[0]["tools"]] == ["temperature", "subtract"]
    assert fake.requests[0]["messages"][0]["content"][0]["text"] == "How much warmer is Lisbon?"
    answered = [b for b in fake.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in answered] == ["toolu_1", "toolu_2"]


@pytest.mark.slow
def test_approval_resume_pays_once_in_one_process() -> None:
    code, out = run_example("approval_resume.py")
    assert code == 0, out
    assert "waiting: confirmation for pay" in out and "answer: Done: paid 500 on INV-7." in out
    assert "refused: run 'invoice-7' has ended" in out and "payments made: 1" in out


@pytest.mark.slow
def test_approval_resume_across_processes_pays_once(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    code, out = run_example("approval_resume.py", "start", db)
    assert code == 3 and "outcome: suspended" in out and "payments made: 0" in out, out
    code, out = run_example("approval_resume.py", "approve", db)
    assert code == 0 and "outcome: final" in out and "payments made: 1" in out, out
    code, out = run_example("approval_resume.py", "approve", db)  # a second approval: refused, nothing paid
    assert code == 2 and "refused:" in out and "payments made: 1" in out, out
    assert (tmp_path / "payments.log").read_text() == "invoice-7:c1 paid 500 on INV-7\n"


def test_multi_agent_hands_work_round_and_answers() -> None:
    code, out = run_example("multi_agent.py")
    assert code == 0, out
    hops = [line for line in out.splitlines() if line.startswith("transfer:")]
    assert hops == ["transfer: dispatcher -> billing", "transfer: billing -> sales", "transfer: sales -> dispatcher"]
    assert "billing: refund -> refunded 49.00 on A1" in out and "answered by: dispatcher" in out


@pytest.mark.slow
def test_structured_output_gives_a_validated_object() -> None:
    code, out = run_example("structured_output.py")
    assert code == 0, out
    assert "retries the model read: 1" in out
    assert 'ticket: {"category":"shipping","urgent":true,' in out


@pytest.mark.slow
def test_the_property_test_holds_as_a_script() -> None:
    code, out = run_example("property_test.py")
    assert code == 0, out
    assert "runs: 200" in out and "property held" in out


@pytest.mark.slow
def test_the_property_test_runs_under_pytest(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", str(EXAMPLES / "property_test.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


TESTED = [
    "claude_tool_agent.py",
    "approval_resume.py",
    "multi_agent.py",
    "structured_output.py",
    "property_test.py",
    "workflows_research.py",  # (run in tests/workflows/test_workflow_doors.py)
    "workflows_fanout.py",
    "workflows_loop.py",
]
