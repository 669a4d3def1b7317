"""The workflow agents: sequential, parallel, loop and map, each a small verified machine.

Their tables (``name`` is each step's agent name; every working state also has rows to
``cancelled`` if cancel_requested, ``failed`` if step_failed and ``suspended`` if child_waiting
[bounded: max_suspensions], and ``suspended`` goes back to the state whose child waited)::

    SequentialAgent   start -> step_1 -> step_2 -> ... -> step_n -> done
    LoopAgent         start -> body_1 -> ... -> body_n -> done       if loop_exit_requested
                                                 body_n -> body_1    [bounded: loop_repeats]
                                                 body_n -> done      (max_iterations rounds done)
                      (body_i -> done if loop_exit_requested, for every i: exit_loop ends the loop at once)
    ParallelAgent     start -> fan_out -> join -> done  (fan_out runs every branch at once)
    MapAgent          start -> each -> join -> done     (each runs the agent once per item)
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import JsonValue

from ..data.errors import ConfigurationError, MachineError
from ..data.limits import Limits
from ..data.result import copy_state
from ..data.run_state import RunState
from ..data.stage import Stage
from ..runtime.agent import Agent
from ..runtime.context import RunContext
from ..runtime.tools import tool
from ..table.budgets import Budget
from ..table.machine import Handler, Row
from ..table.rows import DONE
from .base import (
    Step,
    Workflow,
    WorkflowMachine,
    as_step,
    finish_with,
    passes_of,
    unique_states,
    waiting_rows,
    working,
)
from .children import ANSWERED, Ended, fail, flow_of, note_waiting, out_of_budget, run_child, runner_for, spend
from .gather import gather_rows, merge_children, note_failures, run_children

EXIT_LOOP = "exit_loop"
"""The session-state flag (and the tool's name) a child sets to end the loop that runs it."""


@tool(name=EXIT_LOOP)
def exit_loop(ctx: Any) -> str:
    """End the enclosing loop after this answer (the work is good enough; stop iterating)."""
    ctx.state[EXIT_LOOP] = True
    return "the loop ends after this step"


def loop_exit_requested(rs: RunState) -> bool:
    """A child called ``exit_loop`` (or set the ``exit_loop`` state flag), or ``until`` holds."""
    flow = rs.features.get("workflow")
    return flow is not None and flow.exit


# ------------------------------------------------------------------ one step


async def _one(wf: Workflow, index: int, rs: RunState, ctx: RunContext, key: str) -> None:
    """Run step ``index`` of ``wf`` as the child ``key`` and take what it did into ``rs``."""
    step = wf.children[index]
    store = ctx.store
    runners = wf.runner_cache(index)
    runner = runners.get(id(store))
    if runner is None or runner.store is not store:
        runner = runner_for(step.agent, store, runners, wf.unverified)
    base = copy_state(rs.state) if rs.state else {}
    ended = await run_child(runner, rs, ctx, key, rs.input, base)
    if ended.outcome in ANSWERED:
        _take(rs, base, ended, step, isinstance(wf, LoopAgent))
        finish_with(rs, ended.text, step.agent.name)
    elif ended.outcome == "suspended":
        note_waiting(rs, key, ended, store)
    elif (spent := out_of_budget(rs, ended, step.agent.limits)) is not None:
        spend(rs, ctx, spent)  # a budget of the tree ran out: the workflow ends "limit", naming it
    else:
        fail(rs, f"step {step.agent.name!r} of workflow {wf.name!r} ended {ended.outcome}: {ended.error}")


def _take(rs: RunState, base: dict[str, JsonValue], ended: Ended, step: Step, loop: bool) -> None:
    """A child's writes into the state, its output under its key; in a loop, its ``exit_loop``
    flag ends the loop (elsewhere the flag goes on up, to the loop that encloses the workflow)."""
    state = rs.state
    for k, v in ended.state.items():  # (children.writes, written out)
        if k not in base or base[k] != v:
            if loop and k == EXIT_LOOP:
                if v:
                    flow_of(rs).exit = True
                continue
            state[k] = v
    out = ended.output
    state[step.key] = out if type(out) is str else ended.value()


def _step(wf_ref: list[Workflow], index: int, key: Callable[[RunState, str], str], state: str) -> Handler:
    def run_step(rs: RunState, ctx: RunContext) -> Awaitable[None]:  # (the step's coroutine is _one's own)
        return _one(wf_ref[0], index, rs, ctx, key(rs, state))

    run_step.__name__ = f"run_{state}"
    return run_step


def _same(rs: RunState, state: str) -> str:
    return state


# ------------------------------------------------------------------ sequential


class SequentialAgent(Workflow):
    """Runs ``steps`` one after another; each child's final output goes to session state
    under its ``output_key`` (default: its name), where later steps read it (``{research}``
    in an instruction). The workflow's output is the last step's."""

    kind = "sequential"

    def __init__(
        self,
        name: str,
        steps: Sequence[Agent | Step],
        *,
        description: str = "",
        limits: Limits | None = None,
        output_key: str = "",
        unverified: bool = False,
    ) -> None:
        items = [as_step(s, name) for s in steps]
        if not items:
            raise ConfigurationError(f"SequentialAgent {name!r} needs at least one step")
        states = unique_states(name, items)
        ref: list[Workflow] = []
        rows = [Row(Stage.START, states[0])]
        for i, s in enumerate(states):
            rows += working(s, states[i + 1] if i + 1 < len(states) else DONE)
        rows += waiting_rows(states)
        machine = _machine(name, "sequential", rows, states, items, ref, _same)
        super().__init__(
            name, items, machine, bound=sum(passes_of(s.agent) for s in items), description=description,
            limits=limits, output_key=output_key, unverified=unverified,
        )  # fmt: skip
        ref.append(self)


def _machine(
    name: str,
    kind: str,
    rows: list[Row],
    states: list[str],
    items: list[Step],
    ref: list[Workflow],
    key: Callable[[RunState, str], str],
    budgets: Sequence[Budget] = (),
) -> WorkflowMachine:
    from ..features import machine_for

    handlers = {s: _step(ref, i, key, s) for i, s in enumerate(states)}
    composites = {s: [(step.agent.name, machine_for(step.agent))] for s, step in zip(states, items, strict=True)}
    return WorkflowMachine(rows, handlers=handlers, budgets=budgets, name=f"{kind}:{name}", composites=composites)


# ------------------------------------------------------------------ loop


class LoopAgent(Workflow):
    """Runs ``body`` (its steps in order) again and again: at most ``max_iterations`` rounds
    (required: a loop without a bound is refused), fewer when a child calls the ``exit_loop``
    tool (or sets the ``exit_loop`` state flag: the loop ends after that step) or when
    ``until(state)`` holds after a round. The output is the last step's."""

    kind = "loop"

    def __init__(
        self,
        name: str,
        body: Sequence[Agent | Step],
        *,
        max_iterations: int | None = None,
        until: Callable[[dict[str, JsonValue]], bool] | None = None,
        description: str = "",
        limits: Limits | None = None,
        output_key: str = "",
        unverified: bool = False,
    ) -> None:
        if max_iterations is None:
            raise MachineError(
                f"LoopAgent {name!r} has no max_iterations: a loop needs a bound (there is no default); pass "
                "max_iterations=N, and end it early with the exit_loop tool or until=..."
            )
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise ConfigurationError(
                f"LoopAgent {name!r}: max_iterations must be a whole number >= 1, got {max_iterations!r}"
            )
        if until is not None and not callable(until):
            raise ConfigurationError(f"LoopAgent {name!r}: until must be a function of the session state")
        items = [as_step(s, name) for s in body]
        if not items:
            raise ConfigurationError(f"LoopAgent {name!r} needs at least one step in body")
        states = unique_states(name, items)
        repeats = Budget(
            "loop_repeats",
            f"rounds of loop {name!r} (max_iterations={max_iterations})",
            "within_loop_repeats",
            cycle=True,
            limit=max_iterations - 1,
        )
        ref: list[Workflow] = []
        rows = [Row(Stage.START, states[0])]
        exit_row = Row(states[-1], DONE, (loop_exit_requested,))
        for i, s in enumerate(states[:-1]):
            rows += working(s, states[i + 1], outcome_rows=[Row(s, DONE, (loop_exit_requested,))])
        last = states[-1]
        rows += working(
            last,
            DONE,
            outcome_rows=[exit_row, Row(last, states[0], (repeats.guard,), bounded_by=repeats.name)],
        )
        rows += waiting_rows(states)

        def round_key(rs: RunState, state: str) -> str:
            return f"{state}.{rs.charges.get('loop_repeats', 0)}"

        machine = _machine(name, "loop", rows, states, items, ref, round_key, [repeats])
        if until is not None:  # checked after each round, in the last step
            machine.handlers[last] = _until(machine.handlers[last], until)
        super().__init__(
            name, items, machine, bound=max_iterations * sum(passes_of(s.agent) for s in items),
            description=description, limits=limits, output_key=output_key, unverified=unverified,
        )  # fmt: skip
        object.__setattr__(self, "max_iterations", max_iterations)
        ref.append(self)

    max_iterations: int


def _until(handler: Handler, until: Callable[[dict[str, JsonValue]], bool]) -> Handler:
    async def last_step(rs: RunState, ctx: RunContext) -> None:
        waits = handler(rs, ctx)
        if waits is not None:
            await waits
        if rs.error is None and not flow_of(rs).waiting and until(rs.state):
            flow_of(rs).exit = True

    return last_step


# ------------------------------------------------------------------ parallel and map

OnError = Literal["fail", "continue"]


class ParallelAgent(Workflow):
    """Runs ``branches`` at once, each on a copy of the session state; their writes merge into
    it at the join (two branches writing different values to one key: the workflow fails
    naming the key and the branches). Each branch's output goes to state under its
    ``output_key``. ``on_error``: ``"fail"`` (a failed branch fails the workflow, naming it and
    why) or ``"continue"`` (the others' results are kept; the output says which failed and why)."""

    kind = "parallel"

    def __init__(
        self,
        name: str,
        branches: Sequence[Agent | Step],
        *,
        on_error: OnError = "fail",
        description: str = "",
        limits: Limits | None = None,
        output_key: str = "",
        unverified: bool = False,
    ) -> None:
        if on_error not in ("fail", "continue"):
            raise ConfigurationError(f"ParallelAgent {name!r}: on_error must be 'fail' or 'continue', got {on_error!r}")
        items = [as_step(s, name) for s in branches]
        if not items:
            raise ConfigurationError(f"ParallelAgent {name!r} needs at least one branch")
        unique_states(name, items)
        from ..features import machine_for

        ref: list[Workflow] = []

        async def fan_out(rs: RunState, ctx: RunContext) -> None:
            wf = ref[0]
            keys = [s.agent.name for s in wf.children]
            await run_children(rs, ctx, [(i, k, rs.input) for i, k in enumerate(keys)], wf, lambda i: {})
            note_failures(rs, wf.name, on_error, keys)

        async def join(rs: RunState, ctx: RunContext) -> None:
            wf = ref[0]
            merge_children(rs, wf, [(s.agent.name, s.key) for s in wf.children], None)

        machine = WorkflowMachine(
            gather_rows("fan_out"),
            handlers={"fan_out": fan_out, "join": join},
            budgets=(),
            name=f"parallel:{name}",
            composites={"fan_out": [(s.agent.name, machine_for(s.agent)) for s in items]},
            concurrent=frozenset({"fan_out"}),
        )
        super().__init__(
            name, items, machine, bound=sum(passes_of(s.agent) for s in items), description=description,
            limits=limits, output_key=output_key, unverified=unverified,
        )  # fmt: skip
        object.__setattr__(self, "on_error", on_error)
        ref.append(self)

    on_error: OnError


class MapAgent(Workflow):
    """Runs ``agent`` once per item of the list in session state under ``over`` (at most
    ``concurrency`` at a time, at most ``max_items`` items): each run's task is its item
    (text as it is, other values as JSON), and it finds the item in state under ``item``.
    The outputs, in item order, go to state under ``output_key`` (default: the map's name);
    the workflow's output is that list as JSON."""

    kind = "map"

    def __init__(
        self,
        name: str,
        agent: Agent,
        *,
        over: str,
        concurrency: int = 4,
        max_items: int = 100,
        on_error: OnError = "fail",
        description: str = "",
        limits: Limits | None = None,
        output_key: str = "",
        unverified: bool = False,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"MapAgent {name!r}: agent must be an Agent, got {type(agent).__name__}")
        if not isinstance(over, str) or not over:
            raise ConfigurationError(f"MapAgent {name!r}: over must name a session-state key holding a list")
        for option, value in (("concurrency", concurrency), ("max_items", max_items)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"MapAgent {name!r}: {option} must be a whole number >= 1, got {value!r}")
        if on_error not in ("fail", "continue"):
            raise ConfigurationError(f"MapAgent {name!r}: on_error must be 'fail' or 'continue', got {on_error!r}")
        from ..features import machine_for

        ref: list[Workflow] = []

        async def each(rs: RunState, ctx: RunContext) -> None:
            wf = ref[0]
            items = rs.state.get(over)
            if not isinstance(items, list):
                fail(
                    rs,
                    f"MapAgent {name!r}: state key {over!r} holds {type(items).__name__}, not a list; put the list "
                    "of items there before the map runs",
                )
                return
            if len(items) > max_items:
                fail(rs, f"MapAgent {name!r}: {len(items)} items under {over!r}, more than max_items={max_items}")
                return
            jobs = [(i, f"each.{i}", it if isinstance(it, str) else json.dumps(it)) for i, it in enumerate(items)]
            await run_children(rs, ctx, jobs, wf, lambda i: {"item": items[i]}, concurrency, one_agent=True)
            note_failures(rs, name, on_error, [k for _, k, _ in jobs])

        async def join(rs: RunState, ctx: RunContext) -> None:
            wf = ref[0]
            n = len(rs.state.get(over) or [])  # type: ignore[arg-type]
            merge_children(rs, wf, [(f"each.{i}", "") for i in range(n)], output_key or name)

        machine = WorkflowMachine(
            gather_rows("each"),
            handlers={"each": each, "join": join},
            budgets=(),
            name=f"map:{name}",
            composites={"each": [(agent.name, machine_for(agent))]},
        )
        super().__init__(
            name, [Step(agent)], machine, bound=max_items * passes_of(agent), description=description,
            limits=limits, output_key=output_key, unverified=unverified,
        )  # fmt: skip
        object.__setattr__(self, "over", over)
        ref.append(self)

    over: str


__all__ = ["EXIT_LOOP", "LoopAgent", "MapAgent", "ParallelAgent", "SequentialAgent", "Step", "exit_loop"]
