"""Tool retries (``@tool(retries=N, retry_on=...)``): what a retry is granted, and what the
model reads when it is not.

Two kinds, one budget:

- *by the model*: the tool raised :class:`~loopwright.runtime.tools.RetryTool`, or the model's
  arguments did not validate. The call is answered with the message and "call again"; the model
  may, at most ``retries`` times in a row for that tool (a result of the tool that is not such a
  retry starts the count again);
- *transient*: the tool raised an exception of its ``retry_on``. act waits
  ``Limits.retry_delay(attempt)`` and calls it again itself, at most ``retries`` times for the
  call; the call is answered once, with its last result.

Every retry granted is charged to the run's ``Limits.max_tool_retries`` and recorded as a
``tool_retried`` event. A retry asked past that budget is answered with the error as it is,
and the run's ``within_tool_retry_budget`` guard stops the loop going round
(:mod:`loopwright.features.tool_retries` adds it; its slice is :class:`ToolRetries`). act's calls
reach this through the feature's ``retry`` hook (:func:`retry`); a run on a machine without that
feature retries nothing: such calls are answered with the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from loopwright.data.errors import redact
from loopwright.data.events import ToolCall, ToolResult, ToolRetried, trusted
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import known_secrets

NAME = "tool_retries"
Reason = Literal["transient", "retry_tool", "arguments"]


@dataclass(slots=True)
class ToolRetries:
    """The tool-retry slice of a run's state (``RunState.features["tool_retries"]``)."""

    made: int = 0
    """Retries granted in the run (charged to ``max_tool_retries``)."""
    refused: int = 0
    """Retries asked once ``max_tool_retries`` was spent (one is enough to stop the loop)."""
    streak: dict[str, int] = field(default_factory=dict)
    """Retries in a row the model was asked for, by tool."""
    last: dict[str, str] = field(default_factory=dict)
    """The call id of each tool's latest retry by the model (a later result of the tool ends its streak)."""


def retries_asked(rs: Any) -> int:
    """Retries granted and refused in the run (0 for a run without the feature's slice)."""
    r = rs.features.get(NAME)
    return 0 if r is None else r.made + r.refused


def _result(call: ToolCall, content: str, ctx: RunContext) -> ToolResult:
    said = redact(content, known_secrets(ctx))
    return trusted(ToolResult, type="tool_result", call_id=call.id, name=call.name, content=said, is_error=True)


def _room(r: ToolRetries, ctx: RunContext) -> str | None:
    """None when the run's budget has room for one more retry (then charged), else why not."""
    cap = ctx.run_state.limits.max_tool_retries
    if r.made < cap:
        r.made += 1
        return None
    r.refused += 1
    return f"the run's tool-retry budget is spent (max_tool_retries={cap}); the run stops here"


def _continues(ctx: RunContext, name: str, last: str | None) -> bool:
    """The tool's latest result in the history is the answer to its latest retry (or that retry
    is in this very pass): its streak goes on."""
    if last is None:
        return False
    for message in reversed(ctx.run_state.messages):
        if message.role != "user":
            continue
        for part in message.parts:
            if type(part) is ToolResult and part.name == name:
                return part.call_id == last
    return True


def by_model(call: ToolCall, tool: Any, message: str, reason: Reason, ctx: RunContext) -> ToolResult:
    """The answer to a call the model may fix (``RetryTool``, or arguments that did not
    validate): the message and "call again", while the tool's retries and the run's budget
    last; else the message and why no retry is left."""
    r: ToolRetries | None = ctx.run_state.features.get(NAME)
    if r is None or not tool.retries:
        return _result(call, f"{message} (tool {call.name!r} takes no retries)", ctx)
    streak = r.streak.get(call.name, 0) if _continues(ctx, call.name, r.last.get(call.name)) else 0
    if streak >= tool.retries:
        r.streak.pop(call.name, None)
        r.last.pop(call.name, None)
        return _result(call, f"{message} (tool {call.name!r} was retried {streak} times in a row: no retry left)", ctx)
    refused = _room(r, ctx)
    if refused is not None:
        return _result(call, f"{message} ({refused})", ctx)
    r.streak[call.name], r.last[call.name] = streak + 1, call.id
    ctx.record(ToolRetried, call.id, call.name, streak + 1, reason, message, 0.0)
    return _result(call, f"{message}\nFix this and call {call.name} again (retry {streak + 1} of {tool.retries}).", ctx)


def transient(call: ToolCall, tool: Any, attempt: int, said: str, ctx: RunContext) -> float | ToolResult:
    """Retry number ``attempt`` of a call whose tool raised an exception of its ``retry_on``
    (``said``: "tool 'x' raised ..."): the delay before it (charged and recorded), or the
    call's answer when no retry is left."""
    r: ToolRetries | None = ctx.run_state.features.get(NAME)
    if r is None:
        return _result(call, said, ctx)
    if attempt > tool.retries:
        return _result(call, f"{said} (tried {attempt} times)", ctx)
    refused = _room(r, ctx)
    if refused is not None:
        return _result(call, f"{said} ({refused})", ctx)
    delay = ctx.limits.retry_delay(attempt)
    ctx.record(ToolRetried, call.id, call.name, attempt, "transient", redact(said, known_secrets(ctx)), delay)
    return delay


def retry(
    *, call: ToolCall, tool: Any, reason: Reason, message: str, attempt: int, ctx: RunContext, **_: Any
) -> float | ToolResult:
    """The feature's ``retry`` hook: a call of a tool with ``retries=N`` failed (``reason``:
    ``"arguments"`` or ``"retry_tool"``, the model may fix it; ``"transient"``, act may call it
    again: its retry number ``attempt``). The call's answer, or the seconds to wait before act
    calls it again."""
    if reason == "transient":
        return transient(call, tool, attempt, message, ctx)
    return by_model(call, tool, message, reason, ctx)
