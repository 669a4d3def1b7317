"""The worked example of docs/design.md ("Adding a feature") runs: the block is taken from the page
as it is, registered like a built-in feature, and composed only onto the agents it says it applies to."""

from __future__ import annotations

import re
import types
from datetime import date
from typing import Any

import pytest

import loopwright.features
import loopwright.features.registry
from loopwright import Agent, ModelRequest, Runner, ScriptedModel, diagram, tool, verify
from loopwright.extend import Extension
from loopwright.features import BUILT_IN, BUILT_IN_MACHINES, LOOP_DETECTION, features_for
from tests import ROOT

PAGE = ROOT / "docs" / "design.md"


def worked_example() -> types.ModuleType:
    """The python block of docs/design.md's "Adding a feature", run as the module it stands for."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Adding a feature\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    module = types.ModuleType("today")
    exec(compile(code, f"{PAGE}:Adding a feature", "exec"), module.__dict__)
    return module


today = worked_example()
TODAY: Extension = today.TODAY


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``BuiltIn(TODAY)`` added to the registry, as the page says (for this test only)."""
    registry = loopwright.features.registry.REGISTRY
    monkeypatch.setattr(loopwright.features.registry, "REGISTRY", (*registry, loopwright.features.BuiltIn(TODAY)))


def saying(instruction: str, **options: Any) -> Agent:
    return Agent(name="clerk", model=ScriptedModel(["It is today."]), instruction=instruction, **options)


def test_the_feature_applies_to_the_agents_it_says_and_to_no_other(registered: None) -> None:
    assert features_for(saying("Today is {today}. Answer briefly.")) == (TODAY,)
    assert features_for(saying("Answer briefly.")) == ()
    sub = saying("Today is {today}.").replace(name="sub")
    assert features_for(saying("Ask sub.", sub_agents=[sub]))[-1] is TODAY  # any agent of the tree


def test_an_agent_that_says_today_is_told_the_date_its_run_began(registered: None) -> None:
    agent = saying("Today is {today}. Answer briefly.")
    result = Runner(agent).run_sync("What day is it?")
    assert result.outcome == "final"
    assert result.run_state.trace[:3] == ["start", "stamp_date", "preprocess"]
    (request,) = agent.model.requests  # type: ignore[attr-defined]
    assert isinstance(request, ModelRequest)
    assert f"Today is {date.today().isoformat()}." in " ".join(i.text for i in request.instructions)


def test_it_composes_after_the_built_in_features_in_registry_order(registered: None) -> None:
    @tool
    def look(q: str) -> str:
        """Look something up."""
        return q

    found = features_for(saying("Today is {today}.", tools=[look]))
    assert found == (LOOP_DETECTION, TODAY)
    assert TODAY not in BUILT_IN  # the registry itself is untouched outside the fixture


def test_its_machine_verifies_and_draws_its_state() -> None:
    agent = saying("Today is {today}.", extensions=[TODAY])  # named: composed without the registry
    assert features_for(agent) == (TODAY,)
    assert verify(agent).ok
    drawn = diagram(agent)
    assert "stamp_date" in drawn and "start --> stamp_date" in drawn.replace('"', "")


def test_an_extension_applies_only_when_named_unless_it_says_otherwise() -> None:
    plain = Extension(name="plain")
    assert not plain.applies_to(saying("Today is {today}."))
    assert features_for(saying("Hi.", extensions=[plain, plain])) == (plain,)


def test_no_built_in_feature_applies_to_a_plain_agent() -> None:
    assert features_for(saying("Answer briefly.")) == ()
    assert all(not e.applies_to(saying("Answer briefly.")) for e in BUILT_IN)


def test_hooks_are_called_with_keywords() -> None:
    """A hook takes the keywords it uses and ``**_`` for any added later."""
    seen: list[str] = []

    def note(*, request: ModelRequest, rs: Any, **_: Any) -> ModelRequest:
        seen.append(rs.stage)
        return request

    def done(*, why: str, **_: Any) -> None:
        seen.append(why)

    agent = saying("Hi.", extensions=[Extension(name="keywords", request=note, finish=done)])
    assert Runner(agent).run_sync("hi").outcome == "final"
    assert seen == ["preprocess", "the run ended in 'done'"]


def test_the_diagrams_are_the_registry_s_machines() -> None:
    drawn = {p.stem for p in (ROOT / "diagrams").glob("*.md")}
    assert drawn == set(BUILT_IN_MACHINES)
