"""The trace page: one self-contained HTML file with the diagram, the run's path drawn on it, a
timeline and every event; checked in a real headless Chromium (the system's, driven by playwright)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, ModelError, Runner, RunResult, ToolCall, tool
from loopwright.cli.trace_page import trace_page, write_trace_page
from loopwright.data.errors import ConfigurationError
from loopwright.machines.diagram import dot_available, trace_counts
from loopwright.models.scripted import ScriptedModel
from tests.chromium import CHROMIUM
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)

needs_dot = pytest.mark.skipif(not dot_available(), reason="the drawing needs Graphviz (apt-get install graphviz)")


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def helpdesk_run() -> RunResult:
    """A dispatcher that retries a failed model call, hands over to billing (which calls a tool
    and hands back), then answers."""

    def hand(to: str) -> list[ToolCall]:
        return [ToolCall(name="transfer_to_agent", args={"agent_name": to, "task": "see to it"})]

    billing = Agent(
        name="billing",
        tools=[refund],
        model=ScriptedModel([[ToolCall(id="c-refund", name="refund", args={"order": "A1"})], hand("dispatcher")]),
    )
    dispatcher = Agent(
        name="dispatcher",
        sub_agents=[billing],
        model=ScriptedModel([ModelError("overloaded", status=529, retryable=True), hand("billing"), "Refunded A1."]),
    )
    result = Runner(dispatcher).run_sync("refund order A1 <script>alert(1)</script>")
    assert result.outcome == "final"
    return result


@pytest.fixture(scope="module")
def run() -> RunResult:
    return helpdesk_run()


def taken_edges(result: RunResult) -> set[str]:
    return {f"{r.source}->{r.dest}" for r in trace_counts(result.machine, result)}


def test_the_page_is_self_contained_and_holds_every_event(run: RunResult) -> None:
    page = trace_page(run)
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched when the page is viewed: no external script, style, image or font
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#|data:)""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # and the page's policy forbids any fetch
    blob = re.search(r'<script type="application/json" id="lw-events">(.*?)</script>', page, re.S)
    assert blob is not None
    events = json.loads(blob.group(1))
    assert [e["seq"] for e in events] == [e.seq for e in run.events]
    assert "<script>alert(1)</script>" not in page  # the user's input is escaped everywhere
    assert html.escape("<script>alert(1)</script>") in page
    assert page.count('class="lw-step lw-t-') == len(run.events)  # every event is a row


@needs_dot
def test_the_path_is_drawn_on_the_diagram(run: RunResult) -> None:
    page = trace_page(run)
    marked = set(re.findall(r'class="edge lw-taken" data-edge="([^"]+)"', page))
    assert {html.unescape(m) for m in marked} == taken_edges(run)
    assert {"reason->reason", "decide->transfer", "transfer->preprocess"} <= taken_edges(run)
    assert 'class="node lw-visited" data-state="transfer"' in page
    assert 'data-state="salvage"' in page and 'class="node lw-visited" data-state="salvage"' not in page


@pytest.mark.slow
def test_bad_input_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no events"):
        trace_page([])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "nope"}\n')
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "trace", str(bad), "-o", str(tmp_path / "x.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "line 1 of trace" in done.stderr and "one JSON event per line" in done.stderr


@pytest.mark.slow
def test_loopwright_trace_writes_the_page_from_events_jsonl(run: RunResult, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("".join(e.model_dump_json() + "\n" for e in run.events))
    out = tmp_path / "pages" / "trace.html"
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "trace", str(events), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}"
    page = out.read_text()
    assert run.run_id in page and "dispatcher → billing" in page


# ------------------------------------------------------------ in a real browser


def test_in_chromium_the_page_renders_the_path_is_drawn_and_a_click_shows_the_event(
    run: RunResult, browser: Any, tmp_path: Path
) -> None:
    path = write_trace_page(run, tmp_path / "trace.html")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=yes]")
    assert errors == [] and fetched == [path.as_uri()]  # only the page itself

    # it renders: the diagram is drawn at a real size, the timeline and the table are there
    box = page.locator("#lw-diagram svg").bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 200
    assert page.locator("tr.lw-step").count() == len(run.events)
    assert page.locator(".lw-bar.lw-tool").count() == sum(1 for e in run.events if e.type == "tool_called")

    # the path is drawn: every edge the run took is red, the others are not
    taken = page.locator("g.edge.lw-taken")
    assert {taken.nth(i).get_attribute("data-edge") for i in range(taken.count())} == taken_edges(run)
    red = "rgb(214, 39, 40)"
    for i in range(taken.count()):
        assert taken.nth(i).locator("path").first.evaluate("p => getComputedStyle(p).stroke") == red
    other = page.locator("g.edge:not(.lw-taken)").first
    assert other.locator("path").first.evaluate("p => getComputedStyle(p).stroke") != red

    # clicking a step shows its event, and marks its edge on the diagram
    retry = next(e for e in run.events if e.type == "state_entered" and e.source == e.state == "reason")
    page.click(f'tr.lw-step[data-seq="{retry.seq}"]')
    shown = json.loads(page.locator("#lw-detail").text_content() or "")
    assert shown == retry.model_dump(mode="json")
    current = page.locator("#lw-diagram .lw-current")
    assert current.count() == 1 and current.get_attribute("data-edge") == "reason->reason"

    call = next(e for e in run.events if e.type == "tool_called" and e.name == "refund")
    page.click(f'.lw-bar.lw-tool[data-seq="{call.seq}"]')
    shown = json.loads(page.locator("#lw-detail").text_content() or "")
    assert shown["type"] == "tool_called" and shown["call_id"] == "c-refund" and shown["args"] == {"order": "A1"}
    assert page.locator("#lw-diagram .lw-current").get_attribute("data-state") == "act"

    # clicking an edge of the diagram shows the first step that took it
    page.locator('g.edge[data-edge="decide->transfer"]').dispatch_event("click")
    shown = json.loads(page.locator("#lw-detail").text_content() or "")
    assert (shown["type"], shown["source"], shown["state"]) == ("state_entered", "decide", "transfer")
    assert page.locator("tr.lw-selected").count() == 1
    if os.environ.get("LOOPWRIGHT_SCREENSHOT"):
        page.screenshot(path=os.environ["LOOPWRIGHT_SCREENSHOT"], full_page=True)
    page.close()


def test_chromium_is_where_ci_installs_it() -> None:
    """CI installs Debian's chromium; this names the binary the browser test drives."""
    if os.environ.get("CI"):
        assert os.access(CHROMIUM, os.X_OK), "CI must install chromium (apt-get install chromium)"
        assert shutil.which("dot"), "CI must install graphviz"
