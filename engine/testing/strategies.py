"""Hypothesis strategies for testing agents: model behaviours valid for an agent, and budgets.

Every choice is drawn so that it shrinks toward ordinary behaviour (a fault drawn as "none",
valid arguments, one call, a text reply), so a failing case shrinks to a small, readable script.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..agent import TRANSFER_TOOL, Agent
from ..errors import ModelError
from ..events import ModelResponse, TextPart, ToolCall, Usage
from ..limits import Limits
from .invariants import scripted as scripted
from .schema import from_schema

ScriptItem = ModelResponse | ModelError

_INVALID_VALUES: st.SearchStrategy[Any] = st.sampled_from([None, [], {"nested": True}, "not-a-number", -1.5])


def _chance(draw: st.DrawFn, rate: float) -> bool:
    """True with probability ``rate``; shrinks to False."""
    if rate <= 0:
        return False
    return draw(st.integers(0, 999)) >= 1000 - int(rate * 1000)


def _invalid_args(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = list(schema.get("required", ()))
    how = draw(st.sampled_from(["wrong_type", "missing", "extra"]))
    args = draw(from_schema(schema)) if properties else {}
    if how == "missing" and required:
        args.pop(draw(st.sampled_from(required)), None)
    elif how == "wrong_type" and properties:
        name = draw(st.sampled_from(sorted(properties)))
        args[name] = draw(_INVALID_VALUES)
    else:
        args["unexpected_argument"] = 1
    return dict(args)


def tree_tools(agent: Agent) -> dict[str, Any]:
    """Every tool of every agent in ``agent``'s tree, by name."""
    found: dict[str, Any] = {}
    for member in agent.walk():
        found.update(member.tools)
    return found


@st.composite
def _tool_call(
    draw: st.DrawFn,
    agent: Agent,
    earlier: list[ToolCall],
    unknown_tool: float,
    invalid_args: float,
    repeat: float,
    transfer: float,
) -> ToolCall:
    if earlier and _chance(draw, repeat):
        again = draw(st.sampled_from(earlier))
        return ToolCall(name=again.name, args=dict(again.args))
    names = [a.name for a in agent.walk()]
    if len(names) > 1 and _chance(draw, transfer):  # any agent of the tree: some are not reachable
        target = draw(st.sampled_from(names))
        return ToolCall(name=TRANSFER_TOOL, args={"agent_name": target, "task": draw(st.text(max_size=8))})
    tools = tree_tools(agent)
    if not tools or _chance(draw, unknown_tool):
        return ToolCall(name=draw(st.sampled_from(["no_such_tool", "Search", "tool-42"])), args={})
    name = draw(st.sampled_from(sorted(tools)))
    schema = tools[name].spec.input_schema
    if _chance(draw, invalid_args):
        return ToolCall(name=name, args=_invalid_args(draw, schema))
    return ToolCall(name=name, args=dict(draw(from_schema(schema))))


@st.composite
def _usage(draw: st.DrawFn) -> Usage:
    return Usage(input_tokens=draw(st.integers(0, 60)), output_tokens=draw(st.integers(0, 30)), requests=1)


@st.composite
def model_behaviours(
    draw: st.DrawFn,
    agent: Agent,
    *,
    max_replies: int = 6,
    max_parallel: int = 3,
    text_rate: float = 0.2,
    unknown_tool: float = 0.05,
    invalid_args: float = 0.1,
    empty: float = 0.05,
    model_error: float = 0.05,
    truncated: float = 0.03,
    repeat: float = 0.05,
    transfer: float = 0.15,
    end_with_text: bool = True,
) -> list[ScriptItem]:
    """Scripts of model replies for ``agent``: text replies, single and parallel tool calls
    with arguments generated from each tool's JSON schema and, at the given rates, unknown tool
    names, invalid arguments, empty replies, model errors (retryable or not), replies cut
    short by max_tokens, repeated identical calls and, in an agent tree, transfers to any of
    its agents (reachable or not). Use with ``scripted(agent, script)``: one script serves
    whichever agent of the tree is active."""
    script: list[ScriptItem] = []
    earlier: list[ToolCall] = []
    for _ in range(draw(st.integers(0, max_replies))):
        if _chance(draw, model_error):
            retryable = draw(st.booleans())
            status = draw(st.sampled_from([429, 500, 529])) if retryable else 400
            script.append(ModelError(f"scripted model error {status}", status=status, retryable=retryable))
        elif _chance(draw, empty):
            script.append(ModelResponse(parts=(), stop_reason="end_turn", usage=draw(_usage())))
        elif _chance(draw, truncated):
            text = draw(st.text(max_size=10))
            script.append(ModelResponse(parts=(TextPart(text=text),), stop_reason="max_tokens", usage=draw(_usage())))
        elif _chance(draw, text_rate):
            text = draw(st.text(max_size=20))
            script.append(ModelResponse(parts=(TextPart(text=text),), stop_reason="end_turn", usage=draw(_usage())))
        else:
            calls = [
                draw(_tool_call(agent, earlier, unknown_tool, invalid_args, repeat, transfer))
                for _ in range(draw(st.integers(1, max_parallel)))
            ]
            earlier.extend(calls)
            script.append(ModelResponse(parts=tuple(calls), stop_reason="tool_use", usage=draw(_usage())))
    if end_with_text:
        script.append(ModelResponse(parts=(TextPart(text="final answer"),), stop_reason="end_turn"))
    return script


def limits(
    *, max_iterations: int = 6, salvage: bool | None = None, tool_timeouts: bool = True
) -> st.SearchStrategy[Limits]:
    """Budgets worth testing, tiny ones included (retries never wait)."""
    return st.builds(
        Limits,
        max_iterations=st.integers(1, max_iterations),
        max_tool_calls=st.none() | st.integers(1, 6),
        max_total_tokens=st.none() | st.integers(1, 300),
        tool_timeout_s=st.none() | st.sampled_from([0.01, 0.1]) if tool_timeouts else st.none(),
        max_model_retries=st.integers(0, 2),
        retry_backoff_s=st.just(0.0),
        salvage=st.booleans() if salvage is None else st.just(salvage),
    )
