"""What every part of loopwright.eval stands on: the error of a set that cannot be used, a
:class:`Score`, what one run of a case produced (:class:`Observed`), and ``module:attr`` names."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, WithJsonSchema

from ..data.errors import ConfigurationError
from ..data.events import Event, ToolCalled
from ..data.result import RunResult
from ..models.base import Model


class EvalSetError(ConfigurationError):
    """An eval set that cannot be used: a file that does not validate (each problem on a line of
    its own, ``file:line: field: what``), or a set that does not fit the agent it is run on."""


class Score(BaseModel):
    """One evaluator's verdict on one run: ``value`` in [0, 1] and ``passed``; both None when
    the evaluator could not judge (a judge model that failed): such a run never passes."""

    model_config = ConfigDict(extra="forbid")
    evaluator: str = ""
    value: float | None
    passed: bool | None
    reason: str = ""
    details: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def judged(self) -> bool:
        return self.passed is not None


def resolve(target: str) -> Any:
    """The object ``module:attr`` names (a LookupError saying why when it cannot be found)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise LookupError(f"{target!r} is not module:attr; name the object, e.g. mychecks:is_refund")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"cannot import {module_name!r} for {target!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise LookupError(f"module {module_name!r} has no attribute {attr!r} (named by {target!r})")
        obj = getattr(obj, part)
    return obj


def _name_of(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


Ref = Annotated[
    Any,
    PlainSerializer(lambda v: v if v is None or isinstance(v, str) else _name_of(v), return_type=Any),
    WithJsonSchema({"type": "string", "description": "module:attr naming the object"}),
]
"""A Python object given in code, or ``"module:attr"`` naming it in a file."""


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call a run made."""

    name: str
    args: dict[str, Any]

    def label(self) -> str:
        import json

        return f"{self.name}({', '.join(f'{k}={json.dumps(v, default=str)}' for k, v in self.args.items())})"


@dataclass
class Observed:
    """What running one case (an :class:`~loopwright.eval.EvalCase`) once produced: the
    results of its turns (or the ``error`` that stopped it), and the tool calls and events of
    all its turns."""

    case: Any
    results: list[RunResult] = field(default_factory=list)
    error: str | None = None
    agent: Any = None
    cost_usd: float | None = None

    @property
    def result(self) -> RunResult | None:
        return self.results[-1] if self.results else None

    @property
    def events(self) -> list[Event]:
        return [e for r in self.results for e in r.events]

    @property
    def calls(self) -> list[Call]:
        return [Call(e.name, dict(e.args)) for e in self.events if isinstance(e, ToolCalled)]


@dataclass
class EvalContext:
    """What evaluators may need beside the run: the default judge model."""

    judge: Model | None = None


__all__ = ["Call", "EvalContext", "EvalSetError", "Observed", "Ref", "Score", "resolve"]
