"""diagram: drawn from the running machine, committed diagrams fresh, a run's trace overlaid on its machine."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from loopwright import ConfigurationError, Runner, ToolCall
from loopwright.cli import main
from loopwright.features import BUILT_IN_MACHINES
from loopwright.machines.diagram import diagram, dot_available, markdown, trace_counts, write_diagrams
from loopwright.table.machine import CORE
from tests import ROOT
from tests.helpers import agent

DIAGRAMS = ROOT / "diagrams"
needs_dot = pytest.mark.skipif(
    not dot_available(), reason="Graphviz is not installed (pip install graphviz; apt-get install graphviz)"
)


def _edges(text: str) -> dict[tuple[str, str], str]:
    return {(m[1], m[2]): m[3] for m in re.finditer(r"^  (\w+) --> (\w+): (.*)$", text, re.M)}


@pytest.mark.parametrize("machine", BUILT_IN_MACHINES.values(), ids=list(BUILT_IN_MACHINES))
def test_every_row_is_an_edge_labelled_with_its_guards(machine: object) -> None:
    from loopwright.table.machine import LoopMachine

    assert isinstance(machine, LoopMachine)
    edges = _edges(diagram(machine))
    for row in machine.rows:
        label = edges[(row.source, row.dest)]
        assert all(name in label for name in row.guard_names) or row.is_fallback
    assert len(edges) == len({(r.source, r.dest) for r in machine.rows})


def test_the_plain_loop_in_mermaid() -> None:
    text = diagram()
    assert text.startswith("---\ntitle: agent\n---\nstateDiagram-v2\n  direction TB\n")
    edges = _edges(text)
    assert edges[("reason", "reason")] == (
        "⟲ has_retryable_model_error & retries_left [bounded: max_model_retries]"
        " | ⟲ has_failed_model & fallback_left [bounded: max_fallbacks]"
    )
    assert edges[("decide", "done")] == "is_final_response ⇒ final | else ⇒ limit"
    assert edges[("start", "preprocess")] == "else"
    assert "  Class done s_terminal\n" in text and "  cancelled --> [*]\n" in text and "  [*] --> start\n" in text
    assert "  Class reason s_default\n" in text


def test_waiting_states_are_drawn_dashed() -> None:
    text = diagram(BUILT_IN_MACHINES["waiting"])
    assert "  Class suspended s_waiting\n" in text and "stroke-dasharray:5 5" in text


def test_committed_markdown_diagrams_are_fresh(tmp_path: Path) -> None:
    write_diagrams(tmp_path, formats=("mermaid",))
    for fresh in sorted(tmp_path.glob("*.md")):
        committed = DIAGRAMS / fresh.name
        assert committed.exists(), f"diagrams/{fresh.name} is missing: run `loopwright diagram`"
        assert committed.read_text() == fresh.read_text(), f"diagrams/{fresh.name} is stale: run `loopwright diagram`"
    generated = {p.stem for p in DIAGRAMS.glob("*.md")} - {"README-section"}
    assert generated == set(BUILT_IN_MACHINES), "diagrams/ holds a diagram of no built-in variant: delete it"


def test_committed_svgs_come_from_the_current_machines() -> None:
    for name, machine in BUILT_IN_MACHINES.items():
        svg = (DIAGRAMS / f"{name}.svg").read_text()
        stamp = re.search(r"<!-- loopwright diagram source sha256:(\w+) -->", svg)
        assert stamp, f"diagrams/{name}.svg has no source stamp: run `loopwright diagram`"
        if dot_available():
            import hashlib

            assert stamp[1] == hashlib.sha256(diagram(machine, "dot").encode()).hexdigest(), (
                f"diagrams/{name}.svg is stale: run `loopwright diagram`"
            )


@needs_dot
def test_committed_svgs_are_byte_for_byte_fresh(tmp_path: Path) -> None:
    write_diagrams(tmp_path, formats=("svg",))
    for fresh in sorted(tmp_path.glob("*.svg")):
        assert (DIAGRAMS / fresh.name).read_bytes() == fresh.read_bytes(), f"diagrams/{fresh.name} is stale"


@needs_dot
def test_svg_is_deterministic_and_styles_bounded_edges() -> None:
    assert diagram(CORE, "svg") == diagram(CORE, "svg")
    dot = diagram(CORE, "dot")
    assert (
        'reason -> reason [label="⟲ has_retryable_model_error &\\nretries_left [bounded: max_model_retries] | ⟲' in dot
    )
    assert 'color="#1f5fbf"' in dot and "peripheries=2" in dot
    assert diagram(CORE, "png").startswith(b"\x89PNG")


def test_missing_graphviz_gets_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigurationError) as err:
        diagram(CORE, "png")
    assert str(err.value).startswith("png diagrams need the Graphviz programs (the `dot` command): apt-get install")
    assert "drawn in pure Python" in diagram(CORE, "svg").splitlines()[1]
    with pytest.raises(ConfigurationError, match="unknown diagram format 'gif'; use one of mermaid, dot, svg, png"):
        diagram(CORE, "gif")


# ------------------------------------------------------------------ trace overlay


def _tool_run() -> object:
    script = [[ToolCall(name="add", args={"a": 1, "b": 2})], [ToolCall(name="add", args={"a": 3, "b": 4})], "7"]
    return Runner(agent(script, max_repeated_calls=None)).run_sync("add")  # the core machine


def test_a_run_result_draws_its_own_trace() -> None:
    result = _tool_run()
    counts = {f"{r.source}->{r.dest}": n for r, n in trace_counts(CORE, result).items()}  # type: ignore[arg-type]
    assert counts == {
        "start->preprocess": 1,
        "preprocess->reason": 3,
        "reason->postprocess": 3,
        "postprocess->act": 2,
        "postprocess->decide": 1,
        "act->decide": 2,
        "decide->preprocess": 2,
        "decide->done": 1,
    }
    text = diagram(trace=result)  # type: ignore[arg-type]
    edges = _edges(text)
    assert edges[("postprocess", "act")] == "has_tool_calls ✔ 2×"
    assert edges[("decide", "done")] == "is_final_response ⇒ final ✔ 1× | else ⇒ limit"
    assert "  Class act s_visited\n" in text and "  Class salvage s_default\n" in text
    assert 'color="#d62728"' in diagram(CORE, "dot", trace=result) if dot_available() else True  # type: ignore[arg-type]


def test_a_trace_from_another_machine_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"type":"state_entered","run_id":"r","seq":1,"time":0,"state":"transfer","iteration":1,"agent":"a",'
        '"source":"decide","guard":"x"}\n'
    )
    with pytest.raises(ConfigurationError) as err:
        diagram(CORE, trace=str(events))
    assert str(err.value) == (
        "the trace took edges that machine 'agent' does not have: decide -> transfer (x); draw it on the machine "
        "the run used (--agent module:attr)"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["diagram", "--trace", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("loopwright diagram: line 1 of trace ")


def test_multi_agent_traces_find_their_variant() -> None:
    rows = [r for r in BUILT_IN_MACHINES["multi_agent"].rows if r.dest == "transfer"]
    from loopwright.data.events import StateEntered
    from loopwright.machines.diagram import machine_of_trace

    event = StateEntered(
        run_id="r", seq=1, time=0, state="transfer", iteration=1, agent="a", source="decide", guard=rows[0].label
    )
    assert machine_of_trace([event]) is BUILT_IN_MACHINES["multi_agent"]


# ------------------------------------------------------------------ the command


def test_the_command_regenerates_the_diagrams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--out", str(tmp_path), "--format", "mermaid"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.md" for n in BUILT_IN_MACHINES)
    assert (tmp_path / "agent.md").read_text() == markdown(CORE)
    assert capsys.readouterr().out.splitlines()[0] == f"wrote {tmp_path / 'agent.md'}"
    assert main(["diagram", "--out", str(tmp_path), "--format", "gif"]) == 2
    assert capsys.readouterr().err == "loopwright diagram: unknown format 'gif'; use one of mermaid, dot, svg, png\n"


def test_the_command_draws_one_agent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--format", "mermaid", "--agent", "loopwright.demo:helpdesk_agent"]) == 0
    assert capsys.readouterr().out.startswith("---\ntitle: multi_agent+loop_detection\n")
    assert main(["diagram", "--agent", "loopwright.table.machine:NOPE"]) == 2
