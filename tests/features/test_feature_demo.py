"""``loopwright demo`` shows each composed option (--plan-react, --planner, --observer, --output-type)."""

from __future__ import annotations

import json

import pytest

from loopwright.cli import main
from loopwright.demo import TripAnswer, demo_agent
from loopwright.loop.runner import Runner


def events(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, object]]:
    assert main(["demo", "--json", *flags]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_each_option_shows_in_the_demos_events(capsys: pytest.CaptureFixture[str]) -> None:
    planned = events(capsys, "--planner")
    assert [e["state"] for e in planned if e["type"] == "state_entered"][:2] == ["plan", "preprocess"]
    assert [e["complete"] for e in planned if e["type"] == "plan_updated"][-1] is True
    observed = events(capsys, "--observer")
    assert [e["verdict"] for e in observed if e["type"] == "observed"] == ["ok", "ok"]
    structured = events(capsys, "--output-type")
    assert json.loads(str(structured[-1]["output"])) == {
        "affordable": True,
        "total_usd": 583.2,
        "warmer_city": "Lisbon",
    }
    tagged = events(capsys, "--plan-react")
    assert "/*FINAL_ANSWER*/" in json.dumps([e for e in tagged if e["type"] == "model_responded"][-1])
    assert str(tagged[-1]["output"]).startswith("Yes: 3 nights in Lisbon")


def test_the_output_type_demo_returns_the_object() -> None:
    result = Runner(demo_agent(options=["output-type", "planner", "observer"])).run_sync("trip?")
    assert result.output == TripAnswer(affordable=True, total_usd=583.2, warmer_city="Lisbon")


def test_one_planner_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--plan-react", "--planner"]) == 2
    assert "choose --plan-react or --planner" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown demo options"):
        demo_agent(options=["telepathy"])
