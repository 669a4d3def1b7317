"""A workflow run's trace page holds each child run's own loop (its machine, its path, its events)
inside the workflow state that ran it, nested workflows nested the same way; checked in Chromium."""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import JsonValue

from loopwright import Agent, Runner, RunResult, ScriptedModel, ToolCall, tool
from loopwright.cli.trace_page import recording, stored_children, trace_page, write_trace_page
from loopwright.data.events import Event
from loopwright.machines.diagram import dot_available
from loopwright.stores.sqlite import SQLiteStore
from loopwright.testing.workflow_strategies import TreeSpec, workflow_trees
from loopwright.workflows import LoopAgent, MapAgent, ParallelAgent, SequentialAgent, exit_loop
from tests import ROOT
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)

T = TypeVar("T")
needs_dot = pytest.mark.skipif(not dot_available(), reason="the drawing needs Graphviz (apt-get install graphviz)")


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


def release() -> SequentialAgent:
    """The workflow every test of this module runs: see :func:`release_steps`."""
    return SequentialAgent("release", steps=release_steps())


def release_steps() -> list[Agent]:
    """plan (a tool round) -> checks (a parallel whose `tests` branch fails, on_error="continue")
    -> polish (a loop whose body is a sequence: draft then review, which ends the loop in round 2)
    -> per_doc (a map over two documents)."""
    plan = Agent(
        name="plan",
        tools=[lookup],
        model=ScriptedModel([[ToolCall(id="c-look", name="lookup", args={"topic": "tides"})], "plan: tides"]),
    )
    checks = ParallelAgent(
        "checks",
        branches=[
            Agent(name="lint", model=ScriptedModel(["lint clean"])),
            Agent(name="tests", model=ScriptedModel([RuntimeError("the test database is down")])),
        ],
        on_error="continue",
    )
    review = Agent(
        name="review",
        tools=[exit_loop],
        model=ScriptedModel(["too long", [ToolCall(id="c-exit", name="exit_loop", args={})], "good"]),
    )
    draft = SequentialAgent("draft", steps=[Agent(name="writer", model=ScriptedModel(["draft 1", "draft 2"])), review])
    polish = LoopAgent("polish", body=[draft], max_iterations=3)
    per_doc = MapAgent("per_doc", Agent(name="summariser", model=ScriptedModel(["sum a", "sum b"])), over="docs")
    return [plan, checks, polish, per_doc]


CHILDREN = [
    "r1.plan",
    "r1.checks",
    "r1.checks.lint",
    "r1.checks.tests",
    "r1.polish",
    "r1.polish.draft.0",
    "r1.polish.draft.0.writer",
    "r1.polish.draft.0.review",
    "r1.polish.draft.1",
    "r1.polish.draft.1.writer",
    "r1.polish.draft.1.review",
    "r1.per_doc",
    "r1.per_doc.each.0",
    "r1.per_doc.each.1",
]
"""Every run under the workflow's run ``r1``, as the store names them."""


def off_loop(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)`` in a thread of its own: playwright's sync API keeps an event loop
    running in the test's thread while a browser test of this module has its fixture."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def run_release(db: Path) -> RunResult:
    async def go() -> RunResult:
        store = SQLiteStore(str(db))
        try:
            return await Runner(release(), store=store).run("ship it", run_id="r1", state={"docs": ["a", "b"]})
        finally:
            await store.close()

    result = off_loop(go())
    assert result.outcome == "final" and "[tests] failed" in str(result.state.get("checks"))
    return result


def read_children(db: Path, result: RunResult) -> dict[str, list[Event]]:
    async def go() -> dict[str, list[Event]]:
        store = SQLiteStore(str(db), read_only=True)
        try:
            return await stored_children(store, result.run_id, result.machine)
        finally:
            await store.close()

    return off_loop(go())


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult, dict[str, list[Event]]]:
    db = tmp_path_factory.mktemp("trace-workflows") / "runs.db"
    result = run_release(db)
    return db, result, read_children(db, result)


def blob(page: str, name: str) -> Any:
    found = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', page, re.S)
    assert found is not None, name
    return json.loads(found.group(1))


def panel(page: str, run_id: str) -> str:
    """The HTML of the panel of child run ``run_id`` (up to the next panel)."""
    start = page.index('<details class="lw-child')
    found = re.search(rf'<details class="lw-child[^"]*" id="lw-run-{re.escape(run_id)}"', page[start:])
    assert found is not None, f"no panel of {run_id}"
    rest = page[start + found.end() :]
    return rest[: rest.find("<details ")] if "<details " in rest else rest


@pytest.mark.slow
def test_loopwright_trace_of_a_stored_workflow_run_shows_each_childs_loop(tmp_path: Path) -> None:
    """The fault (issue 29): the page drew the workflow's machine and nothing of its children."""
    db = tmp_path / "runs.db"
    run_release(db)
    out = tmp_path / "trace.html"
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "trace", "r1", "--store", f"sqlite:///{db}", "--agent",
         "tests.cli.test_trace_page_workflows:release", "-o", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    runs = blob(page, "lw-children")
    assert sorted(runs) == sorted(CHILDREN)  # every child's events are on the page
    for run_id in CHILDREN:
        assert f'id="lw-run-{run_id}"' in page, run_id
    failed = panel(page, "r1.checks.tests")
    assert "the test database is down" in failed and "failed" in failed


def shipping() -> SequentialAgent:
    """The release workflow without its map (``loopwright run`` gives a run no state)."""
    return SequentialAgent("shipping", steps=release_steps()[:3])


@pytest.mark.slow
def test_loopwright_run_with_trace_draws_a_workflows_children_inside_it(tmp_path: Path) -> None:
    """The fault: ``loopwright run mod:workflow --trace page.html`` wrote the workflow's own events
    only, so the page said its children were in a store the run never had."""
    out = tmp_path / "trace.html"
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "run", "tests.cli.test_trace_page_workflows:shipping", "ship it",
         "--yes", "--trace", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "kept in a store" not in page
    runs = blob(page, "lw-children")
    root = next(iter(runs)).split(".")[0]
    assert sorted(runs) == sorted(root + c[2:] for c in CHILDREN if not c.startswith("r1.per_doc"))
    assert "the test database is down" in panel(page, f"{root}.checks.tests")


def test_every_child_run_is_read_from_the_store_with_its_events(
    stored: tuple[Path, RunResult, dict[str, list[Event]]],
) -> None:
    _, _, children = stored
    assert sorted(children) == sorted(CHILDREN)
    assert all(e.run_id == run_id for run_id, events in children.items() for e in events)
    assert children["r1.checks.tests"][-1].type == "run_finished"
    assert children["r1.checks.tests"][-1].outcome == "failed"  # type: ignore[union-attr]


def test_each_child_is_a_panel_inside_the_state_that_ran_it_nested_as_the_workflows_nest(
    stored: tuple[Path, RunResult, dict[str, list[Event]]],
) -> None:
    _, result, children = stored
    page = trace_page(result, children=children)
    runs = blob(page, "lw-children")
    assert {k: [e["seq"] for e in v] for k, v in runs.items()} == {k: [e.seq for e in v] for k, v in children.items()}
    states = dict(
        re.findall(r'<details class="lw-child[^"]*" id="lw-run-([^"]+)" data-run="[^"]+" data-state="([^"]+)"', page)
    )
    assert states["r1.plan"] == "plan" and states["r1.checks"] == "checks"
    assert states["r1.checks.tests"] == "fan_out" and states["r1.per_doc.each.1"] == "each"
    assert states["r1.polish.draft.1"] == "draft" and states["r1.polish.draft.1.review"] == "review"
    # nesting: a child's panel sits inside its parent's panel
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for opened in re.findall(r'<details class="lw-child[^"]*" id="lw-run-([^"]+)"|</details>', page):
        if opened:
            parents[opened] = stack[-1] if stack else None
            stack.append(opened)
        else:
            stack.pop()
    assert stack == [] and sorted(parents) == sorted(CHILDREN)
    assert parents["r1.checks.tests"] == "r1.checks" and parents["r1.checks"] is None
    assert parents["r1.polish.draft.0.review"] == "r1.polish.draft.0" and parents["r1.polish.draft.0"] == "r1.polish"
    assert parents["r1.per_doc.each.1"] == "r1.per_doc"
    # the failed branch: its panel is open, says it failed, where and why; the others are closed
    assert re.search(r'<details class="lw-child lw-o-failed" id="lw-run-r1.checks.tests"[^>]*\sopen>', page)
    assert re.search(r'<details class="lw-child lw-o-final" id="lw-run-r1.checks.lint"[^>]*data-state="fan_out">', page)
    failed = panel(page, "r1.checks.tests")
    assert "failed in reason" in failed and "the test database is down" in failed
    # the workflow's own events link to the runs each state ran
    assert 'href="#lw-run-r1.checks"' in page and 'href="#lw-run-r1.polish.draft.1.review"' in page


@needs_dot
def test_each_child_loop_is_drawn_with_its_own_path(stored: tuple[Path, RunResult, dict[str, list[Event]]]) -> None:
    _, result, children = stored
    page = trace_page(result, children=children)
    tool_round = panel(page, "r1.plan")
    taken = {html.unescape(m) for m in re.findall(r'class="edge lw-taken" data-edge="([^"]+)"', tool_round)}
    assert {"postprocess->act", "act->decide", "decide->preprocess", "decide->done"} <= taken
    failed = panel(page, "r1.checks.tests")
    assert 'class="node lw-visited" data-state="failed"' in failed
    # a state of the workflow that ran children says so (and a failed child shows on it)
    assert 'class="node lw-visited lw-has-runs lw-run-failed" data-state="checks"' in page
    assert 'class="node lw-visited lw-has-runs" data-state="plan"' in page


def test_a_workflow_page_without_its_children_says_where_they_are() -> None:
    result = off_loop(Runner(release()).run("ship it", state={"docs": ["a"]}))
    page = trace_page(result)
    assert "child runs are kept in a store" in page and "--store" in page and "recording()" in page


def test_with_no_store_recording_keeps_the_children_for_the_page() -> None:
    with recording() as runs:
        result = off_loop(Runner(release()).run("ship it", run_id="r1", state={"docs": ["a", "b"]}))
    page = trace_page(result, children=runs)
    assert sorted(blob(page, "lw-children")) == sorted(CHILDREN)
    assert "the test database is down" in panel(page, "r1.checks.tests")
    assert "kept in a store" not in page


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=workflow_trees(max_depth=2))
def test_every_stored_child_of_any_workflow_tree_is_found_and_drawn(tree: TreeSpec, tmp_path: Path) -> None:
    """Whatever the tree (sequences, parallels, loops, maps, nested), the runs the page reads from
    the store are exactly the runs stored under the workflow's run, each a panel of its own."""
    db = tmp_path / f"{uuid.uuid4().hex}.db"
    workflow = tree.build()
    items: list[JsonValue] = [
        f"item {i}" for i in range(max((s.items for s in tree.walk() if s.kind == "map"), default=0))
    ]

    async def go() -> tuple[RunResult, dict[str, list[Event]], set[str]]:
        store = SQLiteStore(str(db))
        try:
            result = await Runner(workflow, store=store).run("go", run_id="w", state={"items": items})
            found = await stored_children(store, "w", workflow)
            under = {s.run_id for s in await store.runs(10_000) if s.run_id.startswith("w.")}
            return result, found, under
        finally:
            await store.close()

    result, found, under = off_loop(go())
    assert set(found) == under
    page = trace_page(result, children=found)
    assert sorted(blob(page, "lw-children")) == sorted(under)
    panels = {
        run_id: outcome
        for outcome, run_id in re.findall(r'<details class="lw-child lw-o-([a-z]+)" id="lw-run-([^"]+)"', page)
    }
    assert under <= set(panels)  # each stored run has its panel; a child that never started says so
    assert all(panels[run_id] == "missing" for run_id in set(panels) - under)


# ------------------------------------------------------------ in a real browser


def details(page: Any, run_id: str) -> Any:
    return page.locator(f'details.lw-child[data-run="{run_id}"]')


def shown(panel: Any) -> Any:
    """The event the detail pane of a child's panel shows (its own pane, not a nested one's)."""
    return json.loads(panel.locator(":scope > .lw-run > section > .lw-detail").text_content() or "")


@pytest.fixture
def opened(stored: tuple[Path, RunResult, dict[str, list[Event]]], browser: Any, tmp_path: Path) -> Iterator[Any]:
    """The workflow's page, written with its children and open in Chromium (no error, nothing fetched)."""
    if not dot_available():
        pytest.skip("the drawing needs Graphviz (apt-get install graphviz)")
    _, result, children = stored
    path = write_trace_page(result, tmp_path / "trace.html", children=children)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=yes]")
    assert errors == [] and fetched == [path.as_uri()]  # one file: nothing fetched
    yield page
    assert errors == []
    if os.environ.get("LOOPWRIGHT_SCREENSHOT"):
        page.screenshot(path=os.environ["LOOPWRIGHT_SCREENSHOT"], full_page=True)
    page.close()


def test_in_chromium_a_failed_branch_is_open_with_its_error_where_it_failed_in_its_loop(opened: Any) -> None:
    page = opened
    # the failed branch of the parallel (on_error="continue") is open when the page opens, and
    # the panel it sits in: its error is shown, the state it failed in marked on its own loop
    failed = details(page, "r1.checks.tests")
    assert failed.evaluate("d => d.open") and details(page, "r1.checks").evaluate("d => d.open")
    assert failed.is_visible()
    head = failed.locator(":scope > summary").inner_text()
    assert "failed in reason" in head and "the test database is down" in head
    error = shown(failed)
    assert error["type"] == "error_occurred" and "the test database is down" in error["error"]["message"]
    current = failed.locator(":scope > .lw-run > .lw-diagram .lw-current")
    assert current.count() == 1 and current.get_attribute("data-state") == "reason"
    box = failed.locator(":scope > .lw-run > .lw-diagram svg").bounding_box()
    assert box is not None and box["width"] > 150 and box["height"] > 150  # its loop, drawn
    assert not details(page, "r1.checks.lint").evaluate("d => d.open")  # the branch that answered is closed
    assert page.locator("#lw-detail").text_content().startswith("Click a step")  # the workflow's pane untouched


def test_in_chromium_each_childs_loop_is_reached_from_the_workflow_state_that_ran_it(
    opened: Any, stored: tuple[Path, RunResult, dict[str, list[Event]]]
) -> None:
    page, children = opened, stored[2]
    # the workflow's state that ran the loop opens its run; inside it, each round is a run of
    # its own whose state `review` opens the review's loop, drawn with its path
    polish = details(page, "r1.polish")
    assert not polish.evaluate("d => d.open")
    page.locator('#lw-diagram g.node[data-state="polish"]').dispatch_event("click")
    assert polish.evaluate("d => d.open") and polish.is_visible()
    round_two = details(page, "r1.polish.draft.1")
    round_two.locator(":scope > summary").click()
    assert round_two.evaluate("d => d.open")
    round_two.locator(':scope > .lw-run > .lw-diagram g.node[data-state="review"]').dispatch_event("click")
    review = details(page, "r1.polish.draft.1.review")
    assert review.evaluate("d => d.open") and review.is_visible()
    taken = review.locator(":scope > .lw-run > .lw-diagram g.edge.lw-taken")
    assert {taken.nth(i).get_attribute("data-edge") for i in range(taken.count())} >= {
        "postprocess->act",
        "act->decide",
    }

    # a step of the nested run: its own pane shows it and its own diagram marks the edge
    call = next(e for e in children["r1.polish.draft.1.review"] if e.type == "tool_called")
    review.locator(f':scope > .lw-run > section > table tr.lw-step[data-seq="{call.seq}"]').click()
    assert shown(review) == call.model_dump(mode="json") and shown(review)["name"] == "exit_loop"
    assert review.locator(":scope > .lw-run > .lw-diagram .lw-current").get_attribute("data-state") == "act"
    assert shown(details(page, "r1.checks.tests"))["type"] == "error_occurred"  # the other panels keep theirs

    # the workflow's timeline has a lane per child; its bar opens the run (the map's here)
    page.locator('#lw-timeline .lw-run-bar[data-run="r1.per_doc"]').click()
    per_doc = details(page, "r1.per_doc")
    assert per_doc.evaluate("d => d.open")
    items = per_doc.locator(":scope > .lw-run > .lw-children > details.lw-child")
    assert [items.nth(i).get_attribute("data-run") for i in range(items.count())] == [
        "r1.per_doc.each.0",
        "r1.per_doc.each.1",
    ]
    # and the link in the workflow's events table to the failed run brings it into view
    page.locator('#lw-table a.lw-run-link[data-run="r1.checks"]').click()
    assert details(page, "r1.checks").evaluate("d => d.classList.contains('lw-flash')")


def test_a_run_id_with_markup_in_it_stays_text_on_the_page() -> None:
    reviewers = ParallelAgent(
        "reviewers",
        branches=[
            Agent(name="security", model=ScriptedModel(["ok"])),
            Agent(name="tests", model=ScriptedModel(["ok"])),
        ],
    )
    with recording() as runs:
        result = off_loop(Runner(reviewers).run("review", run_id='r"<q>'))
    page = trace_page(result, children=runs)
    assert "<q>" not in page and 'r"<q>.tests' not in page  # escaped in HTML, \u003c in the JSON
    assert page.count('data-run="r&quot;&lt;q&gt;.tests"') >= 3  # its panel, its view, its timeline bar
