"""planner: KodeAgent's planner — a structured plan written first and updated after each act.

``Agent(..., planner=Planner())`` runs on the core composed with this feature. It adds:

- the states ``plan`` and ``update_plan`` (one handler): ``start -> plan -> preprocess``
  (redirected from ``start -> preprocess``): before the first pass the model writes the plan;
  ``act -> update_plan -> decide`` (redirected from ``act -> decide``): after each act it
  updates the plan from what the tools returned. Two states, not one, so the table shows (and
  ``verify`` proves) that the first plan is made once. Each visit is one tool-less model call
  asking for the plan as JSON (:class:`Plan`: steps with a status); its
  tokens count in the run's usage and token budget. A reply that does not parse, or a model
  error, keeps the plan as it was (an ``error_occurred`` event of kind ``plan`` says why):
  the plan helps the loop, it never stops it. No new cycle: ``plan`` sits on the loop the core's
  ``max_iterations`` already bounds (one planner call per act, plus the first);
- a request processor: the active agent's plan is shown to the model each pass;
- ``finish``: when the run ends with a final answer the plan is complete (every step done);
- its slice :class:`Planning` (the plan is part of the run's state, saved with it) and the
  event ``plan_updated`` (each version of the plan, for the live view and logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ValidationError

from loopwright.data.events import (
    ErrorInfo,
    ErrorOccurred,
    Instruction,
    ModelRequest,
    PlanUpdated,
    ToolCall,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import side_call
from loopwright.table.guards import is_final_response
from loopwright.table.machine import ACT, DECIDE, DONE, PRE, START, Extension, Row, cancellable

from ..structured_output import json_text

NAME = "planner"
PLAN, UPDATE_PLAN = "plan", "update_plan"

PLANNER_INSTRUCTION = """\
You are the planner of an agent that works with tools. Write the plan that gets the user's \
request done: a few concrete steps, each one an action with the available tools or a conclusion. \
If a plan exists, update it from what the conversation shows: mark steps done, in_progress or \
skipped, and add or rewrite steps the results call for. Do not call tools. Reply with only one \
JSON object, no other text: {"steps": [{"description": "...", "status": "pending"}]} \
(status: pending, in_progress, done or skipped)."""


class PlanStep(BaseModel):
    """One step of the plan."""

    description: str
    status: Literal["pending", "in_progress", "done", "skipped"] = "pending"


class Plan(BaseModel):
    """The plan: steps with their status."""

    steps: list[PlanStep]

    def render(self) -> str:
        return "\n".join(f"{i}. [{s.status}] {s.description}" for i, s in enumerate(self.steps, 1))


@dataclass(frozen=True)
class Planner:
    """KodeAgent's planner: ``Agent(..., planner=Planner())``. ``instruction`` replaces the
    planner's prompt (it must still ask for the JSON plan)."""

    instruction: str = PLANNER_INSTRUCTION

    @property
    def extension(self) -> Extension:
        """The feature an agent with this planner runs on."""
        return PLANNER


@dataclass(slots=True)
class Planning:
    """The planner's slice of a run's state (``RunState.features["planner"]``)."""

    plan: Plan | None = None
    """The current plan (None until the planner has written one)."""
    versions: int = 0
    """Plans written so far (the first, then each update)."""
    complete: bool = False
    """The run ended with a final answer: every step is done."""


def planning(rs: RunState) -> Planning:
    return rs.features[NAME]  # type: ignore[no-any-return]


def _step_held(rs: RunState) -> bool:
    """The latest turn is the model's tool calls, not yet answered (a step waiting for people)."""
    last = rs.messages[-1] if rs.messages else None
    return last is not None and last.role == "assistant" and any(type(p) is ToolCall for p in last.parts)


async def plan(rs: RunState, ctx: RunContext) -> None:
    """Write the plan (first visit) or update it (after an act): one tool-less model call.

    Reads ``messages`` and the slice's plan; writes the slice (``plan``, ``versions``) and
    ``usage``. Leaves the plan as it was on a reply that does not parse or a model error."""
    planner = ctx.agent.planner
    if not isinstance(planner, Planner) or _step_held(rs):
        return
    p = planning(rs)
    instructions = [Instruction(text=planner.instruction)]
    if p.plan is not None:
        instructions.append(Instruction(text=f"The plan so far:\n{p.plan.render()}"))
    response = await side_call(ctx, tuple(instructions), rs.messages, "plan")
    if response is None:
        return
    try:
        p.plan = Plan.model_validate_json(json_text(response.text))
    except ValidationError as exc:
        message = f"the planner's reply is not a plan ({exc.error_count()} errors); the plan is kept as it was"
        ctx.emit(ErrorOccurred, error=ErrorInfo(kind="plan", message=message))
        return
    p.versions += 1
    _report(p, ctx)


def _report(p: Planning, ctx: RunContext) -> None:
    steps = tuple(s.model_dump() for s in p.plan.steps) if p.plan is not None else ()
    ctx.emit(PlanUpdated, steps=steps, complete=p.complete)


def show_plan(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: the current plan, as an instruction."""
    p = planning(rs)
    if p.plan is None or not isinstance(ctx.agent.planner, Planner):
        return request
    note = Instruction(text=f"Your plan (follow it; it is updated after each tool step):\n{p.plan.render()}")
    return request.model_copy(update={"instructions": (*request.instructions, note)})


def complete_plan(rs: RunState, ctx: RunContext, why: str) -> None:
    """The run ends with a final answer: the plan is complete."""
    p = planning(rs)
    if p.plan is None or rs.stage != DONE or rs.limit is not None or not is_final_response(rs):
        return
    p.plan = Plan(steps=[s if s.status == "skipped" else s.model_copy(update={"status": "done"}) for s in p.plan.steps])
    p.complete = True
    _report(p, ctx)


def has_planner(agent: Agent) -> bool:
    """Some agent of the tree has ``planner=Planner()``."""
    return any(a.planner is not None and a.planner.extension is PLANNER for a in agent.walk())


PLANNER = Extension(
    name=NAME,
    applies_to=has_planner,
    states={PLAN: plan, UPDATE_PLAN: plan},
    redirect={(START, PRE): PLAN, (ACT, DECIDE): UPDATE_PLAN},
    rows=[cancellable(PLAN), Row(PLAN, PRE), cancellable(UPDATE_PLAN), Row(UPDATE_PLAN, DECIDE)],
    slice=Planning,
    request=show_plan,
    finish=complete_plan,
)
"""The planner: the ``plan`` and ``update_plan`` states and their rows, as one feature."""
