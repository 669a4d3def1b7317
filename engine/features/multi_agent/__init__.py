"""multi_agent: agent trees, and the transfer between agents as a bounded edge.

An agent with sub-agents runs on the core composed with this feature. It adds:

- the state ``transfer`` (its handler hands the run to the target: the active agent changes,
  the target's own ``limits=`` start bounding its turn, and the task arrives as a user turn);
- the rows ``decide -> transfer`` (``transfer_requested`` and every budget has room, bounded
  by ``max_transfers``, not past ``max_ping_pong``), ``transfer -> preprocess``, and the guard
  ``no_transfer_requested`` in front of ``decide -> preprocess`` (a refused transfer is not a
  reason to go round: the run goes to salvage with the budget named);
- a per-call gate in act that takes ``transfer_to_agent`` calls (accepted, or an error result
  naming the agents this one may reach), and a request processor that offers
  ``transfer_to_agent`` to agents with somewhere to go and shows each agent the history as it
  sees it (its history policy);
- its slice of run state, :class:`Transfers`; its budgets ``max_transfers``, ``max_ping_pong``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loopwright.data.events import Message, ModelRequest, TextPart, ToolCall, ToolResult, ToolSpec, Transferred, trusted
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import TRANSFER_TOOL, Agent
from loopwright.runtime.calls import result
from loopwright.runtime.context import RunContext
from loopwright.table.budgets import Budget, start_turn
from loopwright.table.machine import DECIDE, PRE, WITHIN_BUDGETS, Extension, Row, cancellable

NAME = "multi_agent"
TRANSFER = "transfer"


@dataclass(slots=True)
class Transfers:
    """The multi-agent slice of a run's state (``RunState.features["multi_agent"]``)."""

    to: str | None = None
    """A transfer the model asked for in the latest act (cleared by the transfer stage)."""
    task: str = ""
    hops: list[tuple[str, str]] = field(default_factory=list)
    """Transfers taken so far, as (from agent, to agent)."""
    branch_start: dict[str, int] = field(default_factory=dict)
    """For agents with the isolated history policy: where their branch of the history starts."""


def transfers(rs: RunState) -> Transfers:
    return rs.features[NAME]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ guards and budgets


def transfer_requested(rs: RunState) -> bool:
    """The latest act accepted a ``transfer_to_agent`` call."""
    return transfers(rs).to is not None


def no_transfer_requested(rs: RunState) -> bool:
    """No transfer is pending."""
    return transfers(rs).to is None


def ping_pong_transfers(rs: RunState) -> int:
    """How many transfers at the end of the run (the requested one included) bounce between
    the same two agents."""
    t = transfers(rs)
    hops = [*t.hops, (rs.active_agent, t.to)] if t.to else t.hops
    if not hops:
        return 0
    pair = set(hops[-1])
    count = 0
    for hop in reversed(hops):
        if set(hop) != pair:
            break
        count += 1
    return count


def transfers_taken(rs: RunState) -> int:
    return len(transfers(rs).hops)


TRANSFERS = Budget(
    "max_transfers",
    "transfers between agents (max_transfers={value})",
    "within_transfer_budget",
    used=transfers_taken,
    cycle=True,
)
PING_PONG = Budget(
    "max_ping_pong",
    "back-and-forth transfers between the same agents (max_ping_pong={value})",
    "not_ping_pong",
    used=ping_pong_transfers,
    inclusive=True,
)
within_transfer_budget = TRANSFERS.guard
not_ping_pong = PING_PONG.guard


# ------------------------------------------------------------------ the transfer state


async def transfer(rs: RunState, ctx: RunContext) -> None:
    """Hand the run to the agent the model asked for.

    Reads the slice's ``to`` and ``task``; writes ``active_agent``, the slice's ``hops`` (and,
    for a target with the isolated history policy, ``branch_start``), ``messages`` (the task,
    as a user turn addressed to the target) and the turn budgets' start."""
    t = transfers(rs)
    target = t.to
    if target is None:  # the table only routes here with a transfer pending
        return
    source, task = rs.active_agent, t.task
    t.hops.append((source, target))
    t.to, t.task = None, ""
    rs.active_agent = target
    ctx.switch_agent(target)
    start_turn(rs, None if ctx.agent is ctx.tree.root else ctx.agent.own_limits)
    if ctx.agent.history == "isolated":
        t.branch_start[target] = len(rs.messages)
    text = f"[{source} handed this conversation to you] {task}"
    rs.messages.append(Message(role="user", parts=(TextPart(text=text),), agent=target))
    ctx.emit(Transferred, from_agent=source, to_agent=target, task=task)


# ------------------------------------------------------------------ hooks


def take_transfer_call(call: ToolCall, rs: RunState, ctx: RunContext) -> ToolResult | None:
    """act's gate: a ``transfer_to_agent`` call is accepted (the table then takes the transfer
    row) or answered with an error saying which agents this one may reach."""
    if call.name != TRANSFER_TOOL:
        return None
    allowed = [a.name for a in ctx.tree.targets(ctx.agent.name)]
    target, task = call.args.get("agent_name"), call.args.get("task")
    if not allowed:
        return result(
            call,
            f"agent {ctx.agent.name!r} cannot transfer to {target!r}: it has no agent to hand over to; answer the task "
            "yourself",
            True,
        )
    if not isinstance(target, str) or not isinstance(task, str):
        return result(call, f"invalid arguments for tool {TRANSFER_TOOL!r}: agent_name and task must be strings", True)
    if target not in allowed:
        known = "unknown agent" if target not in ctx.agents else "an agent it may not transfer to"
        return result(
            call,
            f"cannot transfer to {target!r} ({known}); {ctx.agent.name} may transfer to: {', '.join(allowed)}",
            True,
        )
    t = transfers(rs)
    if t.to is not None:
        return result(call, f"only one transfer per turn: already transferring to {t.to!r}", True)
    t.to, t.task = target, task
    return result(call, f"transferring to {target}", False)


def offer_transfers(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: ``transfer_to_agent`` for an agent with somewhere to go, and
    the history as the active agent sees it once several agents have spoken."""
    targets = ctx.tree.targets(ctx.agent.name)
    t = transfers(rs)
    if not targets and not t.hops:
        return request
    fields: dict[str, Any] = dict(request.__dict__)
    if targets:
        fields["tools"] = (*request.tools, transfer_spec(targets))
    if t.hops:
        fields["messages"] = view_for(ctx.agent.name, ctx.agent.history == "isolated", rs)
    return trusted(ModelRequest, **fields)


def transfer_spec(targets: Sequence[Agent]) -> ToolSpec:
    """The ``transfer_to_agent`` tool for an agent that may reach ``targets`` (and only them)."""
    listing = "\n".join(f"- {t.name}: {t.description or 'no description'}" for t in targets)
    return ToolSpec(
        name=TRANSFER_TOOL,
        description=(
            "Hand the conversation to another agent better suited to it. Call it alone, as the "
            f"last thing you do this turn. You may transfer to:\n{listing}"
        ),
        input_schema={
            "type": "object",
            "properties": {
                "agent_name": {
                    "type": "string",
                    "enum": [t.name for t in targets],
                    "description": "Who to hand over to.",
                },
                "task": {"type": "string", "description": "What they should do, with every detail they need."},
            },
            "required": ["agent_name", "task"],
            "additionalProperties": False,
        },
    )


def view_for(agent: str, isolated: bool, rs: RunState) -> list[Message]:
    """The history as ``agent`` sees it: its own turns and the user's as they are, other
    agents' turns as marked context (``[billing] ...``) in user turns. With the isolated
    policy, only its branch (from the task it was handed)."""
    start = transfers(rs).branch_start.get(agent, 0) if isolated else 0
    view: list[Message] = []
    for message in rs.messages[start:]:
        if message.agent is None or message.agent == agent:
            view.append(message)
            continue
        lines = [line for part in message.parts if (line := _as_context(message.agent, part))]
        if lines:
            view.append(Message(role="user", parts=(TextPart(text="\n".join(lines)),), agent=message.agent))
    return view


def _as_context(agent: str, part: Any) -> str:
    if isinstance(part, TextPart) and part.text:
        return f"[{agent}] {part.text}"
    if isinstance(part, ToolCall):
        return f"[{agent}] called {part.name}({json.dumps(part.args, default=str)})"
    if isinstance(part, ToolResult):
        outcome = "failed" if part.is_error else "returned"
        return f"[{agent}] {part.name} {outcome}: {json.dumps(part.content, default=str)}"
    return ""


def has_sub_agents(agent: Agent) -> bool:
    """Some agent of the tree has sub-agents (it may transfer to them)."""
    return any(a.sub_agents for a in agent.walk())


MULTI_AGENT = Extension(
    name=NAME,
    applies_to=has_sub_agents,
    states={TRANSFER: transfer},
    rows_before={
        (DECIDE, PRE): [
            Row(
                DECIDE,
                TRANSFER,
                (transfer_requested, within_transfer_budget, not_ping_pong, *WITHIN_BUDGETS),
                bounded_by="max_transfers",
            )
        ]
    },
    rows=[cancellable(TRANSFER), Row(TRANSFER, PRE)],
    require={(DECIDE, PRE): (no_transfer_requested,)},
    budgets=[TRANSFERS, PING_PONG],
    guards={g.__name__: g for g in (transfer_requested, no_transfer_requested, within_transfer_budget, not_ping_pong)},
    slice=Transfers,
    request=offer_transfers,
    gate=take_transfer_call,
)
"""Agent trees: the ``transfer`` state and its rows, as one feature."""
