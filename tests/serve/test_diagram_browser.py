"""The dev UI's live diagram in Chromium (Debian's, driven by playwright) from a `loopwright serve`
whose process has no `dot` on its PATH and cannot import the graphviz package: the machine is drawn
in pure Python and lights up as a run goes; the run's trace page has the drawing with its path. The
docs' picture of it (docs/images/serve-ui-pure-python.png) is made here when LOOPWRIGHT_UPDATE_PICTURES is set."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import ROOT
from tests.chromium import launched
from tests.helpers import serving_cli
from tests.serve_agents import free_port

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "test-artifacts" / "serve"
DOCS_PICTURE = ROOT / "docs" / "images" / "serve-ui-pure-python.png"
SERVE = (
    "import sys; sys.modules['graphviz'] = None  # as if not installed\n"
    "from loopwright.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium; skipped loudly without Chromium or playwright (failed in CI). Unlike
    tests/chromium.py's fixture it does not ask for Graphviz: the point is to do without it."""
    with launched(needs_graphviz=False) as browser:
        yield browser


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`loopwright serve tests.serve_agents:support` in a process with no `dot` on its PATH."""
    port = free_port()
    bare = tmp_path / "bin"  # the PATH: an empty folder (the interpreter is named by its full path)
    bare.mkdir()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    without_graphviz = (sys.executable, "-c", SERVE)
    with serving_cli(
        "tests.serve_agents:support", "--store", store,
        port=port, command=without_graphviz, env={"PATH": str(bare)}, stdout=subprocess.DEVNULL,
    ):  # fmt: skip
        yield f"http://127.0.0.1:{port}"


def test_without_graphviz_the_live_diagram_lights_up_as_a_run_goes(chromium: Any, server: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    svg = httpx.get(f"{server}/agents/support/diagram.svg")
    assert svg.status_code == 200, svg.text
    from loopwright.features import machine_for
    from loopwright.machines.diagram import pure_svg
    from tests.serve_agents import support

    expected = pure_svg(machine_for(support))
    assert svg.text == expected[expected.index("<svg") :]  # the pure-Python drawing, not Graphviz's

    page = chromium.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    page.wait_for_selector("body[data-ready='yes']")
    page.wait_for_selector("#diagram svg g.edge")
    assert page.locator("#diagram g.node[data-state='reason']").count() == 1
    assert page.locator("#diagram g.edge[data-edge='reason->postprocess']").count() == 1
    assert page.locator("#diagram g.edge.lw-taken").count() == 0

    page.fill("#chat-input", "please refund A7")
    page.click("#send")
    approve = page.wait_for_selector(".approval button.approve")
    lit = page.locator("#diagram g.edge.lw-taken").count()
    assert lit >= 4
    assert page.locator("#diagram g.node.lw-visited[data-state='suspended']").count() == 1
    assert page.locator("#diagram g.edge.lw-current").count() == 1
    colour = page.locator("#diagram g.edge.lw-taken path").first.evaluate("e => getComputedStyle(e).stroke")
    assert colour in ("rgb(214, 39, 40)", "rgb(255, 159, 0)")  # lit red (the current one orange), by app.css
    page.screenshot(path=str(ARTIFACTS / "no-graphviz-1-waiting.png"), full_page=True)

    approve.click()
    page.wait_for_selector("body[data-finished='final']")
    assert page.locator(".msg.assistant").all_inner_texts()[-1] == "done: refunded A7"
    assert page.locator("#diagram g.node.lw-visited[data-state='done']").count() == 1
    assert page.locator("#diagram g.edge.lw-taken").count() > lit
    page.screenshot(path=str(ARTIFACTS / "no-graphviz-2-answered.png"), full_page=True)
    if os.environ.get("LOOPWRIGHT_UPDATE_PICTURES"):  # the docs' picture, only when asked
        page.screenshot(path=str(DOCS_PICTURE))

    page.wait_for_selector("#trace-link[href]")
    page.goto(server + "/" + page.get_attribute("#trace-link", "href"))
    page.wait_for_selector("body[data-ready='yes']")
    assert page.locator("#lw-diagram svg").count() == 1
    assert page.locator("#lw-diagram g.edge.lw-taken").count() >= 5
    assert page.locator("#lw-diagram g.node.lw-visited[data-state='done']").count() == 1
    page.locator("#lw-diagram g.edge[data-edge='act->decide']").click()
    assert page.locator("#lw-diagram g.edge.lw-current").count() == 1  # a click on an edge marks its step
    page.screenshot(path=str(ARTIFACTS / "no-graphviz-3-trace-page.png"), full_page=True)
    assert errors == []
