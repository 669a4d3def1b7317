"""What a run hands back dumps the way pydantic's own objects do, ``exclude_unset`` included:
the engine shares one fields-set between many of its objects (``loopwright.data.build``), and
pydantic's serializer takes a fields-set only when it is a ``set``. Before, every message of a
run raised ``PydanticSerializationError`` ("'AllFieldsSet' object is not an instance of 'set'")
on ``model_dump_json(exclude_unset=True)``."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright import Agent, Limits, Message, Runner, ScriptedModel, TextPart, ToolCall, tool
from loopwright.data.build import all_fields, trusted


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _run(calls: int) -> list[BaseModel]:
    script: list[object] = [[ToolCall(id=f"c{i}", name="add", args={"a": i, "b": 1})] for i in range(calls)]
    agent = Agent(
        name="adder", model=ScriptedModel([*script, "done"]), tools=[add], limits=Limits(max_iterations=calls + 2)
    )
    result = Runner(agent).run_sync("add")
    assert result.outcome == "final"
    return [*result.messages, *result.events, result.usage]


def _dumps_as_validated(obj: BaseModel) -> None:
    """Both dumps work; the full one validates back to the object; the one without unset
    fields holds the object's set fields, as the full one has them (JSON and Python alike)."""
    full = obj.model_dump()
    assert type(obj).model_validate(full) == obj
    assert json.loads(obj.model_dump_json()) == json.loads(type(obj).model_validate(full).model_dump_json())
    given = obj.model_dump(exclude_unset=True)
    assert set(given) == set(obj.model_fields_set) & set(full)
    assert json.loads(obj.model_dump_json(exclude_unset=True)).keys() == given.keys()


@settings(max_examples=15)
@given(st.integers(0, 4))
def test_everything_a_run_hands_back_dumps_with_and_without_unset_fields(calls: int) -> None:
    for obj in _run(calls):
        _dumps_as_validated(obj)


def test_a_trusted_object_dumps_as_a_validated_one() -> None:
    text = trusted(TextPart, **{name: f.default for name, f in TextPart.model_fields.items()} | {"text": "hi"})
    assert text.model_dump_json(exclude_unset=True) == TextPart(**text.model_dump()).model_dump_json()


def test_a_shared_fields_set_cannot_be_changed_in_place_but_a_copy_can() -> None:
    shared = all_fields(Message)
    with pytest.raises(TypeError, match="shared"):
        shared.add("not_a_field")
    with pytest.raises(TypeError, match="shared"):
        shared.clear()
    shared.add("role")  # (a name already in it: nothing changes, as pydantic's own add)
    own = copy.copy(shared)
    own.add("extra")
    assert type(own) is set and "extra" not in shared
