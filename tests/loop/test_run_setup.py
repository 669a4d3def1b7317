"""A run's set-up made cheaper (issue 38, third round) and still the same: ``fresh_run_state``
makes the ``RunState`` the dataclass makes, field for field; run ids are drawn ahead yet never
shared (not between runs, threads, nor a process and its fork); a run with and without options
starts from the same state."""

from __future__ import annotations

import os
import threading
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright import Agent, Limits, Runner, ScriptedModel
from loopwright.data.run_state import FRESH_FIELDS, RunState, fresh_run_state
from loopwright.loop.options import new_run_id

_NAMES = st.text(min_size=1, max_size=8)


@given(
    run_id=_NAMES,
    agent=_NAMES,
    active=_NAMES,
    text=st.text(max_size=20),
    state=st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    timeout=st.none() | st.floats(min_value=1, max_value=100),
)
def test_a_fresh_run_state_is_the_dataclasss_own(
    run_id: str, agent: str, active: str, text: str, state: dict[str, Any], timeout: float | None
) -> None:
    limits = Limits(timeout_s=timeout)
    values = (run_id, agent, text, "start", state, ["start"], active, [], {}, limits)
    made = fresh_run_state(*values)
    by_name = RunState(**dict(zip(FRESH_FIELDS, values, strict=True)))
    for f in fields(RunState):
        assert getattr(made, f.name) == getattr(by_name, f.name), f.name
    # the defaults made per state are its own (never one list or dict shared by two runs)
    other = fresh_run_state(*values)
    for f in fields(RunState):
        value = getattr(made, f.name)
        if isinstance(value, (list, dict)) and f.name not in FRESH_FIELDS:
            assert value is not getattr(other, f.name), f.name
    assert made.to_json() == by_name.to_json()


def _runner() -> Runner:
    return Runner(Agent(name="a", model=ScriptedModel(["done"], name="m")))


def test_a_run_without_options_starts_as_one_with_them() -> None:
    runner = _runner()
    bare = runner.new_run("hi")
    given_options = runner.new_run("hi", run_id="r1", state={}, agent="a")
    for f in fields(RunState):
        if f.name not in ("run_id", "deadline"):
            assert getattr(bare, f.name) == getattr(given_options, f.name), f.name
    assert bare.deadline is not None and given_options.deadline is not None
    assert abs(bare.deadline - given_options.deadline) < 5
    limits = runner.agent.limits
    assert limits.timeout_s is not None
    assert bare.deadline < bare.deadline + limits.salvage_reserve  # the reserve kept for salvage
    with pytest.raises(Exception, match="unknown run option 'colour'"):
        runner.new_run("hi", colour="red")  # type: ignore[call-arg]


def test_run_ids_are_drawn_ahead_and_never_handed_out_twice() -> None:
    got: list[str] = []
    lock = threading.Lock()

    def draw() -> None:
        mine = [new_run_id() for _ in range(500)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == len(set(got)) == 2000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in got)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_process_draws_run_ids_of_its_own() -> None:
    new_run_id()  # the parent holds ids drawn ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, "".join(new_run_id() for _ in range(8)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    os.waitpid(pid, 0)
    theirs = {child[i : i + 32] for i in range(0, len(child), 32)}
    ours = {new_run_id() for _ in range(8)}
    assert len(theirs) == 8 and not theirs & ours
