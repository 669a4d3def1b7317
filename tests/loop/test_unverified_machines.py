"""Every machine that runs is bounded: a machine ``verify`` rejects is refused by every runner
unless the user opts in (``Runner(agent, unverified=True)``), and an opted-in run still ends by
its ``timeout_s``, on ``cancel`` and at its transition cap (``Limits.max_transitions``).

The runs that could loop forever run in a subprocess with a hard kill timeout, so a regression
fails these tests instead of hanging the suite."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Limits, Runner, RunState, ScriptedModel
from loopwright.data.errors import MachineError
from loopwright.extend import Rule, extend
from loopwright.table.machine import LoopMachine

ROOT = Path(__file__).resolve().parents[2]
HARD_KILL_S = 30.0
"""A child process still running after this long is killed, and the test fails."""


async def spin(rs: RunState, ctx: Any) -> None:
    """A stage that does nothing and never suspends: no model call, no await."""


async def slow_spin(rs: RunState, ctx: Any) -> None:
    """A stage that takes a while (a sleep the deadline cuts), still no model call."""
    await asyncio.sleep(0.3)


def keep_spinning(rs: RunState) -> bool:
    return True


def back_to_preprocess() -> LoopMachine:
    """The issue's machine: ``preprocess -> spin -> preprocess``, a handler-only cycle that
    ``verify`` reports as unbounded (``preprocess`` still answers ``cancel_requested``)."""
    return extend(
        name="spinning",
        states={"spin": spin},
        rows_before={("preprocess", "reason"): [Rule("preprocess", "spin", "keep_spinning")]},
        rows=[Rule("spin", "preprocess")],
        guards={"keep_spinning": keep_spinning},
        check=False,
    )


def carousel() -> LoopMachine:
    """A cycle that never meets a row testing the deadline or cancellation: spin -> turn -> spin."""
    return extend(
        name="carousel",
        states={"spin": spin, "turn": spin},
        rows_before={("preprocess", "reason"): [Rule("preprocess", "spin", "keep_spinning")]},
        rows=[Rule("spin", "turn"), Rule("turn", "spin")],
        guards={"keep_spinning": keep_spinning},
        check=False,
    )


def slow_carousel() -> LoopMachine:
    """The carousel whose stages each take 300 ms."""
    return extend(
        name="slow_carousel",
        states={"spin": slow_spin, "turn": slow_spin},
        rows_before={("preprocess", "reason"): [Rule("preprocess", "spin", "keep_spinning")]},
        rows=[Rule("spin", "turn"), Rule("turn", "spin")],
        guards={"keep_spinning": keep_spinning},
        check=False,
    )


MACHINES = {"back_to_preprocess": back_to_preprocess, "carousel": carousel, "slow_carousel": slow_carousel}


def spinner(machine: LoopMachine, **limits: Any) -> Agent:
    return Agent(name="spinner", model=ScriptedModel(["never asked"]), machine=machine, limits=Limits(**limits))


# ------------------------------------------------------------------ refused


def test_a_machine_verify_rejects_is_refused_naming_the_violation_and_the_opt_in() -> None:
    """The issue's machine (built with check=False) is refused by Runner: the message names the
    cycle verify found and how to run it anyway."""
    with pytest.raises(MachineError) as caught:
        Runner(spinner(back_to_preprocess(), timeout_s=1))
    message = str(caught.value)
    assert "spin" in message and "preprocess" in message
    assert "FAIL 3." in message  # the rule it breaks: every cycle passes through a bounded edge
    assert "unverified=True" in message


def test_a_workflow_refuses_an_unverified_child_when_it_is_built() -> None:
    """A workflow agent names the child whose machine verify rejects, before anything runs."""
    from loopwright.workflows import SequentialAgent

    ok = Agent(name="ok", model=ScriptedModel(["fine"]))
    with pytest.raises(MachineError, match="spinner"):
        SequentialAgent("seq", [ok, spinner(back_to_preprocess())])


def test_a_durable_runner_refuses_it_and_takes_the_opt_in(tmp_path: Path) -> None:
    """A runner with a store (the durable resume runs through it) refuses the machine as any
    Runner does, and takes the opt-in."""
    from loopwright.stores import SQLiteStore

    agent = spinner(back_to_preprocess())
    store = SQLiteStore(tmp_path / "runs.db")
    with pytest.raises(MachineError, match="unverified=True"):
        Runner(agent, store=store)
    assert Runner(agent, store=store, unverified=True).unverified


def test_dbos_register_refuses_it_and_takes_the_opt_in() -> None:
    """DBOS's ``register`` (the worker's runners) refuses the machine, and takes the opt-in."""
    pytest.importorskip("dbos")
    from loopwright.integrations.dbos import register
    from loopwright.integrations.dbos.registry import RUNNERS

    agent = spinner(back_to_preprocess())
    with pytest.raises(MachineError, match="unverified=True"):
        register(agent)
    register(agent, unverified=True)
    assert RUNNERS.pop("spinner").unverified


def test_verifying_is_once_per_machine() -> None:
    """The verdict is kept per machine: a second Runner of the same machine does not verify again."""
    from loopwright.loop import runner as runner_module

    machine = back_to_preprocess()
    calls: list[object] = []
    real = runner_module.verify

    def counting(target: Any) -> Any:
        calls.append(target)
        return real(target)

    runner_module.verify = counting  # type: ignore[assignment]
    try:
        fresh = extend(name=f"fresh{time.monotonic_ns()}", check=False)  # a machine no runner has seen
        for _ in range(3):
            Runner(Agent(name="a", model=ScriptedModel(["hi"]), machine=fresh))
            Runner(spinner(machine), unverified=True)
    finally:
        runner_module.verify = real  # type: ignore[assignment]
    assert len(calls) <= 2


def test_the_built_in_machines_are_accepted() -> None:
    """Agents on the built-in machines run as before."""
    result = Runner(Agent(name="a", model=ScriptedModel(["hi"]))).run_sync("hello")
    assert result.outcome == "final"


# ------------------------------------------------------------------ run anyway: still bounded


def _run_in_child(scenario: str, machine: str) -> dict[str, Any]:
    """Run ``_main(scenario, machine)`` in a fresh interpreter, killed after HARD_KILL_S."""
    code = f"from tests.loop.test_unverified_machines import _main; _main({scenario!r}, {machine!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=HARD_KILL_S
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {scenario} run on {machine} was still running after {HARD_KILL_S} s (killed)")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.monotonic() - started
    return out


def _main(scenario: str, machine_name: str) -> None:
    """The child process: run the opted-in machine in ``scenario`` and print what happened."""
    machine = MACHINES[machine_name]()
    started = time.monotonic()
    if scenario == "timeout":
        # (a cycle this quick reaches the default max_transitions first: raised, the deadline ends it)
        runner = Runner(spinner(machine, timeout_s=1, max_transitions=10**9), unverified=True)
        result = runner.run_sync("go")
    elif scenario == "cancel":
        runner = Runner(spinner(machine, timeout_s=None, max_transitions=10**9), unverified=True)

        kept: list[Any] = []

        async def main() -> None:  # (the result kept out of the task: asyncio would format it, see sync_run)
            task = asyncio.ensure_future(runner.run("go", run_id="r1"))
            await asyncio.sleep(0.2)
            assert runner.cancel("r1")
            kept.append(await task)

        asyncio.run(main())
        result = kept[0]
    else:  # the transition cap alone: no deadline
        runner = Runner(spinner(machine, timeout_s=None, max_transitions=500), unverified=True)
        result = runner.run_sync("go")
    print(
        json.dumps(
            {
                "outcome": result.outcome,
                "limit": result.limit,
                "error": result.error.message if result.error else None,
                "transitions": len(result.trace) - 1,
                "elapsed": time.monotonic() - started,
                "iterations": result.iterations,
            }
        )
    )


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_run_anyway_it_ends_within_its_timeout(machine: str) -> None:
    """Opted in, the handler-only cycle ends ``limit`` (timeout_s) within its 1 s deadline."""
    out = _run_in_child("timeout", machine)
    assert out["outcome"] == "limit" and out["limit"] == "timeout_s", out
    assert out["elapsed"] < 5.0, out  # timeout_s=1; generous for a loaded machine
    assert out["iterations"] == 0  # no model call was ever made


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_run_anyway_it_ends_on_cancel(machine: str) -> None:
    """Opted in, ``runner.cancel`` ends the cycle ``cancelled``, even where no row tests it."""
    out = _run_in_child("cancel", machine)
    assert out["outcome"] == "cancelled", out
    assert out["elapsed"] < 5.0, out


@pytest.mark.parametrize("machine", ["back_to_preprocess", "carousel"])
def test_run_anyway_it_ends_at_the_transition_cap(machine: str) -> None:
    """Opted in, with no deadline at all, the run ends ``limit`` at ``Limits.max_transitions``,
    the message saying so."""
    out = _run_in_child("cap", machine)
    assert out["outcome"] == "limit" and out["limit"] == "max_transitions", out
    assert out["transitions"] == 500, out
    assert "max_transitions=500" in (out["error"] or ""), out


def test_the_transition_cap_is_a_documented_limit() -> None:
    """``Limits.max_transitions`` has a finite default and takes a whole number > 0."""
    assert Limits().max_transitions >= 10_000
    with pytest.raises(ValueError, match="max_transitions"):
        Limits(max_transitions=0)
