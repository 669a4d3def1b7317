"""The dev UI in Chromium (Debian's, driven by playwright): send a message, watch the diagram light
up, approve the call, see the answer, open the run's trace page; screenshots are saved under
test-artifacts/serve/; the docs' picture of the UI (docs/images/serve-ui.png) is made here when
LOOPWRIGHT_UPDATE_PICTURES is set (a plain test run leaves the checkout as it found it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwright.cli.serve_command import dev_app
from tests import ROOT
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)
from tests.serve_agents import serving, slow_agent, support

pytestmark = pytest.mark.browser


ARTIFACTS = ROOT / "test-artifacts" / "serve"
DOCS_PICTURE = ROOT / "docs" / "images" / "serve-ui.png"


@pytest.fixture(scope="module")
def page(browser: Any) -> Iterator[Any]:
    yield browser.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)  # (its waits evaluate JS)


def test_in_chromium_chat_lights_the_diagram_an_approval_runs_the_call_and_the_answer_shows(
    page: Any, tmp_path: Path
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    asgi = dev_app([support, slow_agent()], store=f"sqlite:///{tmp_path / 'runs.db'}")
    with serving(asgi) as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready='yes']")
        page.wait_for_selector("#diagram svg g.edge")
        assert page.locator("#agents button").all_inner_texts() == ["support", "slow"]
        assert page.locator("#diagram g.edge.lw-taken").count() == 0

        page.fill("#chat-input", "please refund A7")
        page.click("#send")
        approve = page.wait_for_selector(".approval button.approve")
        box = page.locator(".approval .args")  # editable (a textarea) where approve(args=...) exists
        shown = box.input_value() if box.evaluate("e => e.tagName") == "TEXTAREA" else box.inner_text()
        assert '"order": "A7"' in shown
        lit = page.locator("#diagram g.edge.lw-taken").count()
        assert lit >= 4  # start->preprocess->reason->postprocess->act->decide->suspended, drawn as they came
        assert page.locator("#diagram g.node.lw-visited[data-state='suspended']").count() == 1
        assert "suspended" in page.locator("#timeline").inner_text()
        page.screenshot(path=str(ARTIFACTS / "1-waiting-for-approval.png"), full_page=True)

        approve.click()
        page.wait_for_selector("body[data-finished='final']")
        answers = page.locator(".msg.assistant").all_inner_texts()
        assert answers[-1] == "done: refunded A7"
        assert page.locator("#diagram g.node.lw-visited[data-state='done']").count() == 1
        assert page.locator("#diagram g.edge.lw-taken").count() > lit
        assert page.locator(".approval").count() == 0
        page.wait_for_selector("#runs tbody tr")
        page.screenshot(path=str(ARTIFACTS / "2-answered.png"), full_page=True)
        page.screenshot(path=str(ARTIFACTS / "docs-serve-ui.png"))
        if os.environ.get("LOOPWRIGHT_UPDATE_PICTURES"):  # the docs' picture, only when asked
            page.screenshot(path=str(DOCS_PICTURE))

        row = page.locator("#runs tbody tr").first
        assert row.locator("td").nth(2).inner_text() == "final"
        page.select_option("#runs-outcome", "failed")
        page.click("#runs-form button")
        page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 0")
        run_link = row.locator("a") if row.count() else None
        del run_link

        trace_href = page.get_attribute("#trace-link", "href")
        page.goto(base + "/" + trace_href)
        page.wait_for_selector("body[data-ready='yes']")
        assert page.locator("#lw-diagram g.edge.lw-taken").count() >= 5
        page.screenshot(path=str(ARTIFACTS / "3-trace-page.png"))
    assert errors == []
