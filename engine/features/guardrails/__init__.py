"""guardrails: guards on the user's message, the final answer and each tool call, as states.

``Agent(..., input_guards=[...], output_guards=[...], tool_guards=[...])`` runs on the core
composed with this feature (an agent without guards pays nothing: no rows are added). A guard
is a function ``(value, ctx) -> verdict`` (sync or async), an :class:`~loopwright.Agent` (run as
a nested run of the guarded one, charging its budgets; it answers a :class:`GuardVerdict`), or
a :class:`Guardrail` wrapping either with options. A verdict is ``None``/``True`` (allow),
:class:`Rewrite` (go on with a new value), :class:`Block` (or ``False``) with a message. A guard
that raises blocks (it fails closed). It adds:

- the state ``guard_input``, entered from ``start`` (``start -> guard_input``): the root
  agent's input guards check the user's message before any model call; a block ends the run
  (``guard_input -> done``, outcome ``"blocked"``), else ``guard_input -> preprocess``;
- the state ``guard_first`` for input guards with ``parallel=True``: entered from
  ``preprocess`` on the first pass instead of ``reason``, it makes the first model call (the
  ``reason`` stage's own work) while those guards run; a block cancels the call and ends the
  run (``guard_first -> done``, ``"blocked"``); else its rows are ``reason``'s own (a reply
  goes to ``postprocess`` only once every guard has allowed it, so no tool runs before);
- the state ``guard_output``, entered from ``postprocess`` when the reply is final (before
  ``decide``): the active agent's output guards check the answer's text; a block ends the run
  (``"blocked"``), or, for a guard with ``retries=N``, goes back to the model with the guard's
  message (``guard_output -> preprocess``, bounded by ``max_guard_retries``; at most N times
  for that guard); ``guard_salvaged`` does the same for a salvaged answer (``salvage ->
  guard_salvaged``; no retry: a block ends the run, else ``done`` with outcome ``"salvaged"``);
- a gate in ``act``: the active agent's tool guards check each call before it runs (a block
  answers the call with the guard's message; the tool does not run) and, with
  ``after=True``, its result (rewritten or withheld). A block by a guard with ``halt=True``
  (the default) also ends the run after the step (``act -> done``, ``"blocked"``);
- its slice :class:`Guards` (``RunResult.blocked`` names the guard and its message) and its
  budget ``max_guard_retries``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal

from loopwright.data.events import (
    Blocked,
    ErrorInfo,
    ErrorOccurred,
    Message,
    PendingRequest,
    TextPart,
    ToolCall,
    ToolResult,
    trusted,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.calls import CallOutcome, proceed, result, value_result
from loopwright.runtime.context import RunContext
from loopwright.states.reason import reason
from loopwright.table.budgets import Budget
from loopwright.table.guards import cancel_requested, has_response, is_final_response
from loopwright.table.machine import (
    ACT,
    CORE_ROWS,
    DECIDE,
    DONE,
    POST,
    PRE,
    REASON,
    SALVAGE,
    START,
    WITHIN_BUDGETS,
    Extension,
    Row,
    cancellable,
)

from .verdicts import (
    MAX_GUARD_RETRIES,
    Block,
    Guardrail,
    GuardVerdict,
    Rewrite,
    Verdict,
    guarded,
    guards_of,
    run_agents_with,
    verdict,
)

NAME = "guardrails"
GUARD_INPUT, GUARD_FIRST, GUARD_OUTPUT, GUARD_SALVAGED = "guard_input", "guard_first", "guard_output", "guard_salvaged"
RETRY = "Your answer was blocked by the guard {name!r}: {message}\nAnswer again so that it passes."


@dataclass(slots=True)
class Guards:
    """The guardrails slice of a run's state (``RunState.features["guardrails"]``)."""

    blocked: Blocked | None = None
    """The latest block: what ``RunResult.blocked`` shows when the run ended blocked."""
    retry: bool = False
    """An output guard blocked the answer and the model gets to try again."""
    retries: dict[str, int] = field(default_factory=dict)
    """Retries each output guard asked for so far, by guard name."""
    parallel_due: bool = False
    """Input guards with ``parallel=True`` are still to run (with the first model call)."""
    salvaging: bool = False
    """The answer being checked is a salvaged one (in ``guard_salvaged``: no retry)."""


def guards(rs: RunState) -> Guards:
    return rs.features[NAME]  # type: ignore[no-any-return]


def _blocked_at(rs: RunState, where: str) -> bool:
    g = rs.features.get(NAME)
    return g is not None and g.blocked is not None and g.blocked.where == where


def input_blocked(rs: RunState) -> bool:
    """An input guard blocked the user's message."""
    return _blocked_at(rs, "input")


def output_blocked(rs: RunState) -> bool:
    """An output guard blocked the answer (tried after the retry row: a retry goes first)."""
    return _blocked_at(rs, "output")


def tool_blocked(rs: RunState) -> bool:
    """A tool guard with ``halt=True`` blocked a call (or its result)."""
    return _blocked_at(rs, "tool")


def parallel_guards_due(rs: RunState) -> bool:
    """Input guards with ``parallel=True`` are to run with this (the first) model call."""
    g = rs.features.get(NAME)
    return g is not None and g.parallel_due


def output_retry_due(rs: RunState) -> bool:
    """An output guard blocked the answer and asked for another try."""
    g = rs.features.get(NAME)
    return g is not None and g.retry


GUARD_RETRIES = Budget(
    "max_guard_retries",
    "retries after an output guard blocked the answer (max_guard_retries={value})",
    "guard_retries_left",
    cycle=True,
    limit=MAX_GUARD_RETRIES,
)
guard_retries_left = GUARD_RETRIES.guard


# ------------------------------------------------------------------ a block


def block(rs: RunState, ctx: RunContext, guard: Guardrail, where: Literal["input", "output", "tool"], why: str) -> None:
    guards(rs).blocked = Blocked(guard=guard.name, where=where, message=why)
    ctx.emit(ErrorOccurred, error=ErrorInfo(kind="blocked", message=f"{where} guard {guard.name!r}: {why}"))


# ------------------------------------------------------------------ input


def _text_of(message: Message) -> str:
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


def _with_text(message: Message, text: str) -> Message:
    """``message`` with its text parts replaced by ``text`` (its other parts kept, after it)."""
    others = tuple(p for p in message.parts if not isinstance(p, TextPart))
    return trusted(Message, role=message.role, parts=(TextPart(text=text), *others), agent=message.agent)


async def guard_input(rs: RunState, ctx: RunContext) -> None:
    """The root agent's input guards (those not ``parallel``), in order, on the user's message.

    Reads ``messages`` (the user's turn, last); writes the slice (``blocked``,
    ``parallel_due``) and, for a rewrite, ``messages`` (the user's turn replaced)."""
    g = guards(rs)
    found = guards_of(ctx.agent.input_guards)
    g.parallel_due = any(x.parallel for x in found)
    if not rs.messages:
        return
    text = _text_of(rs.messages[-1])
    for x in found:
        if x.parallel:
            continue
        said = await verdict(x, text, ctx)
        if isinstance(said, Block):
            block(rs, ctx, x, "input", said.message)
            return
        if isinstance(said, Rewrite):
            text = str(said.value)
            rs.messages = [*rs.messages[:-1], _with_text(rs.messages[-1], text)]


async def guard_first(rs: RunState, ctx: RunContext) -> None:
    """The first model call (``reason``'s work) while the ``parallel`` input guards run: the
    first block cancels the call (and the other guards); the stage ends once every guard has
    allowed the message and the call has ended.

    Reads and writes what ``reason`` does; writes the slice (``blocked``, ``parallel_due``)."""
    g = guards(rs)
    g.parallel_due = False
    found = [x for x in guards_of(ctx.agent.input_guards) if x.parallel]
    text = _text_of(rs.messages[-1]) if rs.messages else ""
    call: asyncio.Task[None] = asyncio.ensure_future(reason(rs, ctx))

    async def one(x: Guardrail) -> tuple[Guardrail, Verdict]:
        return x, await verdict(x, text, ctx)

    checks = [asyncio.ensure_future(one(x)) for x in found]
    try:
        for next_done in asyncio.as_completed(checks):
            x, said = await next_done
            if isinstance(said, Rewrite):
                said = Block(
                    f"the guard {x.name!r} runs in parallel with the model call and cannot rewrite the message"
                )
            if isinstance(said, Block):
                block(rs, ctx, x, "input", said.message)
                break
        else:
            await call
            return
    except BaseException:  # cancelled (the run's deadline, runner.cancel), or the call raised
        await _stop(call, *checks)
        raise
    await _stop(call, *checks)
    rs.response = None


async def _stop(*tasks: asyncio.Future[Any]) -> None:
    """Cancel ``tasks`` and wait for them to end (what they raise is theirs: dropped)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------------ output


async def guard_output(rs: RunState, ctx: RunContext) -> None:
    """The active agent's output guards, in order, on the final (or salvaged) answer's text.

    Reads ``text``; writes the slice and, for a rewrite, ``text`` and ``messages`` (the
    answer's turn), for a retry ``messages`` (a user turn with the guard's message)."""
    g = guards(rs)
    g.blocked, g.retry = None, False
    g.salvaging = rs.stage == GUARD_SALVAGED
    text = rs.text or ""
    for x in guards_of(ctx.agent.output_guards):
        said = await verdict(x, text, ctx)
        if isinstance(said, Rewrite):
            text = rs.text = str(said.value)
            at = _last_answer(rs)
            if at is not None:
                rs.messages = [*rs.messages[:at], _with_text(rs.messages[at], text), *rs.messages[at + 1 :]]
        elif isinstance(said, Block):
            block(rs, ctx, x, "output", said.message)
            if _may_retry(rs, g, x):
                g.retries[x.name] = g.retries.get(x.name, 0) + 1
                g.retry = True
                words = RETRY.format(name=x.name, message=said.message)
                rs.messages.append(trusted(Message, role="user", parts=(TextPart(text=words),), agent=rs.active_agent))
            return


def _may_retry(rs: RunState, g: Guards, x: Guardrail) -> bool:
    """The retry row will fire: the guard has retries left, and so have the run's budgets."""
    if g.salvaging or g.retries.get(x.name, 0) >= x.retries or GUARD_RETRIES.charged_out(rs):
        return False
    return all(within(rs) for within in WITHIN_BUDGETS)


def _last_answer(rs: RunState) -> int | None:
    for i in range(len(rs.messages) - 1, -1, -1):
        if rs.messages[i].role == "assistant":
            return i
    return None


# ------------------------------------------------------------------ tools


def guard_tool(call: ToolCall, rs: RunState, ctx: RunContext) -> Awaitable[CallOutcome] | None:
    """act's gate: the active agent's tool guards around the call (a call a person approved,
    run after a suspension, is not checked again)."""
    found = ctx.agent.tool_guards
    if not found or rs.stage != ACT:
        return None
    return _guarded(call, rs, ctx, guards_of(found))


async def _guarded(call: ToolCall, rs: RunState, ctx: RunContext, found: tuple[Guardrail, ...]) -> CallOutcome:
    """The guards before the call (a block answers it unrun; a rewrite changes its arguments),
    the call, then the guards after it (a block withholds the result; a rewrite replaces it)."""
    for x in found:
        if not x.after:
            said = await verdict(x, call, ctx)
            if isinstance(said, Rewrite) and not isinstance(said.value, dict):
                said = Block(f"a rewrite of a call gives its arguments as a dict, not {said.value!r}")
            if isinstance(said, Block):
                return _refused(call, rs, ctx, x, said.message)
            if isinstance(said, Rewrite):
                call = call.model_copy(update={"args": said.value})
    outcome = _rest(call, rs, ctx)
    if not isinstance(outcome, ToolResult | PendingRequest):
        outcome = await outcome
    if isinstance(outcome, PendingRequest):
        return outcome
    return await _after(call, outcome, rs, ctx, found)


async def _after(
    call: ToolCall, outcome: ToolResult, rs: RunState, ctx: RunContext, found: tuple[Guardrail, ...]
) -> ToolResult:
    for x in found:
        if x.after:
            said = await verdict(x, outcome, ctx)
            if isinstance(said, Block):
                return _refused(call, rs, ctx, x, said.message)
            if isinstance(said, Rewrite):
                outcome = value_result(call, said.value, ctx)
    return outcome


def _rest(call: ToolCall, rs: RunState, ctx: RunContext) -> CallOutcome | Awaitable[CallOutcome]:
    """The gates after this one (a user's extensions'), then the call itself."""
    gates = ctx.gates
    for gate in gates[gates.index(guard_tool) + 1 :] if guard_tool in gates else ():
        said = gate(call=call, rs=rs, ctx=ctx)
        if said is not None:
            return said  # type: ignore[no-any-return]
    return proceed(call, ctx, False)


def _refused(call: ToolCall, rs: RunState, ctx: RunContext, x: Guardrail, why: str) -> ToolResult:
    if x.halt:
        if guards(rs).blocked is None:
            block(rs, ctx, x, "tool", why)
    else:
        ctx.emit(ErrorOccurred, error=ErrorInfo(kind="blocked", message=f"tool guard {x.name!r}: {why}"))
    return result(call, f"the call of {call.name!r} was blocked by the guard {x.name!r}: {why}", True)


# ------------------------------------------------------------------ the feature

FIRST_CALL_ROWS: tuple[Row, ...] = tuple(
    Row(GUARD_FIRST, r.dest, r.guards, r.bounded_by, r.outcome, r.records_limit)
    for r in CORE_ROWS
    if r.source == REASON and r.guards != (cancel_requested,)
)
"""``guard_first`` makes the first model call: after it, ``reason``'s own rows (a retry goes
back to ``reason``)."""

GUARDRAILS = Extension(
    name=NAME,
    applies_to=guarded,
    states={
        GUARD_INPUT: guard_input,
        GUARD_FIRST: guard_first,
        GUARD_OUTPUT: guard_output,
        GUARD_SALVAGED: guard_output,
    },
    redirect={(START, PRE): GUARD_INPUT},
    remove=[(SALVAGE, DONE)],
    rows_before={
        (PRE, REASON): [Row(PRE, GUARD_FIRST, (parallel_guards_due,))],
        (POST, DECIDE): [Row(POST, GUARD_OUTPUT, (is_final_response,))],
        (ACT, DECIDE): [Row(ACT, DONE, (tool_blocked,), outcome="blocked")],
    },
    rows=[
        cancellable(GUARD_INPUT),
        Row(GUARD_INPUT, DONE, (input_blocked,), outcome="blocked"),
        Row(GUARD_INPUT, PRE),
        cancellable(GUARD_FIRST),
        Row(GUARD_FIRST, DONE, (input_blocked,), outcome="blocked"),
        *FIRST_CALL_ROWS,
        cancellable(GUARD_OUTPUT),
        Row(GUARD_OUTPUT, PRE, (output_retry_due, guard_retries_left, *WITHIN_BUDGETS), bounded_by="max_guard_retries"),
        Row(GUARD_OUTPUT, DONE, (output_blocked,), outcome="blocked"),
        Row(GUARD_OUTPUT, DECIDE),
        Row(SALVAGE, GUARD_SALVAGED, (has_response,)),
        Row(SALVAGE, DONE, outcome="limit", records_limit=True),
        cancellable(GUARD_SALVAGED),
        Row(GUARD_SALVAGED, DONE, (output_blocked,), outcome="blocked"),
        Row(GUARD_SALVAGED, DONE, outcome="salvaged"),
    ],
    budgets=[GUARD_RETRIES],
    guards={
        **{f.__name__: f for f in (input_blocked, output_blocked, tool_blocked, parallel_guards_due, output_retry_due)},
        "guard_retries_left": guard_retries_left,
    },
    slice=Guards,
    gate=guard_tool,
)
"""Guardrails: the ``guard_input``, ``guard_first`` and ``guard_output`` states, their rows and
act's gate, as one feature."""

__all__ = [
    "GUARDRAILS",
    "Block",
    "GuardVerdict",
    "Guardrail",
    "Guards",
    "Rewrite",
    "run_agents_with",
]
