"""Evaluators: each turns one run of a case into a :class:`Score`, or None when the case does not
give what it checks (no ``expected_calls`` for a trajectory check, say).

No check passes vacuously: one that could not fail (a ``threshold`` of 0, an empty ``value`` to
look for) is refused when it is made, and :meth:`applies` / :meth:`problem` say, before any
run, whether a case gives a check something to compare against (a set refuses a check that
has nothing in any case, :mod:`loopwright.eval.cases`).

They are data (a ``kind`` discriminator, so a set file lists them): ``trajectory``,
``response``, ``schema``, ``judge``, ``run`` and ``function`` (a user's
``def evaluator(case, result) -> Score``; a bool or a number in [0, 1] is taken as a score too).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from ..data.events import Event, StateEntered
from ..data.result import RunResult
from .base import EvalContext, Observed, Ref, Score, resolve
from .response import parse_json, rouge1, schema_problems, text_of


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    name: str | None = None

    def label(self) -> str:
        return self.name or str(getattr(self, "kind", "evaluator"))

    def applies(self, case: Any) -> bool:
        """Whether ``case`` gives this check something to compare against (a check that does
        not apply to a case is left out of its runs' scores)."""
        return True

    def wants(self) -> str:
        """What a case gives this check to compare against (for messages)."""
        return ""

    def problem(self, case: Any) -> tuple[str, str] | None:
        """Why this check, applied to ``case``, could not fail (or could not run): the case's
        field at fault and what is wrong; None when it is a real check."""
        return None

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:  # pragma: no cover
        raise NotImplementedError


def _verdict(spec: _Spec, value: float, passed: bool, reason: str = "", **details: JsonValue) -> Score:
    return Score(evaluator=spec.label(), value=value, passed=passed, reason=reason, details=details)


class TrajectoryCheck(_Spec):
    """The run's tool calls against the case's ``expected_calls`` (see
    :mod:`loopwright.eval.trajectory` for the modes); passes when the partial score reaches
    ``threshold`` (1.0: the match holds)."""

    kind: Literal["trajectory"] = "trajectory"
    match: Literal["exact", "in_order", "any_order", "subset"] = "in_order"
    threshold: float = Field(default=1.0, ge=0, le=1)

    def label(self) -> str:
        return self.name or f"trajectory:{self.match}"

    @model_validator(mode="after")
    def _can_fail(self) -> TrajectoryCheck:
        if self.threshold == 0:
            raise ValueError("threshold 0 passes every run, so the check cannot fail; give a threshold above 0")
        return self

    def applies(self, case: Any) -> bool:
        return case.expected_calls is not None

    def wants(self) -> str:
        return "expected_calls"

    def problem(self, case: Any) -> tuple[str, str] | None:
        if case.expected_calls == [] and self.match != "exact":
            return "expected_calls", (
                f"expected_calls is empty, so {self.label()} cannot fail; to require that no tool is called, "
                "check the trajectory with match: exact"
            )
        return None

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        from .trajectory import match_trajectory, trajectory_diff

        expected = run.case.expected_calls
        if expected is None:
            return None
        calls = run.calls
        found = match_trajectory(expected, calls, self.match)
        diff = trajectory_diff(expected, calls, found)
        passed = found.passed if self.threshold >= 1.0 else found.score >= self.threshold
        reason = "" if found.passed else f"{len(found.pairs)}/{len(expected)} expected calls matched ({self.match})"
        return _verdict(self, found.score, passed, reason, diff=list(diff))


class ResponseCheck(_Spec):
    """The answer against ``value`` (default: the case's ``expected_response``): ``exact``
    (whitespace at the ends ignored), ``contains``, ``regex`` (searched) or ``rouge`` (ROUGE-1
    F1 of the words, passing at ``threshold``, default 0.5)."""

    kind: Literal["response"] = "response"
    match: Literal["exact", "contains", "regex", "rouge"] = "exact"
    value: str | None = None
    threshold: float | None = Field(default=None, ge=0, le=1)
    case_sensitive: bool = True

    def label(self) -> str:
        return self.name or f"response:{self.match}"

    @model_validator(mode="after")
    def _can_fail(self) -> ResponseCheck:
        if self.value is not None and (why := self._vacuous(self.value)):
            raise ValueError(f"value {why}")
        if self.match == "rouge" and self.threshold == 0:
            raise ValueError("threshold 0 passes every answer, so the check cannot fail; give a threshold above 0")
        return self

    def _vacuous(self, want: str) -> str | None:
        """Why looking for ``want`` could not fail (or could not be done)."""
        import re

        if want == "" and self.match in ("contains", "regex"):
            return f"is empty: every answer {'contains' if self.match == 'contains' else 'matches'} it"
        if self.match == "regex":
            try:
                re.compile(want)
            except re.error as exc:
                return f"{want!r} is not a regular expression: {exc}"
        return None

    def applies(self, case: Any) -> bool:
        return self.value is not None or case.expected_response is not None

    def wants(self) -> str:
        return "expected_response (or the check a value)"

    def problem(self, case: Any) -> tuple[str, str] | None:
        if self.value is None and case.expected_response is not None and (why := self._vacuous(case.expected_response)):
            return "expected_response", f"expected_response {why}, so {self.label()} cannot check it"
        return None

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        import re

        want = self.value if self.value is not None else run.case.expected_response
        if want is None:
            return None
        got = text_of(run.result.output if run.result is not None else None)
        a, b = (got, want) if self.case_sensitive else (got.lower(), want.lower())
        if self.match == "rouge":
            value = rouge1(got, want)
            return _verdict(self, value, value >= (0.5 if self.threshold is None else self.threshold))
        flags = 0 if self.case_sensitive else re.IGNORECASE
        ok = {
            "exact": lambda: a.strip() == b.strip(),
            "contains": lambda: b in a,
            "regex": lambda: re.search(want, got, flags) is not None,
        }[self.match]()
        reason = "" if ok else f"expected {self.match} {want!r}; the answer was {got[:300]!r}"
        return _verdict(self, 1.0 if ok else 0.0, ok, reason)


class SchemaCheck(_Spec):
    """The answer is valid: against ``json_schema`` (a JSON schema), or ``output_type`` (a
    pydantic model class, or ``"module:Model"``), or else the agent's own ``output_type``."""

    kind: Literal["schema"] = "schema"
    json_schema: dict[str, JsonValue] | None = None
    output_type: Ref = None

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        from pydantic import ValidationError

        output = run.result.output if run.result is not None else None
        if self.json_schema is not None:
            data, why = parse_json(output)
            problems = [why] if why else schema_problems(data, self.json_schema)
            return _verdict(self, 0.0 if problems else 1.0, not problems, "; ".join(problems))
        model = self.output_type or getattr(run.agent, "output_type", None)
        if isinstance(model, str):
            model = resolve(model)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return _verdict(self, 0.0, False, "no schema: give json_schema or output_type, or an agent output_type")
        if isinstance(output, model):
            return _verdict(self, 1.0, True)
        data, why = parse_json(output)
        if why:
            return _verdict(self, 0.0, False, why)
        try:
            model.model_validate(data)
        except ValidationError as exc:
            return _verdict(self, 0.0, False, str(exc).splitlines()[0])
        return _verdict(self, 1.0, True)


DEFAULT_JUDGE_PROMPT = (
    "You grade an AI agent's answer against a rubric.\n\nRubric:\n{rubric}\n\nThe user said:\n{input}\n\n"
    "The agent answered:\n{response}\n\nScore it from {low} (worst) to {high} (best). Reply with JSON only: "
    '{{"reasoning": "<one or two sentences>", "score": <a number from {low} to {high}>}}'
)


class JudgeCheck(_Spec):
    """An LLM judge: any loopwright Model (``model``, or ``"module:attr"``; default: the
    ``judge`` given to :func:`~loopwright.eval.evaluate`) scores the answer against ``rubric``
    (default: the case's) on ``scale``; passes at ``threshold`` or above. Its reasoning is kept.
    A judge that fails or answers off the scale leaves the run "not judged", never passed."""

    kind: Literal["judge"] = "judge"
    rubric: str | None = None
    model: Ref = None
    prompt: str = DEFAULT_JUDGE_PROMPT
    scale: tuple[float, float] = (1, 5)
    threshold: float = 4

    @model_validator(mode="after")
    def _can_fail(self) -> JudgeCheck:
        low = self.scale[0]
        if self.threshold <= low:
            raise ValueError(
                f"threshold {self.threshold:g} is at or below the lowest score {low:g}, so every judged run "
                "passes; give a threshold above it"
            )
        if self.rubric is not None and not self.rubric.strip():
            raise ValueError("rubric is blank; give the judge something to grade against, or leave it out")
        return self

    def applies(self, case: Any) -> bool:
        return (self.rubric or case.rubric) is not None

    def wants(self) -> str:
        return "a rubric (or the check one)"

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        from .judge import judge

        rubric = self.rubric or run.case.rubric
        if rubric is None:
            return None
        return await judge(self, rubric, run, ctx)


Outcome: TypeAlias = Literal["final", "salvaged", "limit", "failed", "cancelled", "suspended", "paused"]


class RunCheck(_Spec):
    """Properties of the run itself: its ``outcomes`` (default: final), the ``limit`` it must
    have hit, iterations / tool calls / tokens / cost at most the bounds given, the states it
    must never enter or must enter (``never_states: [salvage]``) and the rows of the machine
    it must never or must take (``"reason->salvage"``)."""

    kind: Literal["run"] = "run"
    outcomes: list[Outcome] = Field(default_factory=lambda: list[Outcome](["final"]))
    limit: str | None = None
    max_iterations: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    never_states: list[str] = Field(default_factory=list)
    required_states: list[str] = Field(default_factory=list)
    never_rows: list[str] = Field(default_factory=list)
    required_rows: list[str] = Field(default_factory=list)

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        problems = self.problems(run, ctx)
        return _verdict(self, 0.0 if problems else 1.0, not problems, "; ".join(problems))

    def problems(self, run: Observed, ctx: EvalContext) -> list[str]:
        if not run.results:
            return [f"the run did not finish: {run.error}"]
        last = run.results[-1]
        out: list[str] = []
        if last.outcome not in self.outcomes:
            out.append(f"outcome {last.outcome} (wanted {' or '.join(self.outcomes)})")
        if self.limit is not None and last.limit != self.limit:
            out.append(f"limit {last.limit} was hit, not {self.limit}")
        iterations = sum(r.iterations for r in run.results)
        tool_calls = sum(r.tool_calls for r in run.results)
        tokens = sum(r.usage.total_tokens for r in run.results)
        for what, used, bound in (
            ("iterations", iterations, self.max_iterations),
            ("tool calls", tool_calls, self.max_tool_calls),
            ("tokens", tokens, self.max_tokens),
        ):
            if bound is not None and used > bound:
                out.append(f"{used} {what} > {bound}")
        cost = run.cost_usd
        if self.max_cost_usd is not None and cost is not None and cost > self.max_cost_usd:
            out.append(f"cost {cost:.4f} USD > {self.max_cost_usd}")
        states = {s for r in run.results for s in r.trace}
        rows = rows_taken(run.events)
        out += [f"entered {s}" for s in self.never_states if s in states]
        out += [f"never entered {s}" for s in self.required_states if s not in states]
        out += [f"took row {r}" for r in self.never_rows if _norm(r) in rows]
        out += [f"never took row {r}" for r in self.required_rows if _norm(r) not in rows]
        return out


def _norm(row: str) -> str:
    source, _, dest = row.partition("->")
    return f"{source.strip()}->{dest.strip()}"


def rows_taken(events: list[Event]) -> set[str]:
    """The rows of the machine a run took, as ``"source->dest"``."""
    return {f"{e.source}->{e.state}" for e in events if isinstance(e, StateEntered)}


UserEvaluator: TypeAlias = Callable[[Any, RunResult], "Score | bool | float | Awaitable[Score | bool | float]"]


class FunctionCheck(_Spec):
    """A user's ``def evaluator(case, result) -> Score`` (``function``: the function, or
    ``"module:function"``); sync or async; a bool or a number in [0, 1] is taken as the score
    (passing at 1.0, or when True)."""

    kind: Literal["function"] = "function"
    function: Ref

    def label(self) -> str:
        if self.name:
            return self.name
        fn = self.function
        return fn.rsplit(":", 1)[-1] if isinstance(fn, str) else str(getattr(fn, "__name__", "function"))

    async def score(self, run: Observed, ctx: EvalContext) -> Score | None:
        fn = resolve(self.function) if isinstance(self.function, str) else self.function
        if run.result is None:
            return _verdict(self, 0.0, False, f"the run did not finish: {run.error}")
        value = fn(run.case, run.result)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, Score):
            return value.model_copy(update={"evaluator": value.evaluator or self.label()})
        if isinstance(value, bool):
            return _verdict(self, 1.0 if value else 0.0, value)
        if isinstance(value, int | float):
            return _verdict(self, float(value), value >= 1.0)
        raise TypeError(f"evaluator {self.label()} returned {type(value).__name__}; return a Score, a bool or a number")


EvaluatorSpec = Annotated[
    TrajectoryCheck | ResponseCheck | SchemaCheck | JudgeCheck | RunCheck | FunctionCheck,
    Field(discriminator="kind"),
]


def as_spec(item: Any) -> Any:
    """A plain function given as an evaluator becomes a :class:`FunctionCheck`."""
    if isinstance(item, _Spec):
        return item
    if callable(item):
        return FunctionCheck(function=item)
    return item


__all__ = [
    "DEFAULT_JUDGE_PROMPT",
    "EvaluatorSpec",
    "FunctionCheck",
    "JudgeCheck",
    "ResponseCheck",
    "RunCheck",
    "SchemaCheck",
    "TrajectoryCheck",
    "UserEvaluator",
    "as_spec",
    "rows_taken",
]
