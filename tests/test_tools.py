"""Functions become tools: schema from type hints, description from the docstring."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel

from loopwright import ConfigurationError, RunContext, Tool, tool
from loopwright.tools import ArgumentsError, to_json_value


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
