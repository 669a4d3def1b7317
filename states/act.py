"""act: runs every tool call of the latest reply, concurrently.

Reads ``response`` (its tool calls) and the agent's tools and tool callbacks; writes
``tool_results`` (in the model's call order), ``messages`` (one user turn answering every
call) and ``tool_calls_made``. Every call gets exactly one result, even when the run is
cancelled or runs out of time mid-step: an unknown tool, invalid arguments, an exception or a
timeout each become an error result whose message tells the model what went wrong.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loopwright.agent import TRANSFER_TOOL
from loopwright.events import Message, ToolAnswered, ToolCall, ToolCalled, ToolResult, trusted
from loopwright.log import get_logger, logging_enabled
from loopwright.run_state import RunContext, RunState
from loopwright.tools import ArgumentsError, to_json_value

_perf = time.perf_counter


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


async def _execute(call: ToolCall, ctx: RunContext) -> ToolResult:
    """One tool call, through before_tool, the tool (with its timeout) and after_tool."""
    agent = ctx.agent
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
    except TimeoutError as exc:
        if timeout is not None and scope.expired():
            return _result(call, f"tool {call.name!r} timed out after {timeout:g} s", True)
        return _result(call, f"tool {call.name!r} raised TimeoutError: {exc}", True)
    except Exception as exc:
        return _result(call, f"tool {call.name!r} raised {type(exc).__name__}: {exc}", True)
    return _result(call, to_json_value(value), False)


async def _answer(call: ToolCall, ctx: RunContext) -> ToolResult:
    started = _perf()
    result = await _execute(call, ctx)
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


async def _into(results: list[ToolResult | None], i: int, call: ToolCall, ctx: RunContext) -> None:
    results[i] = await _answer(call, ctx)


async def act(rs: RunState, ctx: RunContext) -> None:
    response = rs.response
    calls = [p for p in response.parts if type(p) is ToolCall] if response is not None else []
    rs.tool_calls_made += len(calls)
    for call in calls:
        ctx.emit(ToolCalled, call_id=call.id, name=call.name, args=call.args)
    results: list[ToolResult | None] = [None] * len(calls)
    try:
        if len(calls) == 1:
            results[0] = await _answer(calls[0], ctx)
        else:
            async with asyncio.TaskGroup() as group:
                for i, call in enumerate(calls):
                    group.create_task(_into(results, i, call, ctx))
    except BaseException:
        # Cancelled, or the run's deadline passed: still answer every call.
        out_of_time = rs.deadline is not None and time.time() >= rs.deadline
        why = "the run's time budget (timeout_s) ran out" if out_of_time else "the run was cancelled"
        for i, call in enumerate(calls):
            if results[i] is None:
                results[i] = _result(call, f"tool {call.name!r} did not finish: {why}", True)
                _record(call, results[i], 0.0, ctx)  # type: ignore[arg-type]
        _keep(rs, results)
        raise
    _keep(rs, results)


def answer_unrun_calls(rs: RunState, ctx: RunContext, why: str) -> None:
    """If the history ends with tool calls that never ran (the run ended between postprocess
    and act), answer each with an error result so every call has exactly one answer."""
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
