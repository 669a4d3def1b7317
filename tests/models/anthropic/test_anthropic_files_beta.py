"""A request that carries a Files API source (``file_id``) gets the ``files-api-2025-04-14`` beta
by itself, over HTTP; others do not."""

from __future__ import annotations

from typing import Any

from loopwright import tool
from loopwright.data.events import DocumentPart, ImagePart
from tests.fake_claude import FakeClaude, message, text, tool_use
from tests.models.anthropic.test_anthropic_model import agent, run

FILES = "files-api-2025-04-14"


def betas(fake: FakeClaude, n: int = 0) -> list[str]:
    return [b for b in fake.headers[n].get("anthropic-beta", "").split(",") if b]


def test_a_file_source_brings_the_files_beta(fake: FakeClaude) -> None:
    fake.script.append(message(text("read")))
    result = run(agent(fake), ["Read:", DocumentPart(file_id="file_doc"), ImagePart(file_id="file_img")])  # type: ignore[arg-type]
    assert result.outcome == "final", result.error
    assert betas(fake) == [FILES]


def test_the_users_betas_stay_and_the_files_beta_is_not_doubled(fake: FakeClaude) -> None:
    fake.script += [message(text("one")), message(text("two"))]
    result = run(agent(fake, options={"betas": ["context-1m-2025-08-07"]}), ["Read:", DocumentPart(file_id="f")])  # type: ignore[arg-type]
    assert result.outcome == "final", result.error
    assert betas(fake) == ["context-1m-2025-08-07", FILES]
    result = run(agent(fake, options={"betas": [FILES]}), ["Read:", DocumentPart(file_id="f")])  # type: ignore[arg-type]
    assert result.outcome == "final", result.error
    assert betas(fake, 1) == [FILES]


def test_a_request_without_files_has_no_files_beta(fake: FakeClaude) -> None:
    fake.script += [message(text("one")), message(text("two"))]
    assert run(agent(fake), "hi").outcome == "final"
    assert "anthropic-beta" not in fake.headers[0]
    assert run(agent(fake, options={"betas": ["context-1m-2025-08-07"]}), "hi").outcome == "final"
    assert betas(fake, 1) == ["context-1m-2025-08-07"]


def test_a_file_a_tool_returns_brings_the_files_beta(fake: FakeClaude) -> None:
    @tool
    def fetch_report() -> dict[str, Any]:
        """The quarterly report."""
        return {"type": "document", "file_id": "file_q3"}

    fake.script += [message(tool_use("t1", "fetch_report", {}), stop_reason="tool_use"), message(text("done"))]
    a = agent(fake, instruction="")
    result = run(a.replace(tools=[fetch_report]), "report?")
    assert result.outcome == "final", result.error
    assert FILES not in betas(fake, 0) and betas(fake, 1) == [FILES]


def test_the_beta_endpoint_gets_the_files_beta_too(fake: FakeClaude) -> None:
    edits = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    fake.script.append(message(text("read")))
    options = {"context_management": edits, "betas": ["context-management-2025-06-27"]}
    result = run(agent(fake, instruction="", options=options), ["Read:", DocumentPart(file_id="f")])  # type: ignore[arg-type]
    assert result.outcome == "final", result.error
    assert betas(fake) == ["context-management-2025-06-27", FILES]
