"""``agent_tool``: an agent used as a tool of another agent.

Calling the tool runs the agent on the task the model gives it, as a child of the calling run
(:mod:`loopwright.runtime.nesting`): it charges the caller's budgets, ends by the caller's deadline and
counts toward ``Limits.max_depth``. It gets the calling run's ``deps`` (``ctx.deps`` in its
tools, instructions and callbacks), unless ``agent_tool(agent, deps=...)`` gives it its own.
The tool's result is the agent's answer; a run that does not answer (failed, cancelled, out of
budget with no salvage) is an error result naming the agent and why.

A child that waits (a tool of it needs a confirmation or a credential, or a long-running tool
has not given its result yet) makes the call wait too, as a workflow's child makes the workflow
wait: the calling run suspends, and the child's state is kept in the calling run's (its slice
``agent_tool``: a store that keeps the calling run keeps it). The calling run shows every request
the child waits on, all in one suspension — what runs is what was shown: each request's
``call_id`` is compound, the calling run's call and the child's request (``d1/r1``, ``d1/r2``;
two levels down ``f1/d1/r1``), its ``tool`` the path ``<this tool>.<the child's tool>``
(``billing.refund``; two levels down ``front.billing.refund``), its ``args``, ``kind`` and
``credential_key`` the child's; ``detail`` names the agent and the task it was given. The
calling run's resume hands the decisions down
(:class:`~loopwright.runtime.approvals.HandsDown`): the call runs again, once, and resumes the
child where it stopped with every decision given for it; the child's answer is the call's result.

- ``approve()`` runs the child's call as shown, exactly once; ``approve(args=..., note=...)``
  runs it with the edited arguments (the child's model is told, as for a plain call). The edit
  is checked against the child's tool's schema (a workflow's: its step's tool) when the top run
  is resumed: one that does not fit is refused (:class:`~loopwright.ResumeError`) and nothing runs.
- A long-running tool's result (``resume(..., {call_id: value})``) is handed down as it is: the
  child reads it as the call's result and goes on, and the long-running tool is not run again.
- A credential is handed down from the calling run's credentials (never saved).
- A denial is handed down too: the child's call is answered "denied by the user: ...", its
  other calls run, and its model reads the denial and goes on.
- A resume that decides some of the child's requests and not others goes on with what was
  decided, as a workflow's resume does: the child runs the decided calls and asks again for
  the rest (the calling run suspends again, showing them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..data.decisions import Approve, Deny
from ..data.errors import ConfigurationError, MachineError, ResumeError, ToolError
from ..data.events import PendingRequest
from ..data.run_state import RunState, register_slice
from ..durable.trust import check_saved_state
from ..runtime import nesting
from ..runtime.agent import Agent
from ..runtime.approvals import Asks, owner, problem_in
from ..runtime.tools import Tool, ToolContext
from .runner import Runner

NAME = "agent_tool"


@dataclass(slots=True)
class Held:
    """A call of the calling run whose child waits: where the child stopped, and what it asked."""

    saved: str
    """The child's state (JSON)."""
    asks: list[PendingRequest]
    """The child's requests, as the child shows them (its ids, its tools: a path ``b.refund``
    when the child's call waits on its own child)."""
    handed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The decisions handed down (by :meth:`Child.hand_down`, at the calling run's resume), by
    the child's request id: ``{"approve": {"args": ..., "note": ...}}``, ``{"deny": reason}``,
    ``{"result": value}`` or ``{"credential": True}`` (a credential is never saved: the call
    reads it from the calling run's credentials)."""


@dataclass(slots=True)
class Nested:
    """The calling run's slice (``RunState.features["agent_tool"]``): its ``agent_tool`` calls
    whose child waits for a person."""

    waiting: dict[str, Held] = field(default_factory=dict)
    """By the calling run's call id."""


register_slice(NAME, Nested)


class Child:
    """The nested run behind one ``agent_tool`` (its function's ``hands_down``): a person's
    decision on a call whose child waits is the child's (:class:`~loopwright.runtime.approvals.HandsDown`)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def edit_problem(self, call_id: str, args: dict[str, Any], rs: RunState) -> str | None:
        found = _asked(rs, call_id)
        if found is None:
            return None  # (the call finds no child and starts one: nothing of the edit runs)
        held, asked = found
        child = RunState.from_json(held.saved)
        agent = self.runner.tree.agents.get(child.active_agent)
        if agent is None:
            return None  # (the child's resume refuses its state, naming it)
        tools = agent.tools
        if asked.tool.partition(".")[0] not in tools:  # a workflow's: its step's tool, found in its tree
            tools = {t.name: t for one in _agents_under(agent) for t in one.tools.values()}
        return problem_in(tools, asked.call_id, asked.tool, args, child)

    def hand_down(self, request: PendingRequest, decision: Any, rs: RunState) -> None:
        found = _asked(rs, request.call_id)
        if found is None:
            return
        held, asked = found
        if isinstance(decision, Approve):  # (what was shown runs, or the person's edit of it)
            args = request.args if decision.args is None else decision.args
            held.handed[asked.call_id] = {"approve": {"args": dict(args), "note": decision.note}}
        elif isinstance(decision, Deny):
            held.handed[asked.call_id] = {"deny": decision.reason}
        elif asked.kind == "credential":
            held.handed[asked.call_id] = {"credential": True}
        else:
            held.handed[asked.call_id] = {"result": decision}

    def shown_problem(self, request: PendingRequest, rs: RunState) -> str | None:
        found = _asked(rs, request.call_id)
        if found is None:
            return f"its id names no request of the agent {self.runner.agent.name!r} the call runs"
        held, asked = found
        tool = request.tool.partition(".")[2]
        if tool != asked.tool or request.kind != asked.kind:
            return f"it shows {tool!r} ({request.kind}) but the agent's request is for {asked.tool!r} ({asked.kind})"
        try:
            child = RunState.from_json(held.saved)
            check_saved_state(child, self.runner.machine, self.runner.tree.agents)
        except (ResumeError, ValueError) as exc:
            return f"the agent's saved run cannot be resumed: {exc}"
        if held.asks != _pending(child):
            return "what the calling run keeps of the agent's requests is not what the agent's saved run waits on"
        return None

    def decisions(self, held: Held, ctx: ToolContext) -> dict[str, Any]:
        """The decisions the child is resumed with (a credential the calling run was not given
        again is left out: the child asks for it again)."""
        shown = {asked.call_id: asked for asked in held.asks}
        out: dict[str, Any] = {}
        for call_id, handed in held.handed.items():
            asked = shown[call_id]
            if "approve" in handed:
                args, note = handed["approve"]["args"], handed["approve"]["note"]
                out[call_id] = Approve(args=None if args == asked.args else args, note=note)
            elif "deny" in handed:
                out[call_id] = Deny(reason=handed["deny"])
            elif "credential" in handed:
                value = ctx.credentials.get(asked.credential_key or "")
                if value is not None:
                    out[call_id] = value
            else:
                out[call_id] = handed["result"]
        if not out:
            waits = ", ".join(f"{ctx.call_id}/{a.call_id} ({a.tool}, {a.kind})" for a in held.asks)
            raise ToolError(
                f"the call's agent waits on {waits}, and no decision was handed down to it; resume the calling run "
                "with a decision for each"
            )
        return out


def agent_tool(
    agent: Agent,
    *,
    name: str | None = None,
    description: str | None = None,
    deps: Any = None,
    unverified: bool = False,
) -> Tool:
    """A tool that hands a task to ``agent`` and answers with its final text.

    ``name`` defaults to the agent's name and ``description`` to its ``description``; the
    model fills one argument, ``task`` (the agent sees nothing else of the conversation).
    ``deps``: the agent's own dependencies; left out, it gets the calling run's ``deps``.
    An agent whose machine :func:`~loopwright.machines.verify` rejects is refused here
    (:class:`~loopwright.MachineError`, naming the violation) unless ``unverified=True``, as
    ``Runner`` refuses it. A child that waits (a person, a long-running tool's result) makes the
    calling run wait (see the module docstring)."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"agent_tool takes an Agent, got {type(agent).__name__}")
    try:
        runner = Runner(agent, unverified=unverified)
    except MachineError as exc:  # (the Runner's refusal, with this door's opt-in)
        raise MachineError(
            str(exc).replace("Runner(agent, unverified=True)", "agent_tool(agent, unverified=True)")
        ) from None
    named = name or agent.name
    child = Child(runner)

    async def run_agent(ctx: ToolContext, task: str) -> str | Asks:
        """Hand a task to the agent.

        Args:
            task: The task, in full: the agent sees nothing else of this conversation.
        """
        given = ctx.deps if deps is None else deps
        up = nesting.parent()
        rs = up.state if up is not None else None
        held = _held(rs, ctx.call_id)
        if held is not None:  # the child waited: it goes on where it stopped, with the decision
            decisions = child.decisions(held, ctx)
            result = await runner.resume(RunState.from_json(held.saved), decisions, deps=given)
        else:
            result = await runner.run(task, deps=given)
        if result.outcome in ("final", "salvaged"):
            return result.output or ""
        if result.outcome == "suspended":
            return _wait(agent, named, task, result, rs, ctx.call_id)
        why = result.error.message if result.error is not None else f"out of budget ({result.limit})"
        raise ToolError(f"agent {agent.name!r} failed ({result.outcome}): {why}")

    run_agent.hands_down = child  # type: ignore[attr-defined]  # (on the function: a functools.wraps copy keeps it)
    words = description or agent.description or f"Ask the agent {agent.name!r} to do a task and answer with its result."
    return Tool(run_agent, name=named, description=words, long_running=can_wait(agent))


def can_wait(agent: Agent) -> bool:
    """Some agent under ``agent`` (its sub-agents, a workflow's steps) has a tool that may wait for a person."""
    return any(
        any(t.can_wait for t in one.tools.values()) or any(ts.can_wait for ts in one.toolsets)
        for one in _agents_under(agent)
    )


def _agents_under(agent: Agent) -> Iterator[Agent]:
    """``agent`` and every agent under it: its sub-agents, a workflow's steps (and theirs)."""
    for one in agent.walk():
        yield one
        kids = getattr(one, "walk_children", None)
        if kids is not None:
            for kid in kids():
                yield from _agents_under(kid)


def _pending(rs: RunState) -> list[PendingRequest]:
    """What the run ``rs`` waits on (every slice that says)."""
    return [p for part in rs.features.values() if (ask := getattr(part, "pending_requests", None)) for p in ask()]


def _asked(rs: RunState, request_id: str) -> tuple[Held, PendingRequest] | None:
    """The waiting child and its request that the calling run's request ``request_id``
    (compound: ``<call>/<the child's request>``) shows; None: none."""
    nested = rs.features.get(NAME)
    if nested is None:
        return None
    call_id = owner(request_id, nested.waiting)
    if call_id is None or call_id == request_id:
        return None
    held: Held = nested.waiting[call_id]
    inner = request_id[len(call_id) + 1 :]
    return next(((held, asked) for asked in held.asks if asked.call_id == inner), None)


def _held(rs: RunState | None, call_id: str | None) -> Held | None:
    """The waiting child of the call ``call_id`` of the calling run ``rs``, taken out of its
    slice (None: no child waits)."""
    nested = rs.features.get(NAME) if rs is not None and call_id is not None else None
    if nested is None or call_id not in nested.waiting:
        return None
    held: Held = nested.waiting.pop(call_id)
    if not nested.waiting:
        del rs.features[NAME]  # type: ignore[union-attr]
    return held


def _wait(agent: Agent, tool_name: str, task: str, result: Any, rs: RunState | None, call_id: str | None) -> Asks:
    """The child waits: the call waits with it, showing every request of the child (its call's
    tool, as a path under this tool, and its arguments; its id under the call's)."""
    if rs is None or call_id is None or not result.pending:
        raise ToolError(f"agent {agent.name!r} waits, and this call of it is not part of a run that can wait")
    nested = rs.features.get(NAME)
    if nested is None:
        nested = rs.features[NAME] = Nested()
    asks = list(result.pending)
    nested.waiting[call_id] = Held(result.run_state.to_json().decode(), asks)
    given = f"agent {agent.name!r}, asked {tool_name}({json.dumps(dict(task=task), default=str)}), waits for"
    shown = tuple(
        PendingRequest(  # (what waits is the child's call: what runs is what is shown)
            call_id=f"{call_id}/{asked.call_id}",
            tool=f"{tool_name}.{asked.tool}",
            args=dict(asked.args),
            kind=asked.kind,
            detail=f"{given} {_what(asked)}",
            credential_key=asked.credential_key,
        )
        for asked in asks
    )
    first = shown[0]
    return Asks(
        call_id=call_id, tool=first.tool, args=first.args, kind=first.kind, detail=first.detail,
        credential_key=first.credential_key, asks=shown,
    )  # fmt: skip


def _what(asked: PendingRequest) -> str:
    what = "the result of its long-running call" if asked.kind == "result" else f"your {asked.kind} of its call"
    said = f": {asked.detail}" if asked.detail else ""
    return f"{what} {asked.tool}({json.dumps(asked.args, sort_keys=True, default=str)}){said}"


__all__ = ["agent_tool"]
