"""Tool calls: running one, running many at once, and answering them in the history.

The ``act`` stage (and a feature that finishes a held step, like ``waiting``) build on these.
Every call gets exactly one result: an unknown tool, invalid arguments, an exception, a timeout,
a cancellation each become an error result whose message tells the model what went wrong.
A call may instead come back as a :class:`PendingRequest` (it needs a confirmation, a
credential, or its result later): what happens to it is up to the features (``hold``). A call
of a tool that runs an agent comes back as an :class:`~loopwright.runtime.approvals.Asks` when
its nested run waits: one request for the call, carrying every request of the nested run.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable, Coroutine, Generator, Sequence
from types import CoroutineType
from typing import Any, TypeVar

from ..data.errors import CredentialRequired, redact
from ..data.events import (
    PendingRequest,
    ToolAnswered,
    ToolCall,
    ToolResult,
)
from ..data.limits import Watched, watch
from ..data.run_state import RunState
from ..data.values import INT_BITS
from .answers import answer_turn as answer_turn
from .answers import answer_unrun_calls as answer_unrun_calls
from .answers import fill as fill
from .answers import interruption as interruption
from .answers import record as record
from .answers import result as result
from .approvals import Asks as Asks
from .approvals import approved_as as approved_as
from .approvals import asks_of as asks_of
from .approvals import edit_problem as edit_problem
from .approvals import hands_down as hands_down
from .approvals import owner as owner
from .approvals import told
from .context import CURRENT_CALL, RunContext
from .model_call import known_secrets
from .nesting import enter_tools, leave_tools, link
from .observers import enter_scopes
from .tools import ArgumentsError, Pending, RetryTool, Tool, ToolContext, ToolValueError, capped, to_json_value

_perf = time.perf_counter
_monotonic = time.monotonic
T = TypeVar("T")
CallOutcome = ToolResult | PendingRequest
"""What one call comes to in a pass: its result, or a request that makes it wait."""
_OUTCOMES = (ToolResult, PendingRequest)
Job = tuple[int, ToolCall, bool]
"""A call to run: its position in the reply, the call, and whether a person approved it."""


def tool_calls(rs: RunState) -> list[ToolCall]:
    """The tool calls of the latest reply, in the model's order."""
    response = rs.response
    if response is None:
        return []
    parts = response.parts
    if len(parts) == 1:  # the usual reply: one part (no comprehension for it)
        return [parts[0]] if type(parts[0]) is ToolCall else []
    return [p for p in parts if type(p) is ToolCall]


BUDGET_SPENT = "not run: tool-call budget spent"
"""How a call past the ``max_tool_calls`` budget is answered (the testing kit looks for it)."""


def tool_call_room(rs: RunState) -> tuple[int, int] | None:
    """How many more tool calls may run, and the cap that says so: the least room of the
    run's ``max_tool_calls`` and the active agent's own (None: no cap)."""
    cap = rs.limits.max_tool_calls
    found = None if cap is None else (cap - rs.tool_calls_made, cap)
    own = rs.turn_limits.max_tool_calls if rs.turn_limits is not None else None
    if own is not None:
        left = own - (rs.tool_calls_made - int(rs.turn_start.get("max_tool_calls", 0)))
        if found is None or left < found[0]:
            found = (left, own)
    return found


def budget_spent(call: ToolCall, cap: int) -> str:
    return f"{BUDGET_SPENT} (max_tool_calls={cap}); tool {call.name!r} was not called"


def _wait(call: ToolCall, kind: Any, detail: str, key: str | None = None) -> PendingRequest:
    return PendingRequest(call_id=call.id, tool=call.name, args=call.args, kind=kind, detail=detail, credential_key=key)


async def _before_tool(call: ToolCall, ctx: RunContext) -> ToolResult | None:
    before = ctx.agent.before_tool
    if before is None:
        return None
    try:
        value = before(call, ctx)
        if asyncio.iscoroutine(value):
            value = await value
    except Exception as exc:
        said = f"the before_tool callback raised {type(exc).__name__}: {exc}"
        return result(call, redact(said, known_secrets(ctx)), True)
    return None if value is None else value_result(call, value, ctx)


def execute(call: ToolCall, ctx: RunContext, approved: bool) -> CallOutcome | Awaitable[CallOutcome]:
    """One tool call, through vetoes, gates, validation, the confirmation check, before_tool and
    the tool (with its timeout). ``approved``: a person approved it (or supplied its credential).
    The outcome at once when the call ends before the tool would run, else what to await for it
    (no coroutine of its own: the hot path's chain of frames stays short)."""
    rs = ctx.run_state
    if rs.vetoes:
        vetoed = rs.vetoes.get(call.id)
        if vetoed is not None:
            return result(call, f"tool {call.name!r} was vetoed: {vetoed}", True)
    for gate in ctx.gates:  # the features' gates
        said = gate(call=call, rs=rs, ctx=ctx)
        if said is not None:
            return said  # type: ignore[no-any-return]
    checked = _check(call, ctx, approved)
    if type(checked) is not tuple:
        return checked  # type: ignore[return-value]
    if ctx.agent.before_tool is not None:
        return _before_then_invoke(call, checked[0], checked[1], ctx)
    return _invoke(call, checked[0], checked[1], ctx)


def proceed(call: ToolCall, ctx: RunContext, approved: bool) -> CallOutcome | Awaitable[CallOutcome]:
    """The rest of :func:`execute` once the gates let ``call`` through: validation, the
    confirmation check, before_tool and the tool (a gate that wraps the call runs it so)."""
    checked = _check(call, ctx, approved)
    if type(checked) is not tuple:
        return checked  # type: ignore[return-value]
    if ctx.agent.before_tool is not None:
        return _before_then_invoke(call, checked[0], checked[1], ctx)
    return _invoke(call, checked[0], checked[1], ctx)


async def _before_then_invoke(call: ToolCall, tool: Tool, kwargs: dict[str, Any], ctx: RunContext) -> CallOutcome:
    replaced = await _before_tool(call, ctx)
    if replaced is not None:
        return replaced
    return await _invoke(call, tool, kwargs, ctx)


def _check(call: ToolCall, ctx: RunContext, approved: bool) -> CallOutcome | tuple[Tool, dict[str, Any]]:
    """The tool and its validated arguments; or the error result, or the confirmation request."""
    agent = ctx.agent
    tool = agent.tools.get(call.name)
    if tool is None:
        offered = rs.request.tools if (rs := ctx.run_state).request is not None else agent.tool_specs
        available = ", ".join(t.name for t in offered) or "none"
        return result(call, f"unknown tool {call.name!r}; available tools: {available}", True)
    if ctx.tools_named is not None and not approved:  # (approved: it was checked when it first came)
        names = ctx.tool_names
        if ctx.offered_of is not names:  # the names change with the request's tools, rarely
            ctx.offered_of, ctx.offered = names, frozenset(names)
        if call.name not in ctx.offered:
            return result(call, not_offered(call, names), True)
    try:
        kwargs = tool.validate(call.args)
    except ArgumentsError as exc:
        if tool.retries:  # the model may fix its arguments: a retry
            return _retried(call, tool, "arguments", str(exc), 0, ctx)  # type: ignore[return-value]
        return result(call, str(exc), True)
    if not approved and tool.requires_confirmation:
        try:
            needs = tool.needs_confirmation(kwargs)
        except Exception as exc:
            return result(call, f"tool {call.name!r}: its requires_confirmation check raised {exc!r}", True)
        if needs:
            return _wait(call, "confirmation", f"{call.name} needs your approval to run")
    return tool, kwargs


def not_offered(call: ToolCall, names: Sequence[str]) -> str:
    return f"tool {call.name!r} was not offered in this request; the tools offered: {', '.join(names) or 'none'}"


async def _invoke(  # noqa: C901, PLR0912 (each way a call ends, written out: the hot path's one frame)
    call: ToolCall, tool: Tool, kwargs: dict[str, Any], ctx: RunContext, attempt: int = 0
) -> CallOutcome:
    timeout = tool.timeout_s or ctx.limits.tool_timeout_s
    if tool.ctx_param is None and tool.is_async:
        work = tool.fn(**kwargs)  # the usual tool: no wrapper in between
    else:
        work = tool.invoke(kwargs, ToolContext(ctx) if tool.ctx_param else ctx)
    bound: Watched | None = None
    try:
        if timeout is not None and type(work) is CoroutineType:
            # the bound is armed only if the tool suspends (a call that never does cannot be
            # cancelled): most calls of a quick tool end in their first step, and pay for no watch
            began = _monotonic()
            try:
                step = work.send(None)
            except StopIteration as done:
                value = done.value
            else:
                bound = watch(timeout - (_monotonic() - began))
                value = await rest_of(work, step)
        else:
            bound = watch(timeout) if timeout is not None else None
            value = await work
    except asyncio.CancelledError:
        if bound is None or not bound.expired():
            raise
        return _timed_out(call, tool, timeout)  # type: ignore[arg-type]
    except CredentialRequired as exc:
        return _wait(call, "credential", exc.message, exc.key)
    except Exception as exc:
        if tool.retries:  # (tool_retries): the model fixes it, or act tries again
            if bound is not None:
                bound.close()
                bound = None
            return await _retry(call, tool, kwargs, ctx, exc, attempt)
        if type(exc) is RetryTool:
            return _said(call, f"{exc.message} (tool {call.name!r} takes no retries)", ctx)
        return result(call, redact(f"tool {call.name!r} raised {type(exc).__name__}: {exc}", known_secrets(ctx)), True)
    finally:
        if bound is not None:
            bound.close()
    return _returned(call, value, ctx)


async def _retry(
    call: ToolCall, tool: Tool, kwargs: dict[str, Any], ctx: RunContext, exc: Exception, attempt: int
) -> CallOutcome:
    """A tool of ``retries=N`` raised ``exc`` in its attempt ``attempt`` (0: the first): the
    model is asked to fix it (``RetryTool``), act calls it again (an exception of ``retry_on``),
    or the call is answered with the error."""
    if isinstance(exc, RetryTool):
        return _retried(call, tool, "retry_tool", exc.message, 0, ctx)  # type: ignore[return-value]
    said = f"tool {call.name!r} raised {type(exc).__name__}: {exc}"
    if not isinstance(exc, tool.retry_on):
        return result(call, redact(said, known_secrets(ctx)), True)
    waited = _retried(call, tool, "transient", said, attempt + 1, ctx)
    if type(waited) is not float:
        return waited  # type: ignore[return-value]
    if waited:
        await asyncio.sleep(waited)
    return await _invoke(call, tool, kwargs, ctx, attempt + 1)


def _retried(
    call: ToolCall, tool: Tool, reason: str, message: str, attempt: int, ctx: RunContext
) -> ToolResult | float:
    """What the features make of a failed call of a tool with retries (the first ``retry`` hook:
    ``tool_retries``): its answer, or the seconds to wait before calling it again. A machine
    without such a feature retries nothing: the call is answered with the error."""
    hooks = ctx.retry_hooks
    if hooks:
        return hooks[0](call=call, tool=tool, reason=reason, message=message, attempt=attempt, ctx=ctx)  # type: ignore[no-any-return]
    return _said(call, message if reason == "transient" else f"{message} (tool {call.name!r} takes no retries)", ctx)


def _said(call: ToolCall, content: str, ctx: RunContext) -> ToolResult:
    """An error result saying ``content`` (the run's secrets redacted)."""
    return result(call, redact(content, known_secrets(ctx)), True)


def _returned(call: ToolCall, value: Any, ctx: RunContext) -> CallOutcome:
    """What a tool's return value comes to: its result, or (a ``Pending``) a request to wait."""
    kind = type(value)
    if (kind is int and value.bit_length() <= INT_BITS) or kind is float or kind is bool or value is None:  # JSON
        return result(call, value, False)
    if isinstance(value, Pending):
        return _wait(call, "result", value.detail or f"{call.name} is still running")
    if (kind is Asks or kind is PendingRequest) and value.call_id == call.id:  # (agent_tool: its child waits)
        return value  # type: ignore[no-any-return]
    return value_result(call, value, ctx)


@types.coroutine
def rest_of(work: Coroutine[Any, Any, T], step: Any) -> Generator[Any, Any, T]:
    """Await the rest of coroutine ``work``, whose first step was taken by hand and yielded
    ``step`` (what ``yield from`` does, from its second step: ``step`` goes up to the task
    first; what the task sends or throws goes down to ``work``)."""
    while True:
        try:
            sent = yield step
        except GeneratorExit:
            work.close()
            raise
        except BaseException as exc:  # a cancellation, or anything thrown in: work's to handle
            try:
                step = work.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                step = work.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]


def _timed_out(call: ToolCall, tool: Tool, timeout: float) -> ToolResult:
    threaded = not tool.is_async and tool.blocking
    still = "; it may still complete (its thread cannot be stopped)" if threaded else ""
    return result(call, f"tool {call.name!r} timed out after {timeout:g} s{still}", True)


def value_result(call: ToolCall, value: Any, ctx: RunContext) -> ToolResult:
    """The result of a call that returned ``value``: as JSON data, cut to the active agent's
    ``max_tool_result_chars``; an error result naming the type if it cannot become JSON."""
    try:
        content = to_json_value(value)
    except ToolValueError as exc:
        return result(call, f"tool {call.name!r} {exc}", True)
    return result(call, capped(content, ctx.limits.max_tool_result_chars), False)


class _Interrupted(Exception):
    """A call of a pass was interrupted (KeyboardInterrupt): the pass stops its other calls."""


def _being_cancelled() -> bool:
    """The task running this is being cancelled (not a CancelledError a tool raised itself)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _caught(call: ToolCall, ctx: RunContext, exc: BaseException, who: str) -> ToolResult:
    """The error result for what tool code (``who``: the tool, or a callback) raised: any
    exception, a ``SystemExit`` (argparse in a tool), a ``GeneratorExit`` or a ``CancelledError``
    it raised itself. A ``KeyboardInterrupt`` cancels the run: the call is answered,
    ``ctx.interrupt`` keeps it, and the runner re-raises it once the run has ended. A
    cancellation of the run itself is raised again."""
    if isinstance(exc, asyncio.CancelledError):
        if _being_cancelled():
            raise exc
        why = f" ({exc})" if str(exc) else ""
        return result(call, f"{who} raised its own CancelledError{why}; it was not a cancellation of the run", True)
    if isinstance(exc, KeyboardInterrupt):
        if ctx.interrupt is None:
            ctx.interrupt = exc
        ctx.run_state.cancel_requested = True
        return result(call, f"{who} was interrupted (KeyboardInterrupt); the run is cancelled", True)
    if not isinstance(exc, ANSWERED):
        raise exc  # another BaseException is the process's business (see ANSWERED)
    return result(call, redact(f"{who} raised {type(exc).__name__}: {exc}", known_secrets(ctx)), True)


ANSWERED = (Exception, SystemExit, GeneratorExit)
"""What tool code may raise and have answered as an error result (with a tool's own
``CancelledError`` and ``KeyboardInterrupt``, handled apart). Any other ``BaseException`` (a
test framework's outcome, gevent's ``GreenletExit``, a simulated crash) is not the run's to
catch: it propagates untouched, the run left as it was at its last checkpoint, like a process
that died."""


async def answer(call: ToolCall, ctx: RunContext, approved: bool = False, scoped: bool = False) -> CallOutcome:
    """Run ``call`` (:func:`execute`), pass its result through after_tool, and record it; inside
    the run's tool scopes (per-run observers' ``tool_scope``), if any (``scoped``: entered).
    Whatever the tool code raises is answered (:func:`_caught`): never a BaseException that
    stops the event loop."""
    if ctx.tool_scopes and not scoped:
        return await _in_scopes(call, ctx, approved)
    started = _perf()
    token = CURRENT_CALL.set(call.id)
    parent = enter_tools(ctx.link or _link(ctx))  # runs started by the tool are this run's children
    try:
        try:
            outcome = execute(call, ctx, approved)
            if not isinstance(outcome, _OUTCOMES):
                outcome = await outcome
        except BaseException as exc:
            outcome = _caught(call, ctx, exc, f"tool {call.name!r}")
        kind = type(outcome)
        if kind is PendingRequest or kind is Asks:  # (Asks: an agent_tool's child waits on several)
            return outcome
        after = ctx.agent.after_tool
        if after is not None:
            outcome = await _after_tool(call, outcome, ctx)  # type: ignore[arg-type]
        if approved and ctx.told is not None:  # a person edited the call or left a note: the model is told
            outcome = told(outcome, ctx.told.pop(call.id, None))  # type: ignore[arg-type]
        ctx.record(ToolAnswered, call.id, call.name, outcome.content, outcome.is_error, _perf() - started)  # type: ignore[union-attr]
        if ctx.on_result is not None:  # a store keeps the result before the call counts as done
            await ctx.on_result(call, outcome, ctx)
        return outcome
    finally:
        leave_tools(parent)
        CURRENT_CALL.reset(token)


async def _after_tool(call: ToolCall, outcome: ToolResult, ctx: RunContext) -> ToolResult:
    try:
        replaced = ctx.agent.after_tool(call, outcome, ctx)  # type: ignore[misc]
        if asyncio.iscoroutine(replaced):
            replaced = await replaced
        if isinstance(replaced, ToolResult):
            return replaced
        if replaced is not None:
            raise TypeError(f"it returned {type(replaced).__name__}; return None or a ToolResult")
    except BaseException as exc:
        return _caught(call, ctx, exc, "the after_tool callback")
    return outcome


async def _in_scopes(call: ToolCall, ctx: RunContext, approved: bool) -> CallOutcome:
    with enter_scopes(ctx.tool_scopes, call):
        return await answer(call, ctx, approved, scoped=True)


async def run_jobs(jobs: Sequence[Job], ctx: RunContext, outcomes: dict[int, CallOutcome]) -> None:
    """Run ``jobs`` concurrently (a lone job without a task), each outcome into ``outcomes`` by
    position as it completes, so an interrupted pass keeps what finished."""
    if len(jobs) == 1:  # the common case: no task, no group
        i, call, approved = jobs[0]
        outcomes[i] = await answer(call, ctx, approved)
    else:
        await _run_group(jobs, ctx, outcomes)


def _link(ctx: RunContext) -> Any:
    ctx.link = link(ctx.run_state)
    return ctx.link


async def _run_group(jobs: Sequence[Job], ctx: RunContext, outcomes: dict[int, CallOutcome]) -> None:

    async def one(i: int, call: ToolCall, approved: bool) -> None:
        outcomes[i] = await answer(call, ctx, approved)
        if ctx.interrupt is not None:
            raise _Interrupted  # the group stops the other calls

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(*job))
    except* _Interrupted:
        pass  # the calls that did not finish are answered by the caller (``fill``)
