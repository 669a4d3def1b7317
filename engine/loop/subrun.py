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
``agent_tool``: a store that keeps the calling run keeps it). The request shown is the child's
call — what runs is what was shown: its ``tool`` is the path ``<this tool>.<the child's tool>``
(``billing.refund``; two levels down, ``front.billing.refund``), its ``args``, ``kind`` and
``credential_key`` the child's, its ``call_id`` the calling run's call; ``detail`` names the
agent and the task it was given. The calling run's resume hands the decision down
(:class:`~loopwright.runtime.approvals.HandsDown`): the call runs again and resumes the child
where it stopped, with that decision, and the child's answer is the call's result.

- ``approve()`` runs the child's call as shown, exactly once; ``approve(args=..., note=...)``
  runs it with the edited arguments (the child's model is told, as for a plain call). The edit
  is checked against the child's tool's schema (a workflow's: its step's tool) when the top run
  is resumed: one that does not fit is refused (:class:`~loopwright.ResumeError`) and nothing runs.
- A long-running tool's result (``resume(..., {call_id: value})``) is handed down as it is: the
  child reads it as the call's result and goes on, and the long-running tool is not run again.
- A credential is handed down from the calling run's credentials (never saved).
- A denial answers the call itself ("denied by the user: ..."): the child is not resumed.

A child waiting on several calls at once asks for them one at a time (the calling run shows its
first request; resumed, the child asks for the next): the calling run holds one request per
call of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..data.decisions import Approve
from ..data.errors import ConfigurationError, MachineError, ToolError
from ..data.events import PendingRequest
from ..data.run_state import RunState, register_slice
from ..runtime import nesting
from ..runtime.agent import Agent
from ..runtime.approvals import problem_in
from ..runtime.tools import Tool, ToolContext
from .runner import Runner

NAME = "agent_tool"


@dataclass(slots=True)
class Held:
    """A call of the calling run whose child waits: where the child stopped, and what it asked."""

    saved: str
    """The child's state (JSON)."""
    call: str
    """The id of the child's call the decision is for."""
    kind: str
    tool: str
    """The child's request's tool (a path, ``b.refund``, when the child's call waits on its own child)."""
    args: dict[str, Any]
    """The arguments the child's request shows (the calling run's request shows them too)."""
    key: str = ""
    """A credential's key."""
    handed: dict[str, Any] | None = None
    """The decision handed down (by :meth:`Child.hand_down`, at the calling run's resume):
    ``{"approve": {"args": ..., "note": ...}}`` or ``{"result": value}``; a credential is not
    kept (it is never saved): the call reads it from the calling run's credentials."""


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
        held = _waiting(rs).get(call_id)
        if held is None:
            return None  # (the call finds no child and starts one: nothing of the edit runs)
        child = RunState.from_json(held.saved)
        agent = self.runner.tree.agents.get(child.active_agent)
        if agent is None:
            return None  # (the child's resume refuses its state, naming it)
        tools = agent.tools
        if held.tool.partition(".")[0] not in tools:  # a workflow's: its step's tool, found in its tree
            tools = {t.name: t for one in _agents_under(agent) for t in one.tools.values()}
        return problem_in(tools, held.call, held.tool, args, child)

    def hand_down(self, request: PendingRequest, decision: Any, rs: RunState) -> None:
        held = _waiting(rs).get(request.call_id)
        if held is None:
            return
        if isinstance(decision, Approve):  # (what was shown runs, or the person's edit of it)
            args = request.args if decision.args is None else decision.args
            held.handed = {"approve": {"args": dict(args), "note": decision.note}}
        else:
            held.handed = {"result": decision}

    def decision(self, held: Held, ctx: ToolContext) -> Any:
        """The decision the child is resumed with."""
        if held.kind == "credential":
            return ctx.credentials.get(held.key)
        handed = held.handed
        if handed is None:
            raise ToolError(
                f"the call waits for a {held.kind} of {held.tool}, and none was handed down to it; resume the "
                f"calling run with a decision for call {ctx.call_id}"
            )
        if "approve" in handed:
            args, note = handed["approve"]["args"], handed["approve"]["note"]
            return Approve(args=None if args == held.args else args, note=note)
        return handed["result"]


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

    async def run_agent(ctx: ToolContext, task: str) -> str | PendingRequest:
        """Hand a task to the agent.

        Args:
            task: The task, in full: the agent sees nothing else of this conversation.
        """
        given = ctx.deps if deps is None else deps
        up = nesting.parent()
        rs = up.state if up is not None else None
        held = _held(rs, ctx.call_id)
        if held is not None:  # the child waited: it goes on where it stopped, with the decision
            decision = child.decision(held, ctx)
            result = await runner.resume(RunState.from_json(held.saved), {held.call: decision}, deps=given)
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


def _waiting(rs: RunState) -> dict[str, Held]:
    nested = rs.features.get(NAME)
    return nested.waiting if nested is not None else {}


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


def _wait(
    agent: Agent, tool_name: str, task: str, result: Any, rs: RunState | None, call_id: str | None
) -> PendingRequest:
    """The child waits: the call waits with it, showing the child's first request (its call's
    tool, as a path under this tool, and its arguments)."""
    if rs is None or call_id is None or not result.pending:
        raise ToolError(f"agent {agent.name!r} waits, and this call of it is not part of a run that can wait")
    asked = result.pending[0]
    nested = rs.features.get(NAME)
    if nested is None:
        nested = rs.features[NAME] = Nested()
    nested.waiting[call_id] = Held(
        result.run_state.to_json().decode(), asked.call_id, asked.kind, asked.tool, dict(asked.args),
        asked.credential_key or "",
    )  # fmt: skip
    what = "the result of its long-running call" if asked.kind == "result" else f"your {asked.kind} of its call"
    said = f": {asked.detail}" if asked.detail else ""
    return PendingRequest(  # (what waits is the child's call: what runs is what is shown)
        call_id=call_id,
        tool=f"{tool_name}.{asked.tool}",
        args=dict(asked.args),
        kind=asked.kind,
        detail=f"agent {agent.name!r}, asked {tool_name}({json.dumps(dict(task=task), default=str)}), waits for "
        f"{what} {asked.tool}({json.dumps(asked.args, sort_keys=True, default=str)}){said}",
        credential_key=asked.credential_key,
    )


__all__ = ["agent_tool"]
