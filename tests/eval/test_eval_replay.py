"""Recorded runs as cases: a run kept in a store becomes a case (``case_from_events`` and
``loopwright eval record``) that passes when replayed on the same agent and fails when a tool's
behaviour changes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, tool
from loopwright.data.events import EVENT_ADAPTER
from loopwright.demo import DEMO_INPUT, demo_agent
from loopwright.eval import EvalSet, case_from_events, evaluate
from loopwright.stores import SQLiteStore
from tests import ROOT


def stored_run(path: Path) -> str:
    async def main() -> str:
        store = SQLiteStore(str(path))
        try:
            result = await Runner(demo_agent(), store=store).run(DEMO_INPUT)
        finally:
            await store.close()
        assert result.outcome == "final"
        return result.run_id

    return asyncio.run(main())


def events_of(path: Path, run_id: str) -> list[Any]:
    async def main() -> list[bytes]:
        store = SQLiteStore(str(path))
        try:
            return await store.events(run_id)
        finally:
            await store.close()

    return [EVENT_ADAPTER.validate_json(raw) for raw in asyncio.run(main())]


def with_changed_hotel_prices() -> Agent:
    """The demo agent after a "code change": hotel_price quotes 10% more."""
    agent = demo_agent()

    @tool
    def hotel_price(city: str, nights: int) -> dict[str, Any]:
        """Total price in EUR of a mid-range hotel."""
        return {"city": city, "nights": nights, "total_eur": 198.0 * nights}

    tools = [t for name, t in agent.tools.items() if name != "hotel_price"]
    return agent.replace(tools=[*tools, hotel_price])


def test_a_recorded_run_passes_on_the_same_agent_and_fails_when_a_tool_changes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = stored_run(db)
    case = case_from_events(events_of(db, run_id))
    assert [c.name for c in case.expected_calls or []] == [
        "get_weather",
        "get_weather",
        "hotel_price",
        "hotel_price",
        "convert_currency",
    ]
    assert case.replay is not None and len(case.replay.replies["trip_assistant"]) == 5
    path = EvalSet(name="recorded", cases=[case]).save(tmp_path / "recorded.yaml")

    same = asyncio.run(evaluate(demo_agent(), path, progress=False))
    assert same.passed, same.summary()
    assert same.cases[0].runs[0].calls == [c.label() for c in case.expected_calls or []]

    changed = asyncio.run(evaluate(with_changed_hotel_prices(), path, progress=False))
    assert not changed.passed
    (run,) = changed.cases[0].runs
    assert run.error is not None and "replay diverged: tool 'hotel_price'" in run.error
    assert "- convert_currency(amount=540.0" in "\n".join(run.diff)

    live = asyncio.run(evaluate(with_changed_hotel_prices(), path, progress=False, replay=False))
    assert not live.passed  # on the agent's own model the answer changes: 641.52 USD, not 583.20
    assert "641.52 USD" in live.cases[0].runs[0].output


@pytest.mark.slow
def test_eval_record_from_the_cli_then_run_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = stored_run(db)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "loopwright", "eval", "record", "--store", f"sqlite:///{db}", run_id, "-o", "set.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"wrote set.yaml: 1 case (run-{run_id[:12]})" in done.stdout
    (tmp_path / "agents.py").write_text(
        "from loopwright.demo import demo_agent\nagent = demo_agent()\n"
        "from tests.eval.test_eval_replay import with_changed_hotel_prices\nchanged = with_changed_hotel_prices()\n"
    )
    ok = subprocess.run(
        [sys.executable, "-m", "loopwright", "eval", "run", "agents:agent", "set.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "loopwright", "eval", "run", "agents:changed", "set.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1 and "replay diverged: tool 'hotel_price'" in bad.stdout, bad.stdout + bad.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "loopwright", "eval", "record", "--store", f"sqlite:///{db}", "nope", "-o", "x.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "no events of run 'nope'" in missing.stderr
