"""Invariants every run of every agent must keep, usable in any test."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Any

from ..data.errors import ModelError
from ..data.events import (
    Event,
    Message,
    ModelResponded,
    ModelResponse,
    StateEntered,
    TextPart,
    ToolAnswered,
    ToolCall,
    ToolCalled,
    ToolResult,
)
from ..data.result import RunResult
from ..features import machine_for
from ..models.scripted import ScriptedModel
from ..runtime.agent import Agent
from ..table.machine import CORE, LoopMachine, abort_row


class InvariantViolation(AssertionError):
    """A run broke an invariant. The message names it, shows the trace and the script."""


def describe_script(script: Sequence[Any]) -> str:
    """A script, one numbered line per reply, as a person would read it."""
    lines = []
    for i, item in enumerate(script, 1):
        if isinstance(item, ModelError):
            lines.append(f"  {i}. raise ModelError({item.message!r}, status={item.status}, retryable={item.retryable})")
        elif isinstance(item, ModelResponse):
            parts = []
            for p in item.parts:
                if isinstance(p, ToolCall):
                    args = ", ".join(f"{k}={v!r}" for k, v in p.args.items())
                    parts.append(f"{p.name}({args})")
                elif isinstance(p, TextPart):
                    parts.append(f"text {p.text!r}")
            stop = f" [{item.stop_reason}]" if item.stop_reason not in (None, "end_turn", "tool_use") else ""
            lines.append(f"  {i}. " + (" + ".join(parts) or "(empty reply)") + stop)
        else:
            lines.append(f"  {i}. {item!r}")
    return "\n".join(lines) or "  (empty script)"


def _machine(agent: Agent | None) -> LoopMachine:
    return machine_for(agent) if agent is not None else CORE


class _Checker:
    def __init__(self, trace: list[str], events: list[Event], script: Sequence[Any] | None) -> None:
        self.trace, self.events, self.script = trace, events, script

    def fail(self, invariant: str, detail: str) -> None:
        script = (
            "" if self.script is None else f"\n  script ({len(self.script)} replies):\n{describe_script(self.script)}"
        )
        raise InvariantViolation(
            f"loopwright invariant violated: {invariant}\n  {detail}\n  trace: {' -> '.join(self.trace)}{script}"
        )


def check_partial(
    trace: list[str], events: list[Event], machine: LoopMachine, script: Any = None, *, called: Iterable[str] = ()
) -> None:
    """Invariants that hold at every step of a run, finished or not. ``called``: ids of calls
    made before the first of ``events`` (a run resumed from a saved state without its earlier
    events: the calls of its history)."""
    c = _Checker(trace, events, script)
    _check_seq(c, events)
    _check_path(c, trace, events, machine)
    _check_terminal_ends(c, trace, machine)
    _check_calls_answered_once(c, events, set(called))


def _check_seq(c: _Checker, events: list[Event]) -> None:
    seqs = [e.seq for e in events]
    if any(b <= a for a, b in pairwise(seqs)) or (events and events[0].type == "run_started" and seqs[0] != 1):
        c.fail("event seq strictly increases", f"seq values were {seqs}")


def _check_path(c: _Checker, trace: list[str], events: list[Event], machine: LoopMachine) -> None:
    rows = {(r.source, r.dest, r.label) for r in machine.rows}
    rows |= {(r.source, r.dest, r.label) for r in map(abort_row, machine.states) if r.source not in machine.terminals}
    rows |= _engine_rows(machine)
    steps = [(e.source, e.state, e.guard) for e in events if isinstance(e, StateEntered)]
    for step in steps:
        if step not in rows:
            c.fail("the trace is a path of the machine", f"{step[0]} -> {step[1]} ({step[2]}) is not a row")
    for (_, dest, _), (source, _, _) in pairwise(steps):
        if dest != source:
            c.fail("the trace is a path of the machine", f"a step from {source!r} follows one into {dest!r}")
    # a resumed run's events begin at the resume; its trace holds the whole run
    resumed = not events or events[0].type != "run_started"
    expected = [s[1] for s in steps] if resumed else [machine.initial, *[s[1] for s in steps]]
    if (trace[-len(expected) :] if resumed and expected else trace) != expected:
        c.fail("the trace is a path of the machine", "the state_entered events do not match the trace")


ENGINE_STOPPED = "engine_stopped"
"""The guard of the engine's own rows (:func:`loopwright.loop.run.engine_stopped`): the run
ended at ``Limits.max_transitions``, past ``timeout_s`` or on a cancellation the table did not answer."""


def _engine_rows(machine: LoopMachine) -> set[tuple[str, str, str]]:
    """The engine's rows: any non-terminal state into ``done`` or ``cancelled`` (those the machine
    has) through ``engine_stopped`` (without them it ends the run by the abort row)."""
    ends = [t for t in ("done", "cancelled") if t in machine.terminals]
    return {(s, t, ENGINE_STOPPED) for s in machine.states if s not in machine.terminals for t in ends}


def _check_terminal_ends(c: _Checker, trace: list[str], machine: LoopMachine) -> None:
    if any(s in machine.terminals for s in trace[:-1]):
        c.fail("a terminal state ends the run", "the run left a terminal state")


def _check_calls_answered_once(c: _Checker, events: list[Event], before: set[str]) -> None:
    called: set[str] = set()
    for e in events:
        if isinstance(e, ToolCalled):
            if e.call_id in called:
                c.fail("every tool call answered exactly once", f"call id {e.call_id} was called twice")
            called.add(e.call_id)
        elif isinstance(e, ToolAnswered) and e.call_id not in called and e.call_id not in before:
            c.fail("every tool call answered exactly once", f"a result for {e.call_id}, which was never called")


def _earlier_calls(events: list[Event], messages: list[Message]) -> set[str]:
    """The calls made before the first event, when the events do not begin at the run's start
    (a run resumed from ``RunState.from_json`` without a store): those of its history."""
    if events and events[0].type == "run_started":
        return set()
    logged = {e.call_id for e in events if isinstance(e, ToolCalled)}
    return {p.id for m in messages for p in m.parts if isinstance(p, ToolCall)} - logged


def _held_calls(result: RunResult) -> set[str]:
    """The calls a waiting run has not answered yet: a suspended run's pending ones; a paused
    run's last turn's, when that turn is the model's (it may have paused before ``act``)."""
    if result.outcome == "suspended":
        return {p.call_id for p in result.pending}
    last = result.messages[-1] if result.messages else None
    if result.outcome != "paused" or last is None or last.role != "assistant":
        return set()
    return {p.id for p in last.parts if isinstance(p, ToolCall)}


_WAITING = frozenset({"suspended", "paused"})


def assert_run_invariants(
    result: RunResult, agent: Agent | None = None, *, script: Sequence[Any] | None = None
) -> None:
    """Check a run: it ended in a terminal state (or, suspended or paused, it waits; the calls
    it holds are not yet answered); its passes through ``reason``
    are within ``max_iterations``; every tool call was answered exactly once with the same call
    id (in the events and in the history); its trace is a path of the agent's machine; event
    seq strictly increases; the tool calls executed are within ``max_tool_calls``; tokens and
    the cost in USD (when known) are within budget plus at most one step; in the history, every
    turn of calls is answered by the next turn, and every turn of answers answers the turn before it.
    Raises :class:`InvariantViolation` naming the invariant, with the trace and the script
    (``script``, or the agent's ScriptedModel script)."""
    machine = _machine(agent)
    if script is None and agent is not None and isinstance(agent.model, ScriptedModel):
        script = agent.model.script
    events, trace = result.events, result.trace
    before = _earlier_calls(events, result.messages)
    check_partial(trace, events, machine, script, called=before)
    c = _Checker(trace, events, script)
    if result.outcome in _WAITING:
        if result.outcome == "suspended" and trace[-1] not in machine.waiting:
            c.fail("a suspended run waits in a waiting state", f"it stopped in {trace[-1]!r}")
    elif trace[-1] not in machine.terminals:
        c.fail("the run ends in a terminal state", f"it stopped in {trace[-1]!r}")
    limits = agent.limits if agent is not None else None
    if limits is not None and result.iterations > limits.max_iterations:
        c.fail("passes through reason <= max_iterations", f"{result.iterations} > {limits.max_iterations}")
    called = Counter(e.call_id for e in events if isinstance(e, ToolCalled))
    answered = Counter(e.call_id for e in events if isinstance(e, ToolAnswered))
    held = _held_calls(result)
    missing = sorted(set(called) - set(answered) - held)
    surplus = answered - called
    surplus.subtract(before)  # called before the first event: answered once after it
    extra = sorted((+surplus).elements())
    if missing or extra:
        c.fail(
            "every tool call answered exactly once", f"unanswered: {missing}; answered without a call or twice: {extra}"
        )
    _check_history(c, result.messages, held)
    if limits is not None:
        _check_budgets(c, result, limits.max_tool_calls, limits.max_total_tokens)
        _check_cost(c, result, limits.max_cost_usd)


def _check_history(c: _Checker, messages: list[Message], held: Collection[str] = ()) -> None:
    """Both ways: the turn after a turn of calls answers exactly those calls, in order; a turn
    of answers answers exactly the calls of the turn before it. The last turn of a waiting
    run's (its calls ``held``) is answered when the run goes on."""
    before: list[str] = []
    for i, message in enumerate(messages):
        calls = [p.id for p in message.parts if isinstance(p, ToolCall)]
        answers = [p.call_id for p in message.parts if isinstance(p, ToolResult)]
        if answers and answers != before:
            c.fail(
                "every tool call answered exactly once",
                f"history turn {i} answers {answers} but the turn before calls {before}",
            )
        if calls and not (i == len(messages) - 1 and held):
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = [p.call_id for p in following.parts if isinstance(p, ToolResult)] if following else []
            if answered != calls:
                c.fail(
                    "every tool call answered exactly once",
                    f"history turn {i} calls {calls} but the next turn answers {answered}",
                )
        before = calls


def _check_budgets(c: _Checker, result: RunResult, max_calls: int | None, max_tokens: int | None) -> None:
    responses = [e.response for e in result.events if isinstance(e, ModelResponded)]
    if max_calls is not None and result.tool_calls > max_calls:
        c.fail("tool calls executed <= max_tool_calls", f"{result.tool_calls} ran with max_tool_calls={max_calls}")
    if max_tokens is not None:
        largest = max((r.usage.total_tokens for r in responses), default=0)
        if result.usage.total_tokens > max_tokens - 1 + 2 * largest:  # the crossing step + the salvage call
            c.fail(
                "tokens within budget plus at most one step",
                f"{result.usage.total_tokens} tokens with max_total_tokens={max_tokens}, largest reply {largest}",
            )


def scripted(agent: Agent, script: Any, each: Callable[[Agent], dict[str, Any]] | None = None) -> Agent:
    """A copy of the tree ``agent`` is the root of, in which every agent answers from one
    ScriptedModel of ``script`` (whichever agent is active takes the next reply). ``each``
    gives more changes for each agent of the copy (e.g. ``{"before_tool": ...}``)."""
    model = ScriptedModel(script)

    def rebuild(member: Agent) -> Agent:
        own = each(member) if each is not None else {}
        return member.replace(model=model, sub_agents=[rebuild(s) for s in member.sub_agents], **own)

    return rebuild(agent)


def _check_cost(c: _Checker, result: RunResult, max_cost: float | None) -> None:
    """Spend within ``max_cost_usd`` plus the crossing step and the salvage call (the two dearest
    replies at most); an unknown cost (a model with no price) is not checked: it is not a figure."""
    if max_cost is None or result.cost_usd is None:
        return
    replies = [e.response.usage.cost_usd or Decimal(0) for e in result.events if isinstance(e, ModelResponded)]
    dearest = sorted(replies, reverse=True)[:2]
    if result.cost_usd > Decimal(str(max_cost)) + sum(dearest, Decimal(0)):
        c.fail(
            "cost within max_cost_usd plus at most one step",
            f"${result.cost_usd} spent with max_cost_usd={max_cost}, dearest replies {[str(d) for d in dearest]}",
        )
