"""Eval cases and sets: what to ask an agent and what to expect back, as data.

An :class:`EvalSet` is a list of :class:`EvalCase` plus what applies to all of them (mocks,
evaluators, the pass-rate threshold). Both are pydantic models: a set round-trips through YAML
or JSON (:meth:`EvalSet.load`, :meth:`EvalSet.save`), and :func:`eval_set_schema` is the JSON
schema of its file (published as ``docs/reference/eval-set.schema.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..data.values import clean_text
from .base import EvalSetError
from .evaluators import EvaluatorSpec
from .expect import ExpectedCall, Replay, ToolMock
from .files import load_set, save_set

_STRICT = ConfigDict(extra="forbid")


class EvalCase(BaseModel):
    """One case: the user's ``input`` (or a multi-turn ``conversation`` of user messages), the
    session ``state`` it starts with, what to expect (``expected_calls``, ``expected_response``,
    ``rubric`` for a judge), its ``mocks``, per-case ``limits`` (fields of
    :class:`~loopwright.Limits`), its own ``evaluators`` (each replaces the set's evaluators of
    its kind) and ``tags``."""

    model_config = _STRICT
    name: str
    input: str | None = None
    conversation: list[str] | None = None
    state: dict[str, JsonValue] = Field(default_factory=dict)
    expected_calls: list[ExpectedCall] | None = None
    expected_response: str | None = None
    rubric: str | None = None
    mocks: list[ToolMock] = Field(default_factory=list)
    mock_all: bool | None = None
    limits: dict[str, JsonValue] = Field(default_factory=dict)
    evaluators: list[EvaluatorSpec] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    replay: Replay | None = None

    _functions = field_validator("evaluators", mode="before")(lambda items: _functions_as_checks(items))
    _clean = field_validator("input", "expected_response", "rubric")(lambda t: None if t is None else clean_text(t))
    _clean_turns = field_validator("conversation")(lambda ts: None if ts is None else [clean_text(t) for t in ts])

    @model_validator(mode="after")
    def _one_input(self) -> EvalCase:
        if (self.input is None) == (self.conversation is None):
            raise ValueError("give the case exactly one of `input` (a message) or `conversation` (a list of them)")
        if self.conversation is not None and not self.conversation:
            raise ValueError("`conversation` is empty; give at least one user message")
        if self.rubric is not None and not self.rubric.strip():
            raise ValueError("`rubric` is blank; give the judge something to grade against, or leave it out")
        return self

    @model_validator(mode="after")
    def _own_checks_can_fail(self) -> EvalCase:
        found: list[Problem] = []
        for j, spec in enumerate(self.evaluators):
            if not spec.applies(self):
                why = f"case {self.name!r}: {spec.label()} has nothing to compare against; give the case {spec.wants()}"
                found.append((("evaluators", j), why))
        found += case_problems(self.evaluators, self, ())
        refuse(found, self)
        return self

    @property
    def turns(self) -> list[str]:
        """The user messages of the case, in order."""
        return list(self.conversation) if self.conversation is not None else [self.input or ""]


def _functions_as_checks(items: Any) -> Any:
    """Plain functions in an ``evaluators`` list are function evaluators."""
    if not isinstance(items, list):
        return items
    return [{"kind": "function", "function": i} if callable(i) and not isinstance(i, BaseModel) else i for i in items]


class Prices(BaseModel):
    """USD per million tokens, to put a cost on each run (none: no cost is shown)."""

    model_config = _STRICT
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


DEFAULT_EVALUATORS: list[dict[str, Any]] = [{"kind": "trajectory"}, {"kind": "response"}, {"kind": "judge"}]
"""What a set without ``evaluators`` checks; each applies only to cases that give what it needs
(``expected_calls``, ``expected_response``, ``rubric``)."""


class EvalSet(BaseModel):
    """Cases and what applies to all of them. ``threshold``: the share of runs (all cases, all
    repeats) that must pass for the set to pass; ``mock_all``: calls of a tool no mock answers
    fail instead of running for real (a case may say otherwise)."""

    model_config = _STRICT
    name: str = "eval"
    description: str = ""
    cases: Annotated[list[EvalCase], Field(min_length=1)]
    evaluators: list[EvaluatorSpec] = Field(default_factory=lambda: list(_defaults()))
    mocks: list[ToolMock] = Field(default_factory=list)
    mock_all: bool = False
    threshold: float = Field(default=1.0, ge=0, le=1)
    prices: Prices | None = None

    _functions = field_validator("evaluators", mode="before")(lambda items: _functions_as_checks(items))

    @model_validator(mode="after")
    def _unique_names(self) -> EvalSet:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"two cases are named {case.name!r}; case names must be unique")
            seen.add(case.name)
        return self

    @model_validator(mode="after")
    def _checks_can_fail(self) -> EvalSet:
        found = set_problems(self, self.evaluators, explicit="evaluators" in self.model_fields_set)
        if self.threshold == 0:
            found.insert(0, (("threshold",), "threshold 0 passes the set whatever its runs do; give a share above 0"))
        refuse(found, self)
        return self

    @classmethod
    def load(cls, path: str | Path) -> EvalSet:
        """Read a set from a ``.yaml``/``.yml`` or ``.json`` file. A file that does not validate
        raises :class:`EvalSetError` with one line per problem: ``file:line: field: what``."""
        return load_set(cls, Path(path))

    def save(self, path: str | Path) -> Path:
        """Write the set to ``path`` (YAML for ``.yaml``/``.yml``, else JSON); the path."""
        return save_set(self, Path(path))

    def case(self, name: str) -> EvalCase:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(f"no case {name!r} in set {self.name!r}; its cases: {', '.join(c.name for c in self.cases)}")


Problem = tuple[tuple[str | int, ...], str]
"""Where in the set (a pydantic location) and what: a check that could not fail."""


def case_problems(specs: Sequence[Any], case: EvalCase, where: tuple[str | int, ...]) -> list[Problem]:
    """Each check of ``specs`` that applies to ``case`` but could not fail on it (an empty
    ``expected_calls`` under ``in_order``, say), at the case's field at fault."""
    found: list[Problem] = []
    for spec in specs:
        if spec.applies(case) and (problem := spec.problem(case)) is not None:
            field, why = problem
            found.append(((*where, field), f"case {case.name!r}: {why}"))
    return found


def set_problems(eval_set: EvalSet, specs: Sequence[Any], *, explicit: bool, own: bool = True) -> list[Problem]:
    """The checks ``specs`` (the set's, or ones given beside it) that could not fail: one with
    nothing to compare against in any case it is applied to (``explicit``: a check the user
    named; the default checks apply only where a case gives what they need), or one that applies
    to a case and could not fail there. ``own``: a case's own evaluators replace ``specs`` of
    their kind (as the set's are replaced; checks given to ``evaluate`` are not)."""
    found: list[Problem] = []
    for j, spec in enumerate(specs):
        used = [
            (i, c) for i, c in enumerate(eval_set.cases) if not own or spec.kind not in {e.kind for e in c.evaluators}
        ]
        if explicit and used and not any(spec.applies(c) for _, c in used):
            names = ", ".join(repr(c.name) for _, c in used)
            why = (
                f"{spec.label()} has nothing to compare against in case{'s' if len(used) > 1 else ''} {names}: "
                f"give a case {spec.wants()}"
            )
            found.append((("evaluators", j), why))
            continue
        for i, case in used:
            found += case_problems([spec], case, ("cases", i))
    return list(dict.fromkeys(found))


def refuse(problems: list[Problem], model: BaseModel) -> None:
    """Raise the problems as a ValidationError at their locations (so a set file's message
    gives the line of the check or the case at fault)."""
    if problems:
        raise ValidationError.from_exception_data(
            type(model).__name__,
            [
                {"type": PydanticCustomError("vacuous_check", "{why}", {"why": why}), "loc": loc, "input": model}
                for loc, why in problems
            ],
        )


def _defaults() -> list[EvaluatorSpec]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[EvaluatorSpec]).validate_python(DEFAULT_EVALUATORS)


def eval_set_schema() -> dict[str, Any]:
    """The JSON schema of an eval set file."""
    schema = EvalSet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "loopwright eval set"
    return schema


__all__ = [
    "DEFAULT_EVALUATORS",
    "EvalCase",
    "EvalSet",
    "EvalSetError",
    "ExpectedCall",
    "Prices",
    "Replay",
    "ToolMock",
    "ValidationError",
    "eval_set_schema",
]
