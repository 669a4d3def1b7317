"""observer: KodeAgent's observer — every few steps, a model call looks for loops, stalls, drift.

``Agent(..., observer=Observer(every=3))`` runs on the core composed with this feature. It adds:

- the state ``observe``, entered from ``decide`` instead of going round when an observation is
  due (``observation_due``: at least ``every`` passes since the start or the last observation),
  bounded by ``Limits(max_observations=...)`` (default 5) and, like every way back into the
  loop, by every core budget and by loop detection's guard (a run that repeats itself past
  ``max_repeated_calls`` is not sent round through ``observe``); then ``observe -> preprocess``;
- its handler: one tool-less model call with the observer's instruction over the history,
  asking for ``{"verdict": "ok" | "loop" | "stall" | "drift", "correction": ...}``. A correction
  is added to the history as a user turn (``[observer] ...``) the model reads on its next pass.
  A reply that does not parse, or a model error, adds nothing (an ``error_occurred`` event of
  kind ``observe``); each observation is an ``observed`` event;
- its slice :class:`Observations` and its budget ``max_observations``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ValidationError

from loopwright.data.events import (
    ErrorInfo,
    ErrorOccurred,
    Instruction,
    Message,
    ModelRequest,
    Observed,
    TextPart,
    trusted,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import side_call
from loopwright.table.budgets import Budget
from loopwright.table.machine import Extension, detour

from ..loop_detection import not_repeating_calls
from ..structured_output import json_text

NAME = "observer"
OBSERVE = "observe"

OBSERVER_INSTRUCTION = """\
You observe an agent that works with tools. Read the conversation and judge its recent steps: \
is it repeating the same actions (loop), making no progress (stall), or working on something \
other than the user's request (drift)? If so, write a short, concrete correction addressed to \
the agent; else the verdict is ok and there is no correction. Do not call tools. Reply with only \
one JSON object, no other text: {"verdict": "ok", "correction": null}."""


class Observation(BaseModel):
    """What the observer says."""

    verdict: Literal["ok", "loop", "stall", "drift"]
    correction: str | None = None


@dataclass(frozen=True)
class Observer:
    """KodeAgent's observer: ``Agent(..., observer=Observer(every=3))`` looks at the run every
    ``every`` passes through ``reason``. ``instruction`` replaces its prompt."""

    every: int = 3
    instruction: str = OBSERVER_INSTRUCTION

    def __post_init__(self) -> None:
        if not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"Observer(every={self.every!r}): every must be a whole number of passes, at least 1")

    @property
    def extension(self) -> Extension:
        """The feature an agent with this observer runs on."""
        return OBSERVER


@dataclass(slots=True)
class Observations:
    """The observer's slice of a run's state (``RunState.features["observer"]``)."""

    last: int = 0
    """The pass (``iteration``) of the latest observation (0: none yet)."""
    every: int = 0
    """The active agent's observer interval, as the table's guard reads it (0: no observer)."""
    corrections: list[str] | None = None
    """The corrections given so far."""


def observations(rs: RunState) -> Observations:
    return rs.features[NAME]  # type: ignore[no-any-return]


def observation_due(rs: RunState) -> bool:
    """At least ``every`` passes since the start or the latest observation."""
    o = rs.features.get(NAME)
    return o is not None and o.every > 0 and rs.iteration - o.last >= o.every


OBSERVATIONS = Budget(
    "max_observations", "observer calls (max_observations={value})", "within_observer_budget", cycle=True
)
within_observer_budget = OBSERVATIONS.guard


async def observe(rs: RunState, ctx: RunContext) -> None:
    """One tool-less model call that judges the recent steps; a correction joins the history.

    Reads ``messages``; writes the slice (``last``, ``corrections``), ``usage`` and, with a
    correction, ``messages``."""
    o = observations(rs)
    o.last = rs.iteration
    observer = ctx.agent.observer
    if not isinstance(observer, Observer):
        return
    response = await side_call(ctx, (Instruction(text=observer.instruction),), rs.messages, "observe")
    if response is None:
        return
    try:
        seen = Observation.model_validate_json(json_text(response.text))
    except ValidationError as exc:
        message = f"the observer's reply is not an observation ({exc.error_count()} errors); nothing added"
        ctx.emit(ErrorOccurred, error=ErrorInfo(kind="observe", message=message))
        return
    correction = seen.correction if seen.verdict != "ok" and seen.correction else None
    ctx.emit(Observed, verdict=seen.verdict, correction=correction)
    if correction:
        o.corrections = [*(o.corrections or []), correction]
        text = TextPart(text=f"[observer] {correction}")
        rs.messages.append(trusted(Message, role="user", parts=(text,), agent=rs.active_agent))


def set_interval(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: keep the slice's ``every`` to the active agent's observer (the
    guard reads the run state only)."""
    observer = ctx.agent.observer
    observations(rs).every = observer.every if isinstance(observer, Observer) else 0
    return request


def has_observer(agent: Agent) -> bool:
    """Some agent of the tree has an ``observer``."""
    return any(a.observer is not None and a.observer.extension is OBSERVER for a in agent.walk())


OBSERVER = Extension(
    name=NAME,
    applies_to=has_observer,
    states={OBSERVE: observe},
    **detour(OBSERVE, (not_repeating_calls, observation_due, within_observer_budget), "max_observations"),
    budgets=[OBSERVATIONS],
    guards={
        "observation_due": observation_due,
        "within_observer_budget": within_observer_budget,
        "not_repeating_calls": not_repeating_calls,
    },
    slice=Observations,
    request=set_interval,
)
"""The observer: the ``observe`` state and its rows, as one feature."""
