"""``agent_tool``: an agent used as a tool of another agent.

Calling the tool runs the agent on the task the model gives it, as a child of the calling run
(:mod:`loopwright.runtime.nesting`): it charges the caller's budgets, ends by the caller's deadline and
counts toward ``Limits.max_depth``. It gets the calling run's ``deps`` (``ctx.deps`` in its
tools, instructions and callbacks), unless ``agent_tool(agent, deps=...)`` gives it its own.
The tool's result is the agent's answer; a run that does not answer (failed, cancelled, out of
budget with no salvage) is an error result naming the agent and why.

A child that waits for a person (a tool of it needs a confirmation or a credential) makes the
call wait too, as a workflow's child makes the workflow wait: the calling run suspends with the
child's request (its tool, arguments and kind; the call id is the calling run's), and the
child's state is kept in the calling run's (its slice ``agent_tool``: a store that keeps the
calling run keeps it). Resumed with ``approve()`` (or the credential), the call runs again and
resumes the child where it stopped, with that decision: the approved call runs exactly once, and
the child's answer is the call's result. The request shown is the calling run's call (its tool
and ``task``: what runs is what was shown), its ``detail`` naming the child's call and
arguments. A child waiting for several calls asks for them one at
a time. A denial answers the call itself ("denied by the user: ..."): the child is not resumed.
An ``approve(args=...)`` edit is not passed down (the child's call runs as it asked). A child
waiting for a long-running tool's result is an error result, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..data.decisions import Approve
from ..data.errors import ConfigurationError, MachineError, ToolError
from ..data.events import PendingRequest
from ..data.run_state import RunState, register_slice
from ..runtime import nesting
from ..runtime.agent import Agent
from ..runtime.tools import Tool, ToolContext
from .runner import Runner

NAME = "agent_tool"


@dataclass(slots=True)
class Nested:
    """The calling run's slice (``RunState.features["agent_tool"]``): its ``agent_tool`` calls
    whose child waits for a person."""

    waiting: dict[str, list[str]] = field(default_factory=dict)
    """By the calling run's call id: the child's saved state (JSON), and the id of the child's
    call the decision is for."""


register_slice(NAME, Nested)


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
    ``Runner`` refuses it. A child that waits for a person makes the calling run wait (see the module docstring)."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"agent_tool takes an Agent, got {type(agent).__name__}")
    try:
        runner = Runner(agent, unverified=unverified)
    except MachineError as exc:  # (the Runner's refusal, with this door's opt-in)
        raise MachineError(
            str(exc).replace("Runner(agent, unverified=True)", "agent_tool(agent, unverified=True)")
        ) from None
    named = name or agent.name

    async def run_agent(ctx: ToolContext, task: str) -> str | PendingRequest:
        """Hand a task to the agent.

        Args:
            task: The task, in full: the agent sees nothing else of this conversation.
        """
        given = ctx.deps if deps is None else deps
        up = nesting.parent()
        held = _held(up.state if up is not None else None, ctx.call_id)
        if held is not None:  # the child waited: the person decided; it goes on where it stopped
            saved, child_call, kind, key = held
            decision: Any = Approve() if kind == "confirmation" else ctx.credentials.get(key)
            result = await runner.resume(RunState.from_json(saved), {child_call: decision}, deps=given)
        else:
            result = await runner.run(task, deps=given)
        if result.outcome in ("final", "salvaged"):
            return result.output or ""
        if result.outcome == "suspended":
            return _wait(agent, named, task, result, up.state if up is not None else None, ctx.call_id)
        why = result.error.message if result.error is not None else f"out of budget ({result.limit})"
        raise ToolError(f"agent {agent.name!r} failed ({result.outcome}): {why}")

    words = description or agent.description or f"Ask the agent {agent.name!r} to do a task and answer with its result."
    return Tool(run_agent, name=named, description=words, long_running=can_wait(agent))


def can_wait(agent: Agent) -> bool:
    """Some agent under ``agent`` (its sub-agents, a workflow's steps) has a tool that may wait for a person."""
    for one in agent.walk():
        if any(t.can_wait for t in one.tools.values()) or any(ts.can_wait for ts in one.toolsets):
            return True
        kids = getattr(one, "walk_children", None)
        if kids is not None and any(can_wait(kid) for kid in kids()):
            return True
    return False


def _held(rs: RunState | None, call_id: str | None) -> tuple[str, str, str, str] | None:
    """The waiting child of the call ``call_id`` of the calling run ``rs``, taken out of its
    slice: its saved state, its call's id, kind and credential key (None: no child waits)."""
    nested = rs.features.get(NAME) if rs is not None and call_id is not None else None
    if nested is None or call_id not in nested.waiting:
        return None
    saved, child_call, kind, key = nested.waiting.pop(call_id)
    if not nested.waiting:
        del rs.features[NAME]  # type: ignore[union-attr]
    return saved, child_call, kind, key


def _wait(
    agent: Agent, tool_name: str, task: str, result: Any, rs: RunState | None, call_id: str | None
) -> PendingRequest:
    """The child waits for a person: the call waits with it, asking the child's first request."""
    asked = next((p for p in result.pending if p.kind in ("confirmation", "credential")), None)
    if asked is None or rs is None or call_id is None:
        raise ToolError(
            f"agent {agent.name!r} waits for a long-running tool's result, which a nested run cannot wait for"
        )
    nested = rs.features.get(NAME)
    if nested is None:
        nested = rs.features[NAME] = Nested()
    nested.waiting[call_id] = [
        result.run_state.to_json().decode(),
        asked.call_id,
        asked.kind,
        asked.credential_key or "",
    ]
    shown = f"{asked.tool}({json.dumps(asked.args, sort_keys=True, default=str)})"
    said = f": {asked.detail}" if asked.detail else ""
    return PendingRequest(  # (what waits is this call, as the model made it: what runs is what is shown)
        call_id=call_id,
        tool=tool_name,
        args=dict(task=task),
        kind=asked.kind,
        detail=f"agent {agent.name!r} waits for your {asked.kind} of its call {shown}{said}",
        credential_key=asked.credential_key,
    )


__all__ = ["agent_tool"]
