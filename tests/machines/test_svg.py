"""The machine drawn as SVG in pure Python: every state and row, bounded edges, a run's path lit,
valid and deterministic, with neither the `dot` program nor the graphviz package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from loopwright import Runner, ToolCall
from loopwright.cli.trace_page import trace_page
from loopwright.features import BUILT_IN_MACHINES
from loopwright.machines.diagram import diagram, dot_available, pure_svg
from loopwright.table.machine import LoopMachine
from tests import ROOT
from tests.helpers import agent

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def no_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphviz hidden: no `dot` on the PATH, no graphviz package."""
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "graphviz", None)
    assert not dot_available()


def _groups(svg: str, kind: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg.encode())
    assert root.tag == f"{SVG}svg"
    found = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class", "").split()[:1] == [kind]:
            title = g.find(f"{SVG}title")
            assert title is not None and title.text is not None
            found[title.text] = g
    return found


def _text(g: ET.Element) -> str:
    return "\n".join(t.text or "" for t in g.iter(f"{SVG}text"))


@pytest.mark.parametrize("name", list(BUILT_IN_MACHINES))
def test_every_state_and_every_row_is_drawn_without_graphviz(name: str, no_dot: None) -> None:
    machine = BUILT_IN_MACHINES[name]
    svg = diagram(machine, "svg")
    assert "pure Python" in svg.splitlines()[1]
    assert "<script" not in svg.lower()
    nodes, edges = _groups(svg, "node"), _groups(svg, "edge")
    assert set(machine.states) <= set(nodes)
    for state in machine.states:
        assert _text(nodes[state]) == state
        shapes = nodes[state].findall(f"{SVG}path")
        assert len(shapes) == (2 if state in machine.terminals else 1)  # terminals: a double border
    pairs = {(r.source, r.dest) for r in machine.rows}
    assert {f"{a}->{b}" for a, b in pairs} | {f"__start__->{machine.initial}"} == set(edges)
    for row in machine.rows:
        label = _text(edges[f"{row.source}->{row.dest}"]).replace(" &\n   ", " & ")
        assert all(g in label for g in row.guard_names) or (row.is_fallback and "else" in label)
        if row.bounded_by:
            assert f"[bounded: {row.bounded_by}]" in label
            assert edges[f"{row.source}->{row.dest}"].find(f"{SVG}path").get("stroke") == "#1f5fbf"  # type: ignore[union-attr]


def test_the_drawing_is_deterministic_and_the_same_in_a_fresh_interpreter(no_dot: None) -> None:
    machine = BUILT_IN_MACHINES["multi_agent+waiting+loop_detection"]
    once = diagram(machine, "svg")
    assert once == diagram(machine, "svg")
    code = (
        "import sys; sys.modules['graphviz'] = None\n"
        "from loopwright.features import BUILT_IN_MACHINES\n"
        "from loopwright.machines.diagram import diagram\n"
        "sys.stdout.write(diagram(BUILT_IN_MACHINES['multi_agent+waiting+loop_detection'], 'svg'))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123", "PATH": ""}
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert fresh.stdout == once


def test_the_command_draws_svg_with_neither_dot_nor_the_graphviz_package(tmp_path: Path) -> None:
    """`loopwright diagram --format svg` in a process whose PATH has no `dot` and that cannot import graphviz."""
    code = (
        "import sys; sys.modules['graphviz'] = None\n"
        "from loopwright.cli import main\n"
        "sys.exit(main(['diagram', '--format', 'svg', '--agent', 'tests.serve_agents:support']))\n"
    )
    env = {**os.environ, "PATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    nodes = _groups(done.stdout, "node")
    assert {"reason", "act", "suspended", "done"} <= set(nodes)


def _tool_run() -> object:
    script = [[ToolCall(name="add", args={"a": 1, "b": 2})], "3"]
    return Runner(agent(script, max_repeated_calls=None)).run_sync("add")


def test_a_run_is_lit_on_the_drawing(no_dot: None) -> None:
    result = _tool_run()
    svg = diagram(result, "svg")  # type: ignore[call-overload]
    edges, nodes = _groups(svg, "edge"), _groups(svg, "node")
    lit = {t for t, g in edges.items() if g.find(f"{SVG}path").get("stroke") == "#d62728"}  # type: ignore[union-attr]
    assert {"reason->postprocess", "postprocess->act", "act->decide", "decide->preprocess"} <= lit
    assert "reason->salvage" not in lit
    assert "✔ 2×" in _text(edges["reason->postprocess"])
    assert nodes["act"].find(f"{SVG}path").get("fill") == "#ffe0c2"  # type: ignore[union-attr]
    assert nodes["salvage"].find(f"{SVG}path").get("fill") == "white"  # type: ignore[union-attr]


def test_text_is_escaped(no_dot: None) -> None:
    machine = LoopMachine(name='a<b & "c"</svg><script>')
    svg = diagram(machine, "svg")
    assert "<script" not in svg
    root = ET.fromstring(svg.encode())
    assert next(t.text for t in root.iter(f"{SVG}title")) == 'a<b & "c"</svg><script>'


def test_the_trace_page_has_the_drawing_with_the_path_marked(no_dot: None) -> None:
    page = trace_page(_tool_run())  # type: ignore[arg-type]
    assert "mermaid text" not in page and "Graphviz" not in page
    drawing = page[page.index('<section id="lw-diagram"') : page.index("</section>")]
    assert drawing.count("<svg") == 1
    assert 'class="edge lw-taken" data-edge="act-&gt;decide"' in drawing
    assert 'class="node lw-visited" data-state="act"' in drawing
    assert 'class="node" data-state="salvage"' in drawing


def test_the_dev_uis_diagram_route_draws_without_graphviz(no_dot: None, tmp_path: Path) -> None:
    from loopwright.serve import app
    from tests.serve_agents import serving, support

    with serving(app([support], store=f"sqlite:///{tmp_path / 'runs.db'}")) as base:
        answer = httpx.get(base + "/agents/support/diagram.svg", timeout=20)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")
    assert answer.text.startswith("<svg")
    assert {"reason", "act", "suspended"} <= set(_groups(answer.text, "node"))


def test_pure_svg_is_what_diagram_gives_without_graphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = BUILT_IN_MACHINES["waiting"]
    made = pure_svg(machine)
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    assert diagram(machine, "svg") == made
