"""An example feature in one module: ``double_check`` looks over tool calls before ``act`` runs them.

This module is the whole feature; it touches nothing else of loopwright. It shows every part an
:class:`~loopwright.Extension` may have:

- a new state, ``check``, between ``postprocess`` and ``act`` (the row
  ``postprocess -> act (has_tool_calls)`` is redirected to it), with a cancel row and a fallback
  on to ``act``;
- a self-loop ``check -> check`` on a guard of its own, ``wants_another_look`` (the session
  state's ``"looks"`` says how many looks a reply gets, default 1), bounded by its own budget
  ``max_checks`` (at most 3 extra looks a run, whatever the guard says);
- its slice of run state, :class:`Checks` (saved with the run);
- a request hook: once a reply has been double-checked, the model is told so.

Use it with ``Agent(..., extensions=[DOUBLE_CHECK])``.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopwright import Instruction, ModelRequest, RunContext, RunState
from loopwright.extend import Budget, Extension, Rule

NAME = "double_check"
CHECK = "check"


@dataclass(slots=True)
class Checks:
    """The double-check slice of a run's state (``RunState.features["double_check"]``)."""

    seen: int = 0
    """Looks taken at tool-using replies so far, in the whole run."""
    looks: int = 0
    """Looks taken at the latest reply."""


def checks(rs: RunState) -> Checks:
    return rs.features[NAME]  # type: ignore[no-any-return]


MAX_CHECKS = Budget("max_checks", "checks (max_checks={value})", "within_check_budget", cycle=True, limit=3)
"""Extra looks (the self-loop) a run may take; Limits has no such field, so ``limit`` caps it."""


def wants_another_look(rs: RunState) -> bool:
    """The latest reply has had fewer looks than the session state's ``"looks"`` asks for."""
    wanted = rs.state.get("looks", 1)
    return isinstance(wanted, int) and checks(rs).looks < wanted


async def check(rs: RunState, ctx: RunContext) -> None:
    """Take one look at the latest reply's tool calls (here: count it)."""
    c = checks(rs)
    if rs.trace[-2:-1] != [CHECK]:  # a new reply: start counting its looks again
        c.looks = 0
    c.seen += 1
    c.looks += 1


def mention_checks(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: tell the model its tool calls are being double-checked."""
    seen = checks(rs).seen
    if not seen:
        return request
    note = Instruction(text=f"Your tool calls have been double-checked {seen} time(s).")
    return request.model_copy(update={"instructions": (*request.instructions, note)})


DOUBLE_CHECK = Extension(
    name=NAME,
    states={CHECK: check},
    redirect={("postprocess", "act"): CHECK},
    rows=[
        Rule(CHECK, "cancelled", "cancel_requested"),
        Rule(CHECK, CHECK, "wants_another_look", bounded_by="max_checks"),
        Rule(CHECK, "act"),
    ],
    budgets=[MAX_CHECKS],
    guards={"wants_another_look": wants_another_look},
    slice=Checks,
    request=mention_checks,
)
"""The double-check feature, as one value."""
