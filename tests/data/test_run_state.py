"""A run state saved at any point of a run, with any features, loads back equal; its saved form is versioned, lean."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, ConfigurationError, Limits, Runner, RunState, ScriptedModel, ToolCall, tool
from loopwright.data.run_state import SAVED_FIELDS, SCHEMA_VERSION
from loopwright.features import machine_for
from loopwright.testing import scripted
from tests.example_feature import DOUBLE_CHECK
from tests.helpers import add


@tool(requires_confirmation=True)
def wire(amount: int) -> str:
    """Send money (asks a person first)."""
    return f"sent {amount}"


def call(name: str, **args: Any) -> list[ToolCall]:
    return [ToolCall(name=name, args=args)]


def go(target: str) -> list[ToolCall]:
    return call("transfer_to_agent", agent_name=target, task="carry on")


# loop detection is off here: these runs are about the other features (see test_feature_loop_detection)
LIMITS = Limits(retry_backoff_s=0, max_iterations=6, max_repeated_calls=None)


def core() -> Agent:
    return scripted(
        Agent(name="core", model=ScriptedModel([]), tools=[add], limits=LIMITS),
        [call("add", a=1, b=2), call("add", a=3, b=4), "seven"],
    )


def multi_agent() -> Agent:
    helper = Agent(name="helper", model=ScriptedModel([]), tools=[add], description="adds")
    root = Agent(name="root", model=ScriptedModel([]), sub_agents=[helper], limits=LIMITS)
    return scripted(root, [go("helper"), call("add", a=1, b=2), go("root"), "three"])


def waiting() -> Agent:
    return scripted(
        Agent(name="waits", model=ScriptedModel([]), tools=[add, wire], limits=LIMITS),
        [call("add", a=1, b=2), call("wire", amount=3), "sent"],
    )


def both() -> Agent:
    helper = Agent(name="helper", model=ScriptedModel([]), tools=[add, wire], description="pays")
    root = Agent(name="root", model=ScriptedModel([]), sub_agents=[helper], limits=LIMITS)
    return scripted(root, [go("helper"), call("add", a=1, b=2), call("wire", amount=3), "paid"])


def example() -> Agent:
    return core().replace(extensions=[DOUBLE_CHECK])


def everything() -> Agent:
    return both().replace(extensions=[DOUBLE_CHECK])


COMBINATIONS: dict[str, tuple[Callable[[], Agent], frozenset[str]]] = {
    "core": (core, frozenset()),
    "multi_agent": (multi_agent, frozenset({"multi_agent"})),
    "waiting": (waiting, frozenset({"waiting"})),
    "both": (both, frozenset({"multi_agent", "waiting"})),
    "example": (example, frozenset({"double_check"})),
    "everything": (everything, frozenset({"multi_agent", "waiting", "double_check"})),
}


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_each_combination_has_the_features_it_should(combination: str) -> None:
    make, features = COMBINATIONS[combination]
    agent = make()
    assert machine_for(agent).features == features
    result = Runner(agent).run_sync("go", state={"looks": 2})
    assert result.outcome in ("final", "suspended")
    assert set(result.run_state.features) == features


async def stepped(agent: Agent, steps: int, text: str = "go") -> RunState:
    """A run of ``agent`` taken ``steps`` transitions in (fewer if it ends or waits first)."""
    run = Runner(agent).start(text, state={"looks": 2, "note": "saved"})
    for _ in range(steps):
        if run.done or run.waiting:
            break
        await run.step()
    return run.state


def assert_same_saved_fields(loaded: RunState, rs: RunState) -> None:
    for name in SAVED_FIELDS:
        if name == "features":
            continue
        assert getattr(loaded, name) == getattr(rs, name), f"{name} changed on the round trip"
    assert loaded.features.keys() == rs.features.keys()
    for feature, part in rs.features.items():
        assert dataclasses.is_dataclass(part) and not isinstance(part, type)
        assert type(loaded.features[feature]) is type(part), feature
        assert loaded.features[feature] == part, f"slice {feature!r} changed on the round trip"
        assert dataclasses.asdict(loaded.features[feature]) == dataclasses.asdict(part)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(combination=st.sampled_from(sorted(COMBINATIONS)), steps=st.integers(0, 40))
def test_a_run_saved_at_any_point_loads_back_equal(combination: str, steps: int) -> None:
    make, features = COMBINATIONS[combination]
    rs = asyncio.run(stepped(make(), steps))
    assert set(rs.features) == features
    saved = rs.to_json()
    loaded = RunState.from_json(saved)
    assert_same_saved_fields(loaded, rs)
    assert loaded.to_json() == saved  # and it saves the same again
    assert loaded.request is None and loaded.turn_limits is None
    raw = json.loads(saved)
    assert set(raw) == set(SAVED_FIELDS)
    assert not {"limits", "turn_limits", "request"} & set(raw)


def test_the_saved_fields_are_all_but_the_agents_and_the_request() -> None:
    every = {f.name for f in dataclasses.fields(RunState)}
    assert set(SAVED_FIELDS) == every - {"limits", "turn_limits", "request", "legs", "model_in_use"}
    assert "schema_version" in SAVED_FIELDS and "features" in SAVED_FIELDS


def test_the_schema_version_is_saved() -> None:
    rs = asyncio.run(stepped(core(), 3))
    assert json.loads(rs.to_json())["schema_version"] == SCHEMA_VERSION == rs.schema_version


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 0])
def test_another_schema_version_is_refused_naming_both(version: int) -> None:
    raw = json.loads(asyncio.run(stepped(core(), 3)).to_json())
    raw["schema_version"] = version
    with pytest.raises(ConfigurationError) as err:
        RunState.from_json(json.dumps(raw))
    message = str(err.value)
    assert f"saved with schema version {version}" in message
    assert f"reads version {SCHEMA_VERSION}" in message


def test_a_newer_schema_with_another_shape_is_refused_by_version() -> None:
    """The version is checked before the rest is read: a state saved by a newer loopwright whose
    fields changed is refused naming both versions, not with a validation error on a field."""
    raw = json.loads(asyncio.run(stepped(core(), 3)).to_json())
    raw["schema_version"] = SCHEMA_VERSION + 1
    raw["history"] = raw.pop("messages")
    with pytest.raises(ConfigurationError) as err:
        RunState.from_json(json.dumps(raw))
    assert f"saved with schema version {SCHEMA_VERSION + 1}" in str(err.value)
    assert f"reads version {SCHEMA_VERSION}" in str(err.value)


def test_a_state_saved_without_a_schema_version_is_refused_by_version() -> None:
    raw = json.loads(asyncio.run(stepped(core(), 3)).to_json())
    del raw["schema_version"]
    with pytest.raises(ConfigurationError) as err:
        RunState.from_json(json.dumps(raw))
    assert "schema version" in str(err.value) and f"reads version {SCHEMA_VERSION}" in str(err.value)


def test_the_request_is_not_saved_with_the_history() -> None:
    """preprocess builds the request from the history; saving it would store the history twice."""

    async def counts() -> list[tuple[str, int]]:
        run = Runner(core()).start("unique-input-7f3a")
        seen = []
        for _ in range(4):
            await run.step()
            seen.append((run.stage, run.state.to_json().count(b"unique-input-7f3a")))
            if run.stage == "reason":
                assert run.state.request is not None and "request" not in json.loads(run.state.to_json())
        return seen

    seen = asyncio.run(counts())
    assert len({count for _, count in seen}) == 1, f"the input is saved more often once a request is built: {seen}"


def test_the_user_input_appears_once_in_the_saved_json() -> None:
    """One message, mid-way through its first pass: the history holds it once (the run keeps its
    input besides); the request, which holds the history again, is not saved."""

    async def mid_way() -> RunState:
        run = Runner(core()).start("unique-input-7f3a")
        while run.stage != "act":
            await run.step()
        return run.state

    rs = mid_way_state = asyncio.run(mid_way())
    assert rs.request is not None and len(mid_way_state.messages) == 2
    saved = rs.to_json()
    # the run's input, and the history's first turn: the request (which holds the history too) is not saved
    assert saved.count(b"unique-input-7f3a") == 2, (
        f"the user's text is saved {saved.count(b'unique-input-7f3a')} times: "
        + ", ".join(k for k, v in json.loads(saved).items() if "unique-input-7f3a" in json.dumps(v))
    )
