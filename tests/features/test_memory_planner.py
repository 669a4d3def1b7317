"""Features inserting states on one row compose in a stated order: memory's preload, the Planner, guardrails."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopwright import Agent, Runner, ScriptedModel, verify
from loopwright.data.errors import MachineError
from loopwright.data.events import ModelRequest, ModelResponse, TextPart
from loopwright.features import GUARDRAILS, PLANNER, Planner, machine_for
from loopwright.features.memory import Memory
from loopwright.features.planner import PLANNER_INSTRUCTION
from loopwright.stores.memory import SQLiteMemory
from loopwright.stores.sessions import SQLiteSessions
from loopwright.table.machine import Extension, Row, cancellable, compose

APP = "shop"


def path_from_start(machine: object) -> list[str]:
    """The states a run passes from ``start`` to ``preprocess`` (each one's fallback row)."""
    rows = machine.rows  # type: ignore[attr-defined]
    at, seen = "start", ["start"]
    while at != "preprocess":
        at = next(r for r in rows if r.source == at and not r.guards).dest
        seen.append(at)
    return seen


def test_memory_and_planner_compose_recall_first(tmp_path: Path) -> None:
    memory = Memory(SQLiteMemory(tmp_path / "m.db"))
    machine = compose(PLANNER, memory.extension)
    assert path_from_start(machine) == ["start", "recall", "plan", "preprocess"]
    report = verify(machine)
    assert report.ok, str(report)
    agent = Agent(name="a", model=ScriptedModel(["x"]), planner=Planner(), extensions=[memory.extension])
    assert path_from_start(machine_for(agent)) == ["start", "recall", "plan", "preprocess"]


def test_a_later_feature_wraps_the_earlier_ones_on_a_shared_row() -> None:
    """The rule for any pair (and more): the feature composed later enters first; each one's
    exits into the row's destination go to the state of the one composed before it."""

    async def noop(rs: object, ctx: object) -> None:
        return None

    def inserting(name: str, state: str) -> Extension:
        return Extension(
            name=name,
            states={state: noop},
            redirect={("start", "preprocess"): state},
            rows=[cancellable(state), Row(state, "preprocess")],
        )

    one, two, three = inserting("one", "s1"), inserting("two", "s2"), inserting("three", "s3")
    machine = compose(one, two, three)
    assert path_from_start(machine) == ["start", "s3", "s2", "s1", "preprocess"]
    assert verify(machine).ok
    assert path_from_start(compose(three, one)) == ["start", "s1", "s3", "preprocess"]
    # a row no feature moved and the table lacks is still an error naming the rows there are
    lost = Extension(name="lost", states={"s9": noop}, redirect={("act", "preprocess"): "s9"}, rows=[Row("s9", "done")])
    with pytest.raises(MachineError, match="matches no row"):
        compose(lost)


def test_planner_and_input_guards_compose_guard_first() -> None:
    """The input guard runs before the planner sends the input to the model; a blocked tool
    ends the run before the plan is updated (guardrails' row before ``act -> decide``, moved)."""
    machine = compose(PLANNER, GUARDRAILS)
    assert path_from_start(machine) == ["start", "guard_input", "plan", "preprocess"]
    out_of_act = [(r.dest, r.label) for r in machine.rows if r.source == "act"]
    assert out_of_act == [("cancelled", "cancel_requested"), ("done", "tool_blocked"), ("update_plan", "else")]
    assert verify(machine).ok


def reply(request: ModelRequest) -> ModelResponse:
    said = " ".join(i.text for i in request.instructions)
    if PLANNER_INSTRUCTION in said:
        return ModelResponse(parts=(TextPart(text='{"steps": [{"description": "answer from memory"}]}'),))
    if "answer from memory" in said and "teal" in said:
        return ModelResponse(parts=(TextPart(text="Teal!"),))
    return ModelResponse(parts=(TextPart(text="noted"),))


def test_a_run_with_memory_and_planner_recalls_plans_and_ends(tmp_path: Path) -> None:
    async def main() -> None:
        sessions, service = SQLiteSessions(tmp_path / "app.db"), SQLiteMemory(tmp_path / "app.db")
        memory = Memory(service)
        agent = Agent(name="a", model=ScriptedModel(reply), planner=Planner(), extensions=[memory.extension])
        runner = Runner(agent, sessions=sessions)
        await runner.run("My favourite colour is teal.", session=(APP, "ada", "monday"))
        saved = await sessions.load((APP, "ada", "monday"))
        assert saved is not None
        await service.add_session(saved)
        later = await runner.run("Which colour do I like?", session=(APP, "ada", "friday"))
        assert later.outcome == "final" and later.output == "Teal!"
        assert later.trace[:4] == ["start", "recall", "plan", "preprocess"]
        planning = later.run_state.features["planner"]
        assert planning.complete and planning.plan.steps[0].status == "done"

    asyncio.run(main())


APP_MODULE = """
from loopwright import Agent, ScriptedModel
from loopwright.features import Planner
from loopwright.features.memory import Memory
from loopwright.stores.memory import SQLiteMemory

memory = Memory(SQLiteMemory(":memory:"))
agent = Agent(name="helper", model=ScriptedModel(["ok"]), planner=Planner(), extensions=[memory.extension])
"""


@pytest.mark.slow
def test_check_and_diagram_of_the_composed_agent(tmp_path: Path) -> None:
    (tmp_path / "recall_app.py").write_text(textwrap.dedent(APP_MODULE))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "loopwright", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)  # fmt: skip

    checked = cli("check", "recall_app:agent")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    drawn = cli("diagram", "--agent", "recall_app:agent", "--format", "mermaid", "--out", str(tmp_path / "d"))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    text = "".join(p.read_text() for p in (tmp_path / "d").iterdir()) if (tmp_path / "d").exists() else drawn.stdout
    assert "recall" in text and "plan" in text
