"""structured_output: the final answer must validate against the agent's ``output_type``.

``Agent(..., output_type=Answer)`` (a pydantic model class) runs on the core composed with this
feature. It adds:

- a request processor: the model is told to give its final answer as one JSON object matching
  ``Answer``'s JSON schema, and the request carries that schema (``ModelRequest.output_schema``):
  an adapter whose API constrains output to a schema (Claude's ``output_config.format``) sends
  it, the others rely on the instruction; ``validate`` checks the answer either way;
- the state ``validate``, entered from ``decide`` instead of ``done`` when the reply is final
  (the core's two ``decide -> done`` rows are replaced: ``decide -> validate`` if
  ``is_final_response`` before going round, and ``decide -> done`` with the limit last);
- the rows ``validate -> done`` (``output_valid``, outcome final), ``validate -> preprocess``
  (every budget has room; bounded by ``max_parse_retries``: the reply goes back to the model
  with the validation error as a user turn) and ``validate -> failed`` (retries spent: the run
  fails with ``error.kind == "output_validation"`` and the error named, ``limit`` saying which
  budget ran out);
- numbers must be finite: a float that validates as NaN or an infinity (``"NaN"``, bare
  ``NaN``, ``"Infinity"``, ``1e999``) is a validation error like any other, unless the model
  holding it says ``ConfigDict(allow_inf_nan=True)`` itself;
- ``finish``: a salvaged answer (salvage's request asks for the JSON too) that validates is the
  object; one that does not stays text (no retry after salvage);
- its slice :class:`Structured` and its budget ``max_parse_retries``.

Two audiences, as in KodeAgent's reasoner-action loop: what the *model* sees are the raw tool
results and its own JSON text (``RunResult.messages``); what *people* get is
``RunResult.output``, the validated ``Answer`` object (``RunResult.run_state.text`` keeps the
raw JSON text). A JSON answer wrapped in a Markdown code fence or surrounded by prose is
accepted (the outermost ``{...}`` is validated).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from loopwright.data.events import ErrorInfo, ErrorOccurred, Instruction, Message, ModelRequest, TextPart, trusted
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.table.budgets import Budget
from loopwright.table.guards import is_final_response
from loopwright.table.machine import DECIDE, DONE, FAILED, PRE, SALVAGE, WITHIN_BUDGETS, Extension, Row, cancellable

NAME = "structured_output"
VALIDATE = "validate"

RETRY = (
    "Your final answer is not valid {name} JSON:\n{error}\nReply again with only one JSON object that matches "
    "the schema, nothing else."
)


@dataclass(slots=True)
class Structured:
    """The structured-output slice of a run's state (``RunState.features["structured_output"]``)."""

    value: Any = None
    """The validated final answer (a pydantic object; saved as its JSON)."""
    valid: bool = False
    """The latest final reply validated."""
    error: str = ""
    """Why the latest final reply did not validate."""
    failures: int = 0
    """Final replies that did not validate, in the whole run."""

    def final_output(self) -> Any:
        """What ``RunResult.output`` shows: the validated object (None: the text answer)."""
        return self.value if self.valid else None


def structured(rs: RunState) -> Structured:
    return rs.features[NAME]  # type: ignore[no-any-return]


def output_valid(rs: RunState) -> bool:
    """The final reply validated against the active agent's ``output_type``."""
    s = rs.features.get(NAME)
    return s is not None and s.valid


PARSE_RETRIES = Budget(
    "max_parse_retries",
    "retries of a final answer that did not validate (max_parse_retries={value})",
    "parse_retries_left",
    cycle=True,
)
parse_retries_left = PARSE_RETRIES.guard


def json_text(text: str) -> str:
    """The JSON object in ``text``: the text itself, or what a code fence or prose wraps."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return stripped
    start, end = stripped.find("{"), stripped.rfind("}")
    return stripped[start : end + 1] if 0 <= start < end else stripped


def describe(exc: ValidationError) -> str:
    """A validation error, one line per problem, as the model should read it."""
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(the whole answer)"
        lines.append(f"- {where}: {err['msg']}")
    return "\n".join(lines)


NOT_FINITE = "{value!r} is not a finite number; give a number (JSON has no NaN or Infinity)"


def parse(output_type: type[BaseModel], text: str) -> tuple[Any, str | None]:
    """The answer in ``text`` validated against ``output_type``, or the error to send back
    (one line per problem). Numbers must be finite: a float that validated as NaN or an
    infinity (``"NaN"``, bare ``NaN``, ``"Infinity"``, ``1e999``) is an error, unless the
    model holding it allows them itself (``ConfigDict(allow_inf_nan=True)``)."""
    try:
        value = output_type.model_validate_json(json_text(text))
    except ValidationError as exc:
        return None, describe(exc)
    found = list(_not_finite(value, ()))
    if found:
        return None, "\n".join(f"- {'.'.join(map(str, where)) or '(the whole answer)'}: "
                               f"{NOT_FINITE.format(value=v)}" for where, v in found)  # fmt: skip
    return value, None


def _not_finite(value: Any, where: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], float]]:
    """Where in ``value`` (a validated answer) a float is NaN or infinite."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield where, value
    elif isinstance(value, BaseModel):
        if value.model_config.get("allow_inf_nan") is True:  # (the model says so itself)
            return
        for name in type(value).model_fields:
            yield from _not_finite(getattr(value, name), (*where, name))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _not_finite(item, (*where, key))
    elif isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            yield from _not_finite(item, (*where, i))


async def validate(rs: RunState, ctx: RunContext) -> None:
    """Validate the final reply's text against the active agent's ``output_type``.

    Reads ``text``; writes the slice (``value``/``valid``, or ``error`` and ``failures``) and,
    for a reply that does not validate while a retry is left, ``messages`` (a user turn with
    the validation error)."""
    s = structured(rs)
    output_type: type[BaseModel] | None = ctx.agent.output_type
    if output_type is None:  # an agent of the tree that answers in text
        s.valid, s.value = True, None
        return
    value, error = parse(output_type, rs.text or "")
    if error is None:
        s.value, s.valid = value, True
        return
    s.error = error
    s.valid, s.value = False, None
    s.failures += 1
    ctx.emit(ErrorOccurred, error=ErrorInfo(kind="output_validation", message=s.error, retryable=True))
    if not PARSE_RETRIES.charged_out(rs):
        text = RETRY.format(name=output_type.__name__, error=s.error)
        rs.messages.append(trusted(Message, role="user", parts=(TextPart(text=text),), agent=rs.active_agent))


_INSTRUCTIONS: dict[type[BaseModel], Instruction] = {}


def instruction_for(output_type: type[BaseModel]) -> Instruction:
    """The instruction asking for ``output_type`` as JSON (made once per type; cacheable)."""
    found = _INSTRUCTIONS.get(output_type)
    if found is None:
        schema = json.dumps(output_type.model_json_schema(), sort_keys=True)
        found = _INSTRUCTIONS[output_type] = Instruction(
            text=(
                "When you give your final answer (not while you still call tools), reply with only one JSON "
                f"object, no other text, that validates against this JSON schema:\n{schema}"
            ),
            cache=True,
        )
    return found


def ask_for_json(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: the active agent's ``output_type`` as an instruction."""
    output_type = ctx.agent.output_type
    if output_type is None:
        return request
    instructions = (*request.instructions, instruction_for(output_type))
    return request.model_copy(update={"instructions": instructions, "output_schema": schema_of(output_type)})


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def schema_of(output_type: type[BaseModel]) -> dict[str, Any]:
    """``output_type``'s JSON schema (made once per type; shared: adapters copy before changing)."""
    found = _SCHEMAS.get(output_type)
    if found is None:
        found = _SCHEMAS[output_type] = output_type.model_json_schema()
    return found


def finish(rs: RunState, ctx: RunContext, why: str) -> None:
    """The run is ending: a run that failed in ``validate`` names the validation error; a
    salvaged answer (salvage asks for the JSON too) becomes the object when it validates (no
    retry: else ``output`` stays its text)."""
    s = structured(rs)
    output_type = ctx.agent.output_type
    came_from = rs.trace[-2:-1]
    if rs.stage == FAILED and rs.error is None and came_from == [VALIDATE]:
        name = output_type.__name__ if output_type is not None else "the output type"
        rs.error = ErrorInfo(
            kind="output_validation",
            message=f"the final answer did not validate against {name} ({s.failures} tries):\n{s.error}",
        )
    elif rs.stage == DONE and came_from in ([SALVAGE], ["guard_salvaged"]) and output_type and rs.response is not None:
        value, error = parse(output_type, rs.text or "")
        if error is None:
            s.value, s.valid = value, True
        else:
            s.error = error


def has_output_type(agent: Agent) -> bool:
    """Some agent of the tree answers with an ``output_type``."""
    return any(a.output_type is not None for a in agent.walk())


STRUCTURED_OUTPUT = Extension(
    name=NAME,
    applies_to=has_output_type,
    states={VALIDATE: validate},
    remove=[(DECIDE, DONE)],
    rows_before={(DECIDE, PRE): [Row(DECIDE, VALIDATE, (is_final_response,))]},
    rows=[
        cancellable(VALIDATE),
        Row(VALIDATE, DONE, (output_valid,), outcome="final"),
        Row(VALIDATE, PRE, (parse_retries_left, *WITHIN_BUDGETS), bounded_by="max_parse_retries"),
        Row(VALIDATE, FAILED, outcome="failed", records_limit=True),
        Row(DECIDE, DONE, outcome="limit", records_limit=True),
    ],
    budgets=[PARSE_RETRIES],
    guards={"output_valid": output_valid, "parse_retries_left": parse_retries_left},
    slice=Structured,
    request=ask_for_json,
    finish=finish,
)
"""Structured output with parse retries: the ``validate`` state and its rows, as one feature."""
