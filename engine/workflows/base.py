"""What every workflow agent is: an :class:`~loopwright.Agent` whose machine runs child agents.

A workflow is an ``Agent`` (so a :class:`~loopwright.Runner`, :func:`~loopwright.agent_tool`,
a transfer and another workflow take it as they take any agent) whose machine is its own
small table — ``start -> step -> ... -> done``, built from the same rows, guards and budgets as
an agent's loop, checked by :func:`~loopwright.machines.verify` and drawn with each child as a composite
state — and whose states run its children as nested runs (:mod:`.children`). It calls no model
itself; as a transfer target it answers with its final output (its own run, bounded by its own
limits).

The parts every kind shares: :class:`Step` (a child and the state key its output goes to), the
cycle check (a name met twice on one path from the root is a cycle: agents are values, so a
cycle is an agent whose name comes back inside itself), the rows out of a working state
(cancelled, failed, waiting for a person), the ``suspended`` state a workflow waits in while a
child waits, and the tree's iteration bound (a workflow given no ``limits`` gets room for every
child's own ``max_iterations``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from ..data.errors import ConfigurationError, MachineError, ResumeError
from ..data.events import Message, ModelRequest, ModelResponse, TextPart, trusted
from ..data.limits import Limits
from ..data.run_state import RunState
from ..data.stage import Stage
from ..features import machine_for
from ..features.waiting import SUSPENSIONS
from ..loop.runner import Runner, verdict
from ..runtime.agent import Agent
from ..runtime.context import RunContext
from ..runtime.nesting import cost_spent, enter_tools, give_back, leave_tools, link, tree_spent
from ..table.budgets import CORE_BUDGETS, Budget
from ..table.guards import cancel_requested
from ..table.machine import Handler, LoopMachine, Row
from .children import Flow, budget_spent_below, flow_of

from loopwright.states import HANDLERS  # isort: skip

SUSPENDED = "suspended"
TERMINAL_STATES = (str(Stage.DONE), str(Stage.FAILED), str(Stage.CANCELLED))
RESERVED = frozenset({*map(str, Stage), SUSPENDED, "fan_out", "join", "each"})


@dataclass(frozen=True, slots=True)
class Step:
    """A child of a workflow and the session-state key its final output goes to (default:
    its name). A plain Agent in ``steps=[...]`` is ``Step(agent)``."""

    agent: Agent
    output_key: str = ""

    @property
    def key(self) -> str:
        return self.output_key or self.agent.name


def as_step(item: Agent | Step, workflow: str) -> Step:
    if isinstance(item, Step):
        return item
    if isinstance(item, Agent):
        return Step(item, getattr(item, "output_key", "") or "")
    raise ConfigurationError(
        f"workflow {workflow!r}: a step must be an Agent (or a workflow, or Step(agent, output_key=...)), "
        f"got {type(item).__name__}"
    )


# ------------------------------------------------------------------ guards and rows


def step_failed(rs: RunState) -> bool:
    """A child failed (or a merge conflicted): the workflow fails, naming it."""
    return rs.error is not None


def child_waiting(rs: RunState) -> bool:
    """A child waits for a person (a confirmation, a credential): the workflow waits with it."""
    flow = rs.features.get("workflow")
    return flow is not None and bool(flow.waiting)


def back_to(state: str) -> Callable[[RunState], bool]:
    """The guard of ``suspended -> state``: the child that waited belongs to ``state``."""

    def guard(rs: RunState) -> bool:
        return rs.trace[-2:-1] == [state] if len(rs.trace) > 1 else False

    guard.__name__ = f"waited_in_{state}"
    return guard


def working(state: str, then: str, *, outcome_rows: Sequence[Row] = ()) -> list[Row]:
    """The rows out of a state that runs children: cancelled, out of budget (``limit``), failed,
    wait, then ``then``."""
    return [
        Row(state, Stage.CANCELLED, (cancel_requested,)),
        Row(state, Stage.DONE, (budget_spent_below,), outcome="limit"),
        Row(state, Stage.FAILED, (step_failed,)),
        Row(state, SUSPENDED, (child_waiting, SUSPENSIONS.guard), bounded_by=SUSPENSIONS.name),
        *outcome_rows,
        Row(state, then),
    ]


def waiting_rows(states: Iterable[str]) -> list[Row]:
    """``suspended``: back into the state whose child waited (its handler resumes the child)."""
    return [
        Row(SUSPENDED, Stage.CANCELLED, (cancel_requested,)),
        *(Row(SUSPENDED, s, (back_to(s),)) for s in states),
        Row(SUSPENDED, Stage.FAILED),
    ]


class WorkflowMachine(LoopMachine):
    """A workflow's table. ``composites`` maps each state that runs children to them (label,
    machine), drawn inside it; several are concurrent regions (a parallel's branches)."""

    def __init__(
        self, rows: Sequence[Row], *, handlers: Mapping[str, Handler], budgets: Sequence[Budget], name: str,
        composites: Mapping[str, Sequence[tuple[str, LoopMachine]]], concurrent: frozenset[str] = frozenset(),
    ) -> None:  # fmt: skip
        order = [Stage.START, *(r.source for r in rows), *(r.dest for r in rows)]
        working = [s for s in dict.fromkeys(map(str, order)) if s not in (SUSPENDED, *TERMINAL_STATES)]
        super().__init__(
            rows,
            states=[*working, SUSPENDED, *TERMINAL_STATES],
            handlers={Stage.START: start, SUSPENDED: suspended, **handlers},
            budgets=[*CORE_BUDGETS, SUSPENSIONS, *budgets],
            waiting=(SUSPENDED,),
            name=name,
        )
        self.composites = dict(composites)
        self.concurrent = concurrent
        """The states whose children run at once (drawn as concurrent regions)."""

    def hooks(self, name: str) -> tuple[Callable[..., Any], ...]:
        return _HOOKS.get(name, ())


def start(rs: RunState, ctx: RunContext) -> None:
    """The user's turn, as any run's start; and the workflow's slice."""
    HANDLERS[Stage.START](rs, ctx)
    rs.features.setdefault("workflow", Flow())


def suspended(rs: RunState, ctx: RunContext) -> None:
    """A resumed workflow: the decisions (``ctx.decisions``) go on to the state whose child waited."""


def take_decisions(rs: RunState, ctx: RunContext, decisions: Mapping[str, Any]) -> None:
    """``Runner.resume``'s hook: each decision must be for a call a child waits on."""
    flow = flow_of(rs)
    for call_id in decisions:
        if call_id not in flow.owners:
            waits = ", ".join(f"{p.call_id} ({p.tool}, in {flow.owners.get(p.call_id)})" for p in flow.pending)
            raise ResumeError(f"no child of this workflow waits on call id {call_id!r}; pending: {waits or 'none'}")
    ctx.decisions = dict(decisions)


_HOOKS: dict[str, tuple[Callable[..., Any], ...]] = {"resume": (take_decisions,)}


def finish_with(rs: RunState, text: str, agent: str) -> None:
    """The workflow's answer: its output (``rs.text``, which the final row makes ``output``)."""
    rs.text = text
    part = trusted(TextPart, type="text", text=text)
    rs.messages.append(trusted(Message, role="assistant", parts=(part,), agent=agent))


def state_of(rs: RunState) -> dict[str, JsonValue]:
    return rs.state


# ------------------------------------------------------------------ the workflow as an agent


class WorkflowModel:
    """A workflow's ``model``: a workflow calls none; made the active agent by a transfer, it
    answers with its final output: the workflow's ``before_model`` (:meth:`Workflow.transferred`)
    runs it as a nested run of the run that transferred to it, charging that run's budgets, and
    answers in the model's place. Called alone (no run above), it runs as a run of its own."""

    def __init__(self, workflow: Workflow, name: str) -> None:
        self.workflow = workflow
        self.name = f"workflow:{name}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return _answer(self.workflow.name, await Runner(self.workflow).run(_task(request)))


def _task(request: ModelRequest) -> str:
    """The task a transfer hands a workflow: the last user text of the conversation."""
    for message in reversed(request.messages):
        if message.role == "user" and message.text:
            return message.text
    return ""


def _answer(name: str, result: Any) -> ModelResponse:
    """The workflow's reply in a conversation: its output, or why it did not finish."""
    if result.outcome not in ("final", "salvaged"):
        why = result.error.message if result.error is not None else f"out of budget ({result.limit})"
        return _said(f"workflow {name!r} did not finish ({result.outcome}): {why}")
    return _said(result.output if isinstance(result.output, str) else str(result.output))


def _said(text: str) -> ModelResponse:
    return ModelResponse(parts=(TextPart(text=text),), stop_reason="end_turn")


SPENDS: dict[str, Callable[[RunState], int | float]] = {
    "max_iterations": lambda rs: rs.iteration,
    "max_tool_calls": lambda rs: rs.tool_calls_made,
    "max_total_tokens": lambda rs: rs.usage.total_tokens,
    "max_cost_usd": lambda rs: float(cost_spent(rs.usage)),
}
"""What a run has spent of each budget a workflow's run can end ``limit`` on."""


def _stopped_above(own: Limits, result: Any) -> bool:
    """The workflow's run ended ``limit`` on a budget its own limits do not cap, or cap lower
    than its agent's (the room of the runs above it, :func:`~loopwright.runtime.nesting.adopt`)."""
    name = result.limit
    if name not in SPENDS:
        return False
    cap = getattr(own, name)
    return cap is None or getattr(result.run_state.limits, name) != cap


def _spend(rs: RunState, name: str) -> None:
    """The runs above had no room left for the workflow's next call of ``name``'s budget: the
    run ``rs`` that transferred to it has none either; its cap is lowered to what it spent, so
    its table stops it there (as a nested run's ``max_iterations`` is lowered by its link)."""
    rs.limits = rs.limits.model_copy(update={name: SPENDS[name](rs)})


def _unfinished(rs: RunState, reply: ModelResponse, name: str) -> ModelResponse:
    """The reply of a workflow that did not start, or stopped, for lack of room in the budgets
    of the run that transferred to it (or a run above it): not an answer (cut short, as a
    reply at ``max_tokens``, saying the budget), so that run's own table ends it as a lone run
    out of that room ends: ``decide`` finds the budget spent (salvage, or outcome ``"limit"``
    naming it) and makes no model call past it. A workflow stopped by its own limits answers as
    it is."""
    spent = tree_spent(rs)
    if spent is None:
        return reply
    if rs.turn_limits is not None and rs.turn_limits.salvage:  # its salvage call would be this workflow again
        rs.turn_limits = rs.turn_limits.model_copy(update={"salvage": False})
    said = (
        f"workflow {name!r} stopped: the budget {spent} of run {rs.run_id!r} (with the runs nested in it) or of a run "
        f"above it is spent, so the run ends 'limit' ({spent})"
    )
    return reply.model_copy(update={"parts": (TextPart(text=said),), "stop_reason": "max_tokens"})


class Workflow(Agent):
    """The base of the workflow agents (an Agent: see the module docstring)."""

    kind: str = "workflow"
    children: tuple[Step, ...]
    unverified: bool
    """Its children may run on machines :func:`~loopwright.machines.verify` rejects (the user
    opted in, ``unverified=True``: their runners are made so)."""
    output_key: str
    bound: int
    """The most model passes the tree under this workflow can make (its default ``max_iterations``)."""

    def __init__(
        self,
        name: str,
        children: Sequence[Step],
        machine: WorkflowMachine,
        *,
        bound: int,
        description: str = "",
        limits: Limits | None = None,
        output_key: str = "",
        unverified: bool = False,
    ) -> None:
        check_cycles(name, children)
        check_verified(name, children, unverified)
        own = object.__setattr__
        own(self, "children", tuple(children))
        own(self, "unverified", unverified)
        own(self, "output_key", output_key)
        own(self, "bound", bound)
        own(self, "_runners", {})
        if limits is None:
            limits = Limits(max_iterations=max(bound, 1))
        super().__init__(
            name=name, model=WorkflowModel(self, name), description=description, limits=limits, machine=machine,
            before_model=self.transferred,
        )  # fmt: skip

    async def transferred(self, request: ModelRequest, ctx: Any) -> ModelResponse:
        """A transfer made this workflow the active agent of the run ``ctx`` and its model is
        called: the workflow runs on the task as a child of that run (:mod:`loopwright.runtime.nesting`:
        its passes, tool calls, tokens and cost are charged to that run's budgets, and its room
        caps the workflow's) and its output is the reply."""
        rs = ctx.run_state
        give_back(rs)  # (this turn calls no model: the workflow's run holds the pass, its children make theirs)
        token = enter_tools(link(rs))
        try:
            result = await Runner(self, unverified=self.unverified).run(_task(request))
        except ConfigurationError as exc:  # no room left above: it does not start
            return _unfinished(rs, _said(f"workflow {self.name!r} did not start: {exc}"), self.name)
        finally:
            leave_tools(token)
        if result.outcome != "limit":
            return _answer(self.name, result)
        if _stopped_above(self.limits, result) and tree_spent(rs) is None:
            _spend(rs, result.limit or "")
        return _unfinished(rs, _answer(self.name, result), self.name)

    def replace(self, **changes: Any) -> Agent:
        raise ConfigurationError(
            f"workflow {self.name!r}: make a new {type(self).__name__} instead of replace() (a workflow is a value)"
        )

    def runner_cache(self, index: int) -> dict[int, Runner]:
        """The runners of child ``index``, by store (each step reuses its own)."""
        cache: dict[int, dict[int, Runner]] = self._runners
        return cache.setdefault(index, {})

    def walk_children(self) -> Iterator[Agent]:
        for step in self.children:
            yield step.agent

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, children={[s.agent.name for s in self.children]})"

    _runners: dict[int, dict[int, Runner]]


def children_of(agent: Agent) -> tuple[Agent, ...]:
    """An agent's children in the workflow sense (a workflow's steps) and its sub-agents."""
    kids: tuple[Agent, ...] = tuple(agent.walk_children()) if isinstance(agent, Workflow) else ()
    return kids + tuple(agent.sub_agents)


def check_cycles(name: str, children: Sequence[Step]) -> None:
    """A name met twice on one path from ``name`` down is a cycle (A contains B contains A):
    refused here, naming it."""

    def down(agent: Agent, path: tuple[str, ...]) -> None:
        if agent.name in path:
            cycle = " -> ".join((*path[path.index(agent.name) :], agent.name))
            raise MachineError(
                f"workflow {name!r} contains a cycle of agents: {cycle}; an agent cannot contain itself (rename "
                "one of them, or take the inner one out)"
            )
        for child in children_of(agent):
            down(child, (*path, agent.name))

    for step in children:
        down(step.agent, (name,))


def check_verified(name: str, children: Sequence[Step], unverified: bool = False) -> None:
    """A child whose machine :func:`~loopwright.machines.verify` rejects would be refused by the
    Runner that runs it (:mod:`loopwright.loop.runner`): refused here, when the workflow is built,
    naming it, unless the workflow is built with ``unverified=True`` (the opt-in: its children's
    runners are made with it; the loop still ends each run by its ``timeout_s``, on ``cancel`` and
    at ``Limits.max_transitions``)."""
    if unverified:
        return
    for step in children:
        agent = step.agent
        if isinstance(agent, Workflow):
            continue  # checked when it was built
        machine = machine_for(agent)
        report = verdict(machine)
        if not report.ok:
            raise MachineError(
                f"workflow {name!r}: child {agent.name!r} runs on machine {machine.name!r}, which verify rejects, "
                f"so a run of it might never end:\n{report}\nFix the machine (each violation above says how), or, "
                "to run it as it is, opt in: build the workflow with unverified=True (its children's runs still end by "
                "their timeout_s, on cancel and at Limits.max_transitions)"
            )


def passes_of(agent: Agent) -> int:
    """The most model passes ``agent`` can take from the runs above it: its own
    ``max_iterations``; a workflow: its tree's bound, and the pass a nested run holds while it
    runs (a workflow makes no model call: the pass is given back when it ends)."""
    return agent.bound + 1 if isinstance(agent, Workflow) else agent.limits.max_iterations


def unique_states(workflow: str, steps: Sequence[Step]) -> list[str]:
    """The state names of a workflow's steps: each step's agent name (unique, not reserved)."""
    names = [s.agent.name for s in steps]
    for n in names:
        if n in RESERVED:
            raise ConfigurationError(
                f"workflow {workflow!r}: a step cannot be named {n!r} (a state of the workflow's own table); "
                "rename the agent"
            )
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise ConfigurationError(
            f"workflow {workflow!r}: two steps are named {doubles[0]!r}; each step is a state of the workflow's "
            "table: give one of them another name (agent.replace(name=...))"
        )
    keys = [s.key for s in steps]
    doubles = sorted({k for k in keys if keys.count(k) > 1})
    if doubles:
        raise ConfigurationError(
            f"workflow {workflow!r}: two steps write their output to state key {doubles[0]!r}; give each its own "
            "output_key"
        )
    return names
