"""A long text (a model's 10 MB answer) is kept once on the trace page and shown capped, with a
"show all" control that brings the whole text back; checked for size and in a real Chromium."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, RunResult
from loopwright.cli.trace_page import SUMMARY_CAP, TEXT_CAP, trace_page, write_trace_page
from loopwright.models.scripted import ScriptedModel
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)


def long_run(size: int) -> tuple[RunResult, str]:
    """A run whose model answers with a text of ``size`` characters (and a line separator inside)."""
    text = ("All the lines of the contract, one by one. \u2028" * (size // 45 + 1))[:size]
    result = Runner(Agent(name="writer", model=ScriptedModel([text]))).run_sync("write it all out")
    assert result.outcome == "final" and result.output == text
    return result, text


def blob(page: str, name: str) -> Any:
    found = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', page, re.S)
    assert found is not None, name
    return json.loads(found.group(1))


def test_a_10_mb_answer_is_kept_once_on_the_page() -> None:
    result, text = long_run(10_000_000)
    page = trace_page(result)
    assert len(page.encode()) < 1.1 * len(text.encode())  # once, not once per event that holds it (30 MB)
    assert blob(page, "lw-texts").count(text) == 1  # the whole text is on the page, to be shown
    events = blob(page, "lw-events")
    assert [e["seq"] for e in events] == [e.seq for e in result.events]
    assert text[: TEXT_CAP + 1] not in page.replace("\\u2028", "\u2028").split('id="lw-texts"')[0]  # capped elsewhere


@pytest.fixture(scope="module")
def two_mb() -> tuple[RunResult, str]:
    return long_run(2_000_000)  # (made before the browser: playwright's sync API runs an event loop)


def test_in_chromium_a_long_text_is_capped_and_show_all_brings_it_back(
    two_mb: tuple[RunResult, str], browser: Any, tmp_path: Path
) -> None:
    result, text = two_mb
    path = write_trace_page(result, tmp_path / "trace.html")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    started = time.monotonic()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=yes]")
    assert time.monotonic() - started < 10 and errors == []

    # the answer in the summary: capped, and its control shows it all
    answer = page.locator('.lw-cell[data-key="answer"]')
    shown = answer.locator("b").text_content() or ""
    assert len(shown) <= SUMMARY_CAP + 1 and text.startswith(shown.rstrip("…"))
    answer.locator("button.lw-more").click()
    assert answer.locator("b").text_content() == text

    # the model's reply in the detail pane: capped, then all of it, as the event was
    responded = next(e for e in result.events if e.type == "model_responded")
    page.click(f'tr.lw-step[data-seq="{responded.seq}"]')
    detail = page.locator("#lw-detail").text_content() or ""
    assert len(detail) < TEXT_CAP + 2000 and "more characters" in detail
    more = page.locator("#lw-more")
    assert more.is_visible() and "show all" in (more.text_content() or "")
    more.click()
    assert json.loads(page.locator("#lw-detail").text_content() or "") == responded.model_dump(mode="json")
    assert not more.is_visible()

    # a short event has no control
    first = result.events[0]
    page.click(f'tr.lw-step[data-seq="{first.seq}"]')
    assert json.loads(page.locator("#lw-detail").text_content() or "") == first.model_dump(mode="json")
    assert not more.is_visible()
    assert errors == []
    page.close()
