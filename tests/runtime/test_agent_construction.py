"""Building an Agent of plain-function tools reuses what an earlier Agent made of the same, unchanged function."""

from __future__ import annotations

import asyncio
import functools
import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Agent, ScriptedModel, TextPart, Tool, tool
from loopwright.data.events import ModelResponse
from loopwright.runtime.tools import ArgumentsError, as_tool

MODEL = ScriptedModel([ModelResponse(parts=(TextPart(text="ok"),))])


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the tools whose input model was built (a pydantic model class), in order."""
    made: list[str] = []
    build = Tool._build_input_model

    def counted(self: Tool, *args: Any, **kwargs: Any) -> Any:
        made.append(self.name)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(Tool, "_build_input_model", counted)
    yield made


def agent(*tools: Callable[..., Any] | Tool) -> Agent:
    return Agent(name="a", model=MODEL, tools=list(tools))


def make_lookup() -> Callable[..., Any]:
    """A fresh function object each call (no earlier Agent has seen it)."""

    def lookup(city: str, days: int = 3) -> str:
        """Look up the weather.

        Args:
            city: The city.
            days: How many days ahead.
        """
        return f"{city}:{days}"

    return lookup


def same_tool(made: Tool, fn: Callable[..., Any]) -> None:
    """``made`` is what a fresh ``Tool(fn)`` is: the spec, the validation shortcut, the flags."""
    fresh = Tool(fn)
    assert made.fn is fn
    assert made.spec == fresh.spec
    assert (made.name, made.description, made.is_async, made.ctx_param, made.plain) == (
        fresh.name,
        fresh.description,
        fresh.is_async,
        fresh.ctx_param,
        fresh.plain,
    )
    assert made.input_model.model_json_schema() == fresh.input_model.model_json_schema()


def test_a_second_agent_does_not_rebuild_the_input_model(builds: list[str]) -> None:
    """The fault: every Agent made each plain function a Tool again, a pydantic model built each
    time (~0.5 ms a function)."""
    lookup = make_lookup()
    first = agent(lookup)
    second = agent(lookup)
    assert builds == ["lookup"]
    assert second.tool_specs == first.tool_specs
    assert second.tools["lookup"] is not first.tools["lookup"]  # each agent its own Tool, as before
    assert second.tools["lookup"].fn is lookup
    agent(lookup).replace(instruction="per user")
    assert builds == ["lookup"]


def test_the_reused_tool_is_the_tool_a_fresh_build_makes() -> None:
    lookup = make_lookup()
    agent(lookup)
    again = agent(lookup).tools["lookup"]
    same_tool(again, lookup)
    assert again.validate({"city": "Oslo"}) == {"city": "Oslo", "days": 3}
    with pytest.raises(ArgumentsError, match=r"invalid arguments for tool 'lookup': days: Input should be"):
        again.validate({"city": "Oslo", "days": "soon"})
    assert asyncio.run(again.invoke({"city": "Oslo", "days": 1}, None)) == "Oslo:1"


def test_a_different_function_of_the_same_name_is_not_confused(builds: list[str]) -> None:
    first = make_lookup()
    agent(first)

    def lookup(city: str, metric: bool) -> str:
        """Look up the weather, in metric units or not."""
        return city

    other = agent(lookup).tools["lookup"]
    assert builds == ["lookup", "lookup"]
    same_tool(other, lookup)
    assert set(other.spec.input_schema["properties"]) == {"city", "metric"}


@pytest.mark.parametrize(
    ("change", "check"),
    [
        (lambda f: setattr(f, "__doc__", "Tell the forecast."), lambda t: t.description == "Tell the forecast."),
        (lambda f: f.__annotations__.__setitem__("days", float), lambda t: t.plain is None),
        (lambda f: setattr(f, "__annotations__", {"city": int, "days": int}), lambda t: "integer" in str(t.spec)),
        (lambda f: setattr(f, "__defaults__", (7,)), lambda t: t.validate({"city": "x"})["days"] == 7),
        (lambda f: setattr(f, "__name__", "forecast"), lambda t: t.name == "forecast"),
        (lambda f: setattr(f, "__code__", make_async().__code__), lambda t: t.is_async),
    ],
    ids=["docstring", "annotation-in-place", "annotations", "defaults", "name", "code"],
)
def test_a_function_changed_after_its_first_agent_is_built_again(
    builds: list[str], change: Callable[[Any], None], check: Callable[[Tool], bool]
) -> None:
    lookup = make_lookup()
    before = agent(lookup).tools["lookup"].spec
    change(lookup)
    after = as_tool(lookup)
    again = as_tool(lookup)  # and the new shape is kept in turn
    assert len(builds) == 2
    assert check(after) and again.spec == after.spec
    if not after.is_async:  # (the code swap keeps the parameters, and so the spec)
        assert after.spec != before
    same_tool(after, lookup)


def make_async() -> Callable[..., Any]:
    async def lookup(city: str, days: int = 3) -> str:
        """Look up the weather."""
        return city

    return lookup


def test_a_wrapped_function_is_rebuilt_when_the_function_it_wraps_changes(builds: list[str]) -> None:
    """``functools.wraps``: the schema comes from the wrapped function (``inspect.signature``
    follows ``__wrapped__``), so a change there counts too."""
    inner = make_lookup()

    @functools.wraps(inner)
    def logged(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    agent(logged)
    agent(logged)
    assert len(builds) == 1
    inner.__defaults__ = (9,)
    assert as_tool(logged).validate({"city": "x"})["days"] == 9
    assert len(builds) == 2


def test_the_cache_does_not_keep_a_function_alive() -> None:
    lookup = make_lookup()
    agent(lookup)
    gone = weakref.ref(lookup)
    del lookup
    gc.collect()
    assert gone() is None


def test_callables_other_than_functions_are_still_made_tools(builds: list[str]) -> None:
    """A bound method is a new object at each attribute read: it is built each time, as before."""

    class Weather:
        def lookup(self, city: str) -> str:
            """Look up the weather."""
            return city

    weather = Weather()
    made = agent(weather.lookup).tools["lookup"]
    assert list(made.spec.input_schema["properties"]) == ["city"]
    assert agent(weather.lookup).tools["lookup"].spec == made.spec
    decorated = tool(make_lookup())
    assert agent(decorated).tools["lookup"] is decorated


def test_a_bad_function_raises_each_time_and_is_not_remembered() -> None:
    def lookup(city) -> str:  # type: ignore[no-untyped-def]
        """Look up the weather."""
        return str(city)

    for _ in range(2):
        with pytest.raises(Exception, match="has no type annotation"):
            agent(lookup)
    lookup.__annotations__["city"] = str
    assert list(agent(lookup).tool_specs[0].input_schema["properties"]) == ["city"]


CHANGES = st.sampled_from(["doc", "annotation", "default", "name", "nothing", "kwdefault"])


@settings(max_examples=40, deadline=None)
@given(st.lists(CHANGES, max_size=6), st.sampled_from([str, int, float, bool, list[int]]))
def test_whatever_is_changed_the_tool_is_what_a_fresh_build_makes(changes: list[str], kind: type) -> None:
    """A property: after any sequence of changes to a function, the Agent's tool equals ``Tool(fn)``."""

    def lookup(city: str, days: int = 3, *, unit: str = "C") -> str:
        """Look up the weather."""
        return city

    same_tool(agent(lookup).tools["lookup"], lookup)
    for i, change in enumerate(changes):
        if change == "doc":
            lookup.__doc__ = f"Look up the weather, version {i}."
        elif change == "annotation":
            lookup.__annotations__["days"] = kind
        elif change == "default":
            lookup.__defaults__ = (i,)
        elif change == "kwdefault":
            lookup.__kwdefaults__ = {"unit": f"K{i}"}
        elif change == "name":
            lookup.__name__ = f"lookup_{i}"
        same_tool(next(iter(agent(lookup).tools.values())), lookup)
