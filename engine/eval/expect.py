"""What a case expects of a run's tool calls, canned tool answers, and recorded replies."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..data.events import ModelResponse
from .base import Ref

_STRICT = ConfigDict(extra="forbid")


class ExpectedCall(BaseModel):
    """One tool call of the expected trajectory.

    ``args`` compares by ``args_match``: ``"exact"`` (the call's arguments are these),
    ``"subset"`` (the call has at least these, with these values) or ``"any"`` (the name
    alone; also what no ``args`` means). ``predicate`` (a function of the call's arguments,
    or ``"module:function"`` naming one) must also hold when given.
    """

    model_config = _STRICT
    name: str
    args: dict[str, JsonValue] | None = None
    args_match: Literal["exact", "subset", "any"] = "exact"
    predicate: Ref = None
    result: JsonValue = Field(default=None, description="what the tool answered when the case was recorded")

    def label(self) -> str:
        if self.args is None or self.args_match == "any":
            return f"{self.name}(…)"
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in self.args.items())
        return f"{self.name}({shown}{', …' if self.args_match == 'subset' else ''})"


class ToolMock(BaseModel):
    """A canned answer for a tool: calls of ``tool`` whose arguments include ``args`` (all of
    them when ``args`` is None) get ``result`` (or fail with ``error``) instead of running."""

    model_config = _STRICT
    tool: str
    args: dict[str, JsonValue] | None = None
    result: JsonValue = None
    error: str | None = None


class Replay(BaseModel):
    """A recorded run's model replies, by agent, and what each tool call answered (by call id):
    a replayed run gets these replies, as long as its tools answer as they did."""

    model_config = _STRICT
    replies: dict[str, list[ModelResponse]]
    results: dict[str, JsonValue] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list, description="call ids whose recorded result was an error")


__all__ = ["ExpectedCall", "Replay", "ToolMock"]
