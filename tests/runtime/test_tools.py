"""Functions become tools: schema from type hints, description from the docstring."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from loopwright import ConfigurationError, RunContext, Tool, tool
from loopwright.runtime.tools import ArgumentsError, to_json_value


def test_schema_and_description_from_the_function() -> None:
    @tool
    def search(
        query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", ctx: RunContext | None = None
    ) -> list[str]:
        """Search the catalogue.

        Returns matching titles.

        Args:
            query: Words to look for.
            limit: Most results to return.
                At least one.
        """
        return []

    assert search.name == "search"
    assert search.description == "Search the catalogue.\n\nReturns matching titles."
    schema = search.spec.input_schema
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["query"] == {"description": "Words to look for.", "title": "Query", "type": "string"}
    assert schema["properties"]["limit"]["description"] == "Most results to return. At least one."
    assert schema["properties"]["mode"]["enum"] == ["fast", "deep"]
    assert "ctx" not in schema["properties"] and search.ctx_param == "ctx"


def test_arguments_are_validated_and_coerced_by_pydantic() -> None:
    class Point(BaseModel):
        x: float
        y: float

    @tool(name="dist")
    def distance(a: Point, b: Point) -> float:
        """Distance between points."""
        return float(((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)

    kwargs = distance.validate({"a": {"x": 0, "y": 0}, "b": {"x": "3", "y": 4}})
    assert asyncio.run(distance.invoke(kwargs, None)) == 5.0
    with pytest.raises(ArgumentsError, match=r"invalid arguments for tool 'dist': b\.y: Field required"):
        distance.validate({"a": {"x": 0, "y": 0}, "b": {"x": 1}})


def test_annotated_constraints_are_in_the_schema_and_enforced() -> None:
    """``Annotated[int, Field(gt=0)]``: the model is told (the schema) and held to it (a
    negative count is an error it reads); they were dropped with the hints' extras."""

    @tool
    def take(count: Annotated[int, Field(gt=0, le=10)], label: str) -> int:
        """Take some."""
        return count

    assert take.spec.input_schema["properties"]["count"]["exclusiveMinimum"] == 0
    assert take.plain is None  # a constraint: every call is validated
    with pytest.raises(ArgumentsError, match=r"count: Input should be greater than 0 \(got -1\)"):
        take.validate({"count": -1, "label": "x"})
    with pytest.raises(ArgumentsError, match=r"count: Input should be less than or equal to 10"):
        take.validate({"count": 11, "label": "x"})


def test_plain_arguments_of_their_exact_types_skip_validation_and_others_do_not() -> None:
    """A tool whose parameters are all plain required str/int/float/bool takes arguments of
    exactly those types as they are (a copy: what validation gives back); anything else goes
    through pydantic, coercion and errors included."""

    @tool
    def mix(n: int, x: float, s: str, b: bool) -> str:
        """Mix."""
        return ""

    assert mix.plain == {"n": int, "x": float, "s": str, "b": bool}
    given = {"n": 1, "x": 2.5, "s": "a", "b": True}
    kwargs = mix.validate(given)
    assert kwargs == given and kwargs is not given
    assert mix.validate({"n": 1, "x": 2, "s": "a", "b": True})["x"] == 2.0  # an int for a float: coerced
    assert type(mix.validate({"n": 1, "x": 2, "s": "a", "b": True})["x"]) is float
    with pytest.raises(ArgumentsError, match=r"n: Input should be a valid integer"):
        mix.validate({"n": True, "x": 1.0, "s": "a", "b": True} | {"n": "one"})
    with pytest.raises(ArgumentsError, match=r"extra: Extra inputs are not permitted"):
        mix.validate({"n": 1, "x": 1.0, "s": "a", "extra": True})
    with pytest.raises(ArgumentsError, match=r"b: Field required"):
        mix.validate({"n": 1, "x": 1.0, "s": "a"})

    @tool
    def with_default(n: int, m: int = 3) -> int:
        """Defaults are filled in by validation."""
        return n + m

    assert with_default.plain is None and with_default.validate({"n": 1}) == {"n": 1, "m": 3}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Tool(lambda: 1), "tool name '<lambda>' is not allowed"),
        (lambda: tool(_undocumented), "tool '_undocumented' has no description"),
        (lambda: tool(_star_args), "parameter 'items' is \\*args"),
        (lambda: tool(timeout_s=0)(_documented), "timeout_s must be positive"),
        (lambda: Tool("not callable"), "a tool must be a function"),  # type: ignore[arg-type]
    ],
)
def test_bad_tool_definitions_say_what_to_do(make: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()  # type: ignore[operator]


def _undocumented(x: int) -> int:
    return x


def _star_args(*items: int) -> int:
    """Sum."""
    return sum(items)


def _documented() -> None:
    """Does nothing."""


def test_return_values_become_json() -> None:
    class Out(BaseModel):
        n: int

    assert to_json_value(Out(n=1)) == {"n": 1}
    assert to_json_value({"when": {1, 2}}) == {"when": [1, 2]}
    assert to_json_value(3) == 3
    assert to_json_value(object()).startswith("<object object")
