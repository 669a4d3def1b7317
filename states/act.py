"""act: runs every tool call of the latest reply, concurrently.

Reads ``response`` (its tool calls), ``vetoes`` (calls refused by an earlier stage: answered
with an error, not run), the active agent's tools and tool callbacks and, when a suspended step
is resumed, the decisions in ``ctx.decisions``; writes ``tool_results`` (in the
model's call order), ``messages`` (one user turn answering every call), ``tool_calls_made``,
``transfer_to``/``transfer_task`` (an accepted ``transfer_to_agent`` call), and ``pending`` /
``step_results`` while calls wait for a confirmation, a credential or a long-running result.

Every call gets exactly one result: an unknown tool, invalid arguments, an exception, a timeout,
a cancellation, a denial each become an error result whose message tells the model what went
wrong. A step with waiting calls is answered as one turn once none is left waiting.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loopwright.agent import TRANSFER_TOOL
from loopwright.decisions import Approve, Deny
from loopwright.errors import CredentialRequired
from loopwright.events import Message, PendingRequest, ToolAnswered, ToolCall, ToolCalled, ToolResult, trusted
from loopwright.log import get_logger, logging_enabled
from loopwright.run_state import RunContext, RunState
from loopwright.tools import ArgumentsError, Pending, to_json_value

_perf = time.perf_counter
CallOutcome = ToolResult | PendingRequest
"""What one call comes to in a pass: its result, or a request that makes it wait."""


def _result(call: ToolCall, content: Any, is_error: bool) -> ToolResult:
    return trusted(ToolResult, type="tool_result", call_id=call.id, name=call.name, content=content, is_error=is_error)


def _transfer(call: ToolCall, ctx: RunContext) -> ToolResult:
    """A ``transfer_to_agent`` call: accepted (the table then takes the transfer row) or an
    error result saying which agents this one may reach."""
    rs = ctx.run_state
    allowed = [a.name for a in ctx.agent.transfer_targets()]
    target, task = call.args.get("agent_name"), call.args.get("task")
    if not allowed:
        return _result(call, f"agent {ctx.agent.name!r} cannot transfer: it has no agent to hand over to", True)
    if not isinstance(target, str) or not isinstance(task, str):
        return _result(call, f"invalid arguments for tool {TRANSFER_TOOL!r}: agent_name and task must be strings", True)
    if target not in allowed:
        known = "unknown agent" if target not in ctx.agents else "an agent it may not transfer to"
        return _result(
            call,
            f"cannot transfer to {target!r} ({known}); {ctx.agent.name} may transfer to: {', '.join(allowed)}",
            True,
        )
    if rs.transfer_to is not None:
        return _result(call, f"only one transfer per turn: already transferring to {rs.transfer_to!r}", True)
    rs.transfer_to, rs.transfer_task = target, task
    return _result(call, f"transferring to {target}", False)


def _wait(call: ToolCall, kind: Any, detail: str, key: str | None = None) -> PendingRequest:
    return PendingRequest(call_id=call.id, tool=call.name, args=call.args, kind=kind, detail=detail, credential_key=key)


async def _execute(call: ToolCall, ctx: RunContext, approved: bool) -> CallOutcome:
    """One tool call, through the confirmation check, before_tool and the tool (with its
    timeout). ``approved``: a human already approved it (or supplied its credential)."""
    agent = ctx.agent
    vetoed = ctx.run_state.vetoes.get(call.id)
    if vetoed is not None:
        return _result(call, f"tool {call.name!r} was vetoed: {vetoed}", True)
    tool = agent.tools.get(call.name)
    if tool is None and call.name == TRANSFER_TOOL:
        return _transfer(call, ctx)
    if tool is None:
        available = ", ".join(t.name for t in agent.request_tools) or "none"
        return _result(call, f"unknown tool {call.name!r}; available tools: {available}", True)
    try:
        kwargs = tool.validate(call.args)
    except ArgumentsError as exc:
        return _result(call, str(exc), True)
    if not approved and tool.requires_confirmation:
        try:
            needs = tool.needs_confirmation(kwargs)
        except Exception as exc:
            return _result(call, f"tool {call.name!r}: its requires_confirmation check raised {exc!r}", True)
        if needs:
            return _wait(call, "confirmation", f"{call.name} needs your approval to run")
    if agent.before_tool is not None:
        try:
            value = agent.before_tool(call, ctx)
            if asyncio.iscoroutine(value):
                value = await value
        except Exception as exc:
            return _result(call, f"the before_tool callback raised {type(exc).__name__}: {exc}", True)
        if value is not None:
            return _result(call, to_json_value(value), False)
    timeout = tool.timeout_s or ctx.run_state.limits.tool_timeout_s
    try:
        if timeout is None:
            value = await tool.invoke(kwargs, ctx)
        else:
            async with asyncio.timeout(timeout) as scope:
                value = await tool.invoke(kwargs, ctx)
    except CredentialRequired as exc:
        return _wait(call, "credential", exc.message, exc.key)
    except TimeoutError as exc:
        if timeout is not None and scope.expired():
            return _result(call, f"tool {call.name!r} timed out after {timeout:g} s", True)
        return _result(call, f"tool {call.name!r} raised TimeoutError: {exc}", True)
    except Exception as exc:
        return _result(call, f"tool {call.name!r} raised {type(exc).__name__}: {exc}", True)
    if isinstance(value, Pending):
        return _wait(call, "result", value.detail or f"{call.name} is still running")
    return _result(call, to_json_value(value), False)


async def _answer(call: ToolCall, ctx: RunContext, approved: bool = False) -> CallOutcome:
    started = _perf()
    result = await _execute(call, ctx, approved)
    if isinstance(result, PendingRequest):
        return result
    after = ctx.agent.after_tool
    if after is not None:
        try:
            replaced = after(call, result, ctx)
            if asyncio.iscoroutine(replaced):
                replaced = await replaced
            if isinstance(replaced, ToolResult):
                result = replaced
            elif replaced is not None:
                raise TypeError(f"it returned {type(replaced).__name__}; return None or a ToolResult")
        except Exception as exc:
            result = _result(call, f"the after_tool callback failed: {type(exc).__name__}: {exc}", True)
    _record(call, result, _perf() - started, ctx)
    return result


def _record(call: ToolCall, result: ToolResult, duration: float, ctx: RunContext) -> None:
    ctx.emit(
        ToolAnswered,
        call_id=call.id,
        name=call.name,
        content=result.content,
        is_error=result.is_error,
        duration_s=duration,
    )
    if logging_enabled():
        get_logger().info(
            "tool_call",
            run_id=ctx.run_id,
            call_id=call.id,
            tool=call.name,
            is_error=result.is_error,
            duration_s=round(duration, 6),
        )


def _calls(rs: RunState) -> list[ToolCall]:
    response = rs.response
    return [p for p in response.parts if type(p) is ToolCall] if response is not None else []


async def act(rs: RunState, ctx: RunContext) -> None:
    calls = _calls(rs)
    if rs.step_results:  # a suspended step, resumed: settle what the decisions allow
        jobs = _resumed_jobs(rs, ctx, calls)  # answers denials and supplied results first
        await _run(rs, ctx, calls, list(rs.step_results), jobs)
        return
    rs.tool_calls_made += len(calls)
    for call in calls:
        ctx.emit(ToolCalled, call_id=call.id, name=call.name, args=call.args)
    await _run(rs, ctx, calls, [None] * len(calls), [(i, call, False) for i, call in enumerate(calls)])


def _resumed_jobs(rs: RunState, ctx: RunContext, calls: list[ToolCall]) -> list[tuple[int, ToolCall, bool]]:
    """Apply the decisions for pending calls: denials and supplied results are answered here,
    approved calls (and calls given their credential) are returned to run exactly once."""
    index = {call.id: i for i, call in enumerate(calls)}
    jobs: list[tuple[int, ToolCall, bool]] = []
    waiting: list[PendingRequest] = []
    results = rs.step_results
    for request in rs.pending:
        decision = ctx.decisions.pop(request.call_id, None)
        i = index[request.call_id]
        call = calls[i]
        if decision is None:
            waiting.append(request)
        elif isinstance(decision, Deny):
            results[i] = _result(call, f"denied by the user: {decision.reason or 'no reason given'}", True)
            _record(call, results[i], 0.0, ctx)  # type: ignore[arg-type]
        elif isinstance(decision, Approve):
            jobs.append((i, call, True))
        elif request.kind == "credential":
            ctx.credentials[request.credential_key or ""] = decision
            jobs.append((i, call, True))
        else:  # a long-running tool's result, used as given
            results[i] = _result(call, to_json_value(decision), False)
            _record(call, results[i], 0.0, ctx)  # type: ignore[arg-type]
    rs.pending = waiting
    return jobs


async def _run(
    rs: RunState,
    ctx: RunContext,
    calls: list[ToolCall],
    results: list[ToolResult | None],
    jobs: list[tuple[int, ToolCall, bool]],
) -> None:
    outcomes: dict[int, CallOutcome] = {}

    async def one(i: int, call: ToolCall, approved: bool) -> None:
        outcomes[i] = await _answer(call, ctx, approved)

    try:
        if len(jobs) == 1:  # the common case: no task, no gather
            i, call, approved = jobs[0]
            outcomes[i] = await _answer(call, ctx, approved)
        elif jobs:
            async with asyncio.TaskGroup() as group:
                for job in jobs:
                    group.create_task(one(*job))
    except BaseException:
        # Cancelled, or the run's deadline passed: still answer every call.
        out_of_time = rs.deadline is not None and time.time() >= rs.deadline
        why = "the run's time budget (timeout_s) ran out" if out_of_time else "the run was cancelled"
        _settle(rs, ctx, calls, results, outcomes, interrupted=why)
        raise
    _settle(rs, ctx, calls, results, outcomes)


def _settle(
    rs: RunState,
    ctx: RunContext,
    calls: list[ToolCall],
    results: list[ToolResult | None],
    outcomes: dict[int, CallOutcome],
    interrupted: str | None = None,
) -> None:
    """Fold this pass's outcomes into the step: keep waiting calls pending (if the run may still
    wait), or answer the whole step in one turn once nothing is left waiting."""
    waits = list(rs.pending)
    for i, outcome in outcomes.items():
        if isinstance(outcome, PendingRequest):
            waits.append(outcome)
        else:
            results[i] = outcome
    can_wait = ctx.can_wait and rs.suspensions < rs.limits.max_suspensions
    if interrupted is None and waits and can_wait:
        rs.pending = waits
        rs.step_results = results
        return
    for request in waits:  # the run cannot wait (any more): answer the calls now
        i = next(i for i, c in enumerate(calls) if c.id == request.call_id)
        if interrupted is None:
            reason = (
                f"the run has already waited max_suspensions={rs.limits.max_suspensions} times"
                if ctx.can_wait
                else "this agent's loop has no waiting state; declare the tool with "
                "requires_confirmation=, long_running= or credentials= so the run can wait"
            )
            results[i] = _result(calls[i], f"tool {calls[i].name!r} needs {request.kind} but {reason}", True)
        else:
            results[i] = _result(calls[i], f"tool {calls[i].name!r} did not finish: {interrupted}", True)
        _record(calls[i], results[i], 0.0, ctx)  # type: ignore[arg-type]
    for i, call in enumerate(calls):
        if results[i] is None:  # interrupted before it finished
            results[i] = _result(call, f"tool {call.name!r} did not finish: {interrupted or 'interrupted'}", True)
            _record(call, results[i], 0.0, ctx)  # type: ignore[arg-type]
    rs.pending = []
    rs.step_results = []
    rs.vetoes = {}
    _keep(rs, results)


def answer_unrun_calls(rs: RunState, ctx: RunContext, why: str) -> None:
    """When a run ends: answer calls that never ran (the run ended between postprocess and act,
    or while calls were pending) with error results, so every call has exactly one answer."""
    if rs.step_results or rs.pending:
        calls = _calls(rs)
        _settle(rs, ctx, calls, list(rs.step_results) or [None] * len(calls), {}, interrupted=why)
        return
    last = rs.messages[-1] if rs.messages else None
    if last is None or last.role != "assistant":
        return
    calls = [p for p in last.parts if type(p) is ToolCall]
    if not calls:
        return
    results: list[ToolResult | None] = []
    for call in calls:
        ctx.emit(ToolCalled, call_id=call.id, name=call.name, args=call.args)
        result = _result(call, f"tool {call.name!r} was not run: {why}", True)
        _record(call, result, 0.0, ctx)
        results.append(result)
    _keep(rs, results)


def _keep(rs: RunState, results: list[ToolResult | None]) -> None:
    answered = [r for r in results if r is not None]
    rs.tool_results = answered
    if answered:
        rs.messages.append(trusted(Message, role="user", parts=tuple(answered), agent=rs.active_agent))
