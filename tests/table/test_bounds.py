"""Bounds are enforced, not trusted: a bounded row stops firing once its budget is spent, whatever its guards say."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from loopwright import (
    Agent,
    Limits,
    MachineError,
    ModelRequest,
    ModelResponse,
    RunContext,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    approve,
    tool,
    verify,
)
from loopwright.extend import Budget, LoopMachine, Row, Rule, extend
from loopwright.features import machine_for
from loopwright.table.rules import describe_row
from tests.helpers import add

TERMINALS = ("done", "failed", "cancelled")


async def spin(rs: RunState, ctx: RunContext) -> None:
    """A state that does no work."""


def always(rs: RunState) -> bool:
    """Always says yes (and tests no budget)."""
    return True


def traversals(trace: list[str], source: str, dest: str) -> int:
    return sum(1 for a, b in pairwise(trace) if (a, b) == (source, dest))


def _looping_agent(machine: LoopMachine, **limits: object) -> Agent:
    script = [[ToolCall(name="add", args={"a": 1, "b": 2})], "done"]
    return Agent(
        name="spinner",
        model=ScriptedModel(script),  # type: ignore[arg-type]
        tools=[add],
        machine=machine,
        limits=Limits(retry_backoff_s=0, **limits),  # type: ignore[arg-type]
    )


async def _run(agent: Agent, text: str = "go") -> RunResult:
    return await asyncio.wait_for(Runner(agent).run(text), 10)


SPINS = Budget("max_spins", "spins (max_spins={value})", "within_spin_budget", cycle=True, limit=4)


@pytest.mark.parametrize(("budget", "extra", "cap"), [("max_iterations", (), 10), ("max_spins", (SPINS,), 4)])
def test_an_always_true_guard_on_a_bounded_self_loop_still_ends(
    budget: str, extra: tuple[Budget, ...], cap: int
) -> None:
    machine = extend(
        name=f"spin_{budget}",
        states={"spin": spin},
        redirect={("act", "decide"): "spin"},
        rows=[Rule("spin", "spin", "always", bounded_by=budget), Rule("spin", "decide")],
        guards={"always": always},
        budgets=extra,
    )
    assert verify(machine).ok
    result = asyncio.run(_run(_looping_agent(machine)))
    assert result.trace[-1] in TERMINALS
    spins = traversals(result.trace, "spin", "spin")
    assert 0 < spins <= cap
    assert result.run_state.charges[budget] <= cap
    if budget == "max_spins":  # its own budget: the self-loop takes all of it
        assert spins == 4 and result.outcome == "final"


def test_a_bounded_self_loop_shares_its_budget_with_the_core_row() -> None:
    """Self-loop charges count against max_iterations like decide -> preprocess does."""
    machine = extend(
        name="spin_shared",
        states={"spin": spin},
        redirect={("act", "decide"): "spin"},
        rows=[Rule("spin", "spin", "always", bounded_by="max_iterations"), Rule("spin", "decide")],
        guards={"always": always},
    )
    result = asyncio.run(_run(_looping_agent(machine, max_iterations=3)))
    assert result.trace[-1] in TERMINALS
    charged = traversals(result.trace, "spin", "spin") + traversals(result.trace, "decide", "preprocess")
    assert charged <= 3 == result.run_state.charges["max_iterations"]


# ------------------------------------------------------------------ verify refuses


def test_verify_refuses_a_row_bounded_by_an_unknown_budget() -> None:
    rows = [Rule("spin", "spin", "always", bounded_by="max_spinz"), Rule("spin", "decide")]
    with pytest.raises(MachineError, match=r"bounded by 'max_spinz', which is not a budget"):
        extend(
            name="bad_budget",
            states={"spin": spin},
            redirect={("act", "decide"): "spin"},
            rows=rows,
            guards={"always": always},
        )
    raw = [Rule("start", "start", "has_error", bounded_by="max_spinz"), Rule("start", "done")]
    report = verify(raw, states=["start", *TERMINALS])
    assert not report.ok
    assert [v.kind for v in report.broken(5)] == ["unknown_budget"]
    assert "'max_spinz', which is not a budget" in report.broken(5)[0].message


def test_verify_refuses_a_bounded_row_with_no_guard_as_the_last_row() -> None:
    rows = [Rule("spin", "decide", bounded_by="max_iterations")]
    with pytest.raises(MachineError, match="is bounded by 'max_iterations' but has no guard"):
        extend(name="unguarded_last", states={"spin": spin}, redirect={("act", "decide"): "spin"}, rows=rows)
    report = verify([Rule("start", "done", bounded_by="max_iterations")], states=["start", *TERMINALS])
    assert "unguarded_bound" in [v.kind for v in report.violations]


def test_a_bounded_row_with_no_guard_fires_until_its_budget_is_spent() -> None:
    """A bounded row with no guard means "this, N times": only its budget ends it, and the engine
    enforces that budget, so it passes verify (but it cannot be a state's fallback)."""
    rows = [Rule("spin", "spin", bounded_by="max_iterations"), Rule("spin", "decide")]
    machine = extend(name="unguarded_loop", states={"spin": spin}, redirect={("act", "decide"): "spin"}, rows=rows)
    assert verify(machine).ok
    agent = Agent(name="a", model=ScriptedModel([[ToolCall(name="add", args={"a": 1, "b": 2})], "done"]),
                  tools=[add], machine=machine, limits=Limits(max_iterations=4))  # fmt: skip
    result = Runner(agent).run_sync("go")
    spins = sum(1 for a, b in pairwise(result.trace) if a == b == "spin")
    assert spins == 4  # the budget's cap, then the fallback
    # the spins spent the iteration budget the go-round row shares: the run salvages, naming it
    assert result.outcome == "salvaged" and result.limit == "max_iterations"
    raw = [Rule("start", "start", bounded_by="max_iterations")]
    assert not verify(raw, states=["start", "done"], terminals=["done"]).ok  # no fallback after it


# ------------------------------------------------------------------ property: any extension ends


@tool(requires_confirmation=True)
def wire(amount: int) -> str:
    """Send money (asks a person first)."""
    return f"sent {amount}"


GUARD_KINDS = ("true", "false", "random", "raises")
ENTRIES = (("act", "decide"), ("postprocess", "decide"))
LOOP_BACK = ("preprocess", "reason")
REPLIES = ("text", "add", "wire", "transfer")


@dataclass
class Calls:
    """The generated guards' kinds by name, and which were called, in order."""

    kinds: dict[str, str] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)


def make_guard(kind: str, name: str, rng: random.Random, calls: Calls) -> Callable[[RunState], bool]:
    def guard(rs: RunState) -> bool:
        calls.called.append(name)
        if kind == "raises":
            raise ValueError(f"{name} refuses to decide")
        if kind == "random":
            return rng.random() < 0.5
        return kind == "true"

    guard.__name__ = guard.__qualname__ = name
    calls.kinds[name] = kind
    return guard


def model_of(kinds: list[str]) -> ScriptedModel:
    """A model that never runs out: its replies cycle through ``kinds``."""
    count = [0]

    def reply(request: ModelRequest) -> ModelResponse:
        kind = kinds[count[0] % len(kinds)]
        count[0] += 1
        n = count[0]
        if kind == "add":
            return ModelResponse(
                parts=(ToolCall(id=f"a{n}", name="add", args={"a": n, "b": 1}),), stop_reason="tool_use"
            )
        if kind == "wire":
            return ModelResponse(parts=(ToolCall(id=f"w{n}", name="wire", args={"amount": n}),), stop_reason="tool_use")
        transfer = next((t for t in request.tools if t.name == "transfer_to_agent"), None)
        if kind == "transfer" and transfer is not None:
            target = transfer.input_schema["properties"]["agent_name"]["enum"][0]
            call = ToolCall(id=f"t{n}", name="transfer_to_agent", args={"agent_name": target, "task": "go on"})
            return ModelResponse(parts=(call,), stop_reason="tool_use")
        return ModelResponse(parts=(TextPart(text=f"answer {n}"),), stop_reason="end_turn")

    return ScriptedModel(reply)


def base_agent(model: ScriptedModel, tree: bool, waits: bool, limits: Limits) -> Agent:
    tools = [add, wire] if waits else [add]
    subs = [Agent(name="helper", model=model, tools=tools, description="helps")] if tree else []
    return Agent(name="root", model=model, tools=tools, sub_agents=subs, limits=limits)


@st.composite
def extensions(draw: st.DrawFn, budgets: list[str], calls: Calls, waits: bool = False) -> dict[str, object]:
    """The arguments of one ``extend`` call: 1-3 new states chained after ``entry``, each with
    a self-loop and/or a bounded row back to an earlier core state.

    With waiting tools, a state on act's exit that loops back to preprocess would take the
    run past ``decide -> suspended`` with calls still held: verify rejects that machine (rule
    6), and the test checks it does."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 3))
    names = [f"x{i}" for i in range(n)]
    own = [
        Budget(f"max_x{i}", f"x{i} loops (max_x{i}={{value}})", f"within_x{i}_budget", cycle=True, limit=limit)
        for i, limit in enumerate(draw(st.lists(st.integers(0, 4), min_size=1, max_size=2)))
    ]
    choices = [*budgets, *(b.name for b in own)]
    rows: list[Row] = []
    for i, state in enumerate(names):
        rows.append(Rule(state, "cancelled", "cancel_requested"))
        loops = draw(st.sampled_from(["self", "back", "both"]))
        targets = ([state] if loops in ("self", "both") else []) + (
            [draw(st.sampled_from(LOOP_BACK))] if loops in ("back", "both") else []
        )
        for j, dest in enumerate(targets):
            guard = make_guard(draw(st.sampled_from(GUARD_KINDS)), f"g_{state}_{j}", rng, calls)
            rows.append(Row(state, dest, (guard,), bounded_by=draw(st.sampled_from(choices))))
        rows.append(Rule(state, names[i + 1] if i + 1 < n else "decide"))
    entry = draw(st.sampled_from(ENTRIES))
    return {
        "name": "generated",
        "states": dict.fromkeys(names, spin),
        "redirect": {entry: names[0]},
        "rows": rows,
        "budgets": own,
    }


def skips_the_wait(spec: dict[str, object]) -> bool:
    """The extension puts states on act's exit, and one of them goes back into the loop."""
    redirect = spec["redirect"]
    rows = spec["rows"]
    assert isinstance(redirect, dict) and isinstance(rows, list)
    return ("act", "decide") in redirect and any(row.dest in LOOP_BACK for row in rows)


async def run_to_the_end(runner: Runner) -> RunResult:
    """Run, approving whatever waits, until a terminal state."""
    result = await runner.run("go")
    while result.outcome == "suspended":
        result = await runner.resume(result, {p.call_id: approve() for p in result.pending})
    return result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_verified_extension_ends_within_its_caps(data: st.DataObject) -> None:
    calls = Calls()
    limits = Limits(
        retry_backoff_s=0,
        max_iterations=data.draw(st.integers(1, 6), label="max_iterations"),
        max_transfers=data.draw(st.integers(0, 3), label="max_transfers"),
        max_suspensions=data.draw(st.integers(0, 3), label="max_suspensions"),
    )
    model = model_of(data.draw(st.lists(st.sampled_from(REPLIES), min_size=1, max_size=5), label="replies"))
    waits = data.draw(st.booleans(), label="waits")
    base = base_agent(model, data.draw(st.booleans(), label="tree"), waits, limits)
    cycle_budgets = [b.name for b in machine_for(base).budgets.values() if b.cycle]
    spec = data.draw(extensions(cycle_budgets, calls, waits), label="extension")
    if waits and skips_the_wait(spec):
        report = verify(extend(base, **spec, check=False))  # type: ignore[arg-type]
        back = [r for r in spec["rows"] if r.dest in LOOP_BACK]  # type: ignore[attr-defined]
        assert [v.rows for v in report.violations] == [(describe_row(r),) for r in back]
        assert all(v.rule == 6 and "decide -> suspended" in v.message for v in report.violations)
        with pytest.raises(MachineError, match="FAIL 6"):
            extend(base, **spec)  # type: ignore[arg-type]
        event("rejected: a state on act's exit loops back while calls wait")
        return
    try:
        machine = extend(base, **spec)  # type: ignore[arg-type]
    except MachineError:
        assume(False)
        raise
    assert verify(machine).ok
    agent = base.replace(machine=machine)
    assert machine_for(agent) is machine

    result = asyncio.run(asyncio.wait_for(run_to_the_end(Runner(agent)), 10))

    assert result.trace[-1] in TERMINALS and result.outcome != "suspended"
    event(f"outcome: {result.outcome}")
    raised = [name for name in calls.called if calls.kinds[name] == "raises"]
    if raised:
        assert result.outcome == "failed" and result.error is not None and result.error.kind == "guard"
        assert f"ValueError: {raised[0]} refuses to decide" in result.error.message
    else:
        assert result.error is None or result.error.kind != "guard"
    rs = result.run_state
    for name, budget in machine.budgets.items():
        if not budget.cycle or budget.scope == "pass":
            continue
        cap = budget.cap(rs)
        fired = sum(traversals(result.trace, r.source, r.dest) for r in machine.rows if r.bounded_by == name)
        assert fired <= cap, f"rows bounded by {name} fired {fired} times, cap {cap}: {result.trace}"
        assert rs.charges.get(name, 0) <= cap
