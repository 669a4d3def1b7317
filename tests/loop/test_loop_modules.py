"""The loop floor's names have one public home, and its Runner is the RunHost a Run reads."""

from __future__ import annotations

import asyncio
import re

import loopwright
import loopwright.loop.options
import loopwright.loop.run
import loopwright.loop.runner
import loopwright.loop.stream
from loopwright import Runner
from tests.helpers import agent


def test_the_loop_names_are_one_object_each_at_their_public_home() -> None:
    assert loopwright.loop.runner.Run is loopwright.loop.run.Run is loopwright.Run
    assert loopwright.loop.runner.RunStream is loopwright.loop.stream.RunStream is loopwright.RunStream
    assert loopwright.loop.runner.Runner is loopwright.Runner
    assert loopwright.loop.options.RunOptions is loopwright.loop.runner.RunOptions
    for cls in (loopwright.Run, loopwright.RunStream, loopwright.Runner):
        assert cls.__module__ == "loopwright", cls  # the path users import them from


def test_a_runner_gives_a_run_what_run_host_names() -> None:
    runner = Runner(agent(["hi"]))
    for name in ("agent", "tree", "machine", "observers", "handlers"):
        assert hasattr(runner, name), name
    protocol = {n for n in vars(loopwright.loop.run.RunHost) if not n.startswith("_")}
    assert protocol <= set(dir(runner)), protocol - set(dir(runner))
    assert runner.handlers[runner.machine.initial] is runner.handler(runner.machine.initial)


def test_a_default_run_id_is_32_hex_digits_and_new_each_run() -> None:
    runner = Runner(agent(["a", "b"]))
    ids = [asyncio.run(runner.run("go")).run_id for _ in range(2)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and ids[0] != ids[1]
    assert runner.active_runs == []
