"""Fan-out and join for the parallel and map agents: their shared table and state merge.

A parallel or map workflow runs its children at once in one state (``fan_out`` or ``each``),
each child on its own copy of the session state, and records how each ended in the workflow's
slice; :func:`note_failures` applies ``on_error`` to those that failed, and at ``join``
:func:`merge_children` merges the finished children's writes into the state (two children
writing different values to one key fail the run, naming both) and puts their outputs under
their keys. :func:`gather_rows` is the ``start -> first -> join -> done`` table both share.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import JsonValue

from ..data.result import copy_state
from ..data.run_state import RunState
from ..data.stage import Stage
from ..runtime import nesting
from ..runtime.context import RunContext
from ..table.machine import Row
from ..table.rows import DONE
from .base import Workflow, finish_with, step_failed, waiting_rows, working
from .children import Ended, fail, flow_of, note_waiting, out_of_budget, run_child, runner_for, spend, writes


def gather_rows(first: str) -> list[Row]:
    """``start -> first -> join -> done``: ``first`` runs the children at once, ``join`` merges."""
    join = [Row("join", Stage.FAILED, (step_failed,)), Row("join", DONE)]
    return [Row(Stage.START, first), *working(first, "join"), *join, *waiting_rows([first])]


async def run_children(
    rs: RunState,
    ctx: RunContext,
    jobs: list[tuple[int, str, Any]],
    wf: Workflow,
    extra: Callable[[int], dict[str, JsonValue]],
    concurrency: int | None = None,
    *,
    one_agent: bool = False,
) -> None:
    """Run the children ``jobs`` (step index, key, task) not finished yet, at once (at most
    ``concurrency`` at a time), each on a copy of the state; record each in the slice. With
    ``one_agent`` (a map) every job runs the workflow's only step, else job ``index`` runs step
    ``index``."""
    flow = flow_of(rs)
    base = copy_state(rs.state)
    gate = asyncio.Semaphore(concurrency) if concurrency else None
    stopped: list[tuple[Ended, Any]] = []

    async def one(index: int, key: str, task: Any) -> None:
        step = wf.children[0] if one_agent else wf.children[index]
        runner = runner_for(step.agent, ctx.store, wf.runner_cache(0 if one_agent else index), wf.unverified)
        start = {**copy_state(base), **extra(index)}
        if gate is None:
            ended = await run_child(runner, rs, ctx, key, task, start)
        else:
            async with gate:
                ended = await run_child(runner, rs, ctx, key, task, start)
        if ended.outcome == "suspended":
            note_waiting(rs, key, ended, ctx.store)
            return
        if not ended.answered and ended.limit is not None:
            if (spent := out_of_budget(rs, ended, step.agent.limits)) is not None:
                spend(rs, ctx, spent)  # a budget of the tree ran out: the workflow ends "limit", naming it
            else:  # judged again once every branch has ended (below)
                stopped.append((ended, step.agent.limits))
        flow.finished[key] = {
            "outcome": ended.outcome,
            "output": ended.text,
            "value": ended.value() if ended.answered else None,
            "writes": writes(start, ended.state) if ended.answered else {},
            "error": ended.error,
        }

    todo = [(i, k, t) for i, k, t in jobs if k not in flow.finished and k not in flow.waiting]
    waiting = [(i, k, t) for i, k, t in jobs if k in flow.waiting]
    token = nesting.enter_tools(nesting.link(rs))
    try:
        raised = await asyncio.gather(*(one(i, k, t) for i, k, t in [*waiting, *todo]), return_exceptions=True)
    finally:
        nesting.leave_tools(token)
    for exc in raised:  # a child that raised (the store failing, an interrupt): the others ended first
        if isinstance(exc, BaseException):  # (each kept its own state: a resume goes on from there)
            raise exc
    # A branch stopped by a budget of the tree is judged when it stops and, if the tree had room then,
    # again once every branch has ended: a sibling may have held the pass (or the call) that left no
    # room, given it back for a moment, and used it later.
    for ended, limits in stopped:
        if flow.spent is None and (spent := out_of_budget(rs, ended, limits)) is not None:
            spend(rs, ctx, spent)  # a budget of the tree ran out: the workflow ends "limit", naming it
            break


def note_failures(rs: RunState, name: str, on_error: str, keys: Sequence[str]) -> None:
    flow = flow_of(rs)
    if flow.spent is not None:  # out of budget: the workflow ends "limit", not failed
        return
    failed = [
        (k, flow.finished[k])
        for k in keys
        if k in flow.finished and flow.finished[k]["outcome"] not in ("final", "salvaged")
    ]
    if failed and on_error == "fail":
        k, f = failed[0]
        what = f"item {k.split('.')[-1]}" if k.startswith("each.") else f"branch {k!r}"
        fail(rs, f"{what} of workflow {name!r} failed ({f['outcome']}): {f['error']}")
    for k, f in failed:
        flow.failures[k] = f"{f['outcome']}: {f['error']}"
    return


def merge_children(rs: RunState, wf: Workflow, keys: list[tuple[str, str]], collect: str | None) -> None:
    """Merge the finished children's writes (a conflict fails the run, naming key and children),
    put each output under its key (or, for a map, the list of them under ``collect``)."""
    flow = flow_of(rs)
    merged: dict[str, tuple[str, JsonValue]] = {}
    for key, _ in keys:
        done = flow.finished.get(key, {})
        for k, v in (done.get("writes") or {}).items():  # type: ignore[union-attr]
            if k in merged and merged[k][1] != v:
                fail(
                    rs,
                    f"workflow {wf.name!r}: {merged[k][0]!r} and {key!r} both wrote state key {k!r} with different "
                    f"values ({merged[k][1]!r} and {v!r}); let each write its own key (its output_key)",
                )
                return
            merged[k] = (key, v)
    rs.state.update({k: v for k, (_, v) in merged.items()})
    lines = []
    values: list[JsonValue] = []
    for key, out_key in keys:
        done = flow.finished.get(key, {})
        if done.get("outcome") in ("final", "salvaged"):
            if collect is None:
                rs.state[out_key] = done.get("value")
            values.append(done.get("value"))
            lines.append(f"[{key}] {done.get('output')}")
        else:
            values.append(None)
            lines.append(f"[{key}] failed ({done.get('outcome')}): {done.get('error')}")
    if collect is not None:
        rs.state[collect] = values
        finish_with(rs, json.dumps(values, default=str), wf.name)
    else:
        finish_with(rs, "\n\n".join(lines), wf.name)


__all__ = ["gather_rows", "merge_children", "note_failures", "run_children"]
