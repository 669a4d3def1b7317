"""Hypothesis strategies for testing agents: model behaviours valid for an agent, budgets,
decisions for a run that waits (:func:`decisions`), and hostile tools and models
(:func:`hostile_tools`, :func:`hostile_replies`, :class:`HostileModel`).

Every choice is drawn so that it shrinks toward ordinary behaviour (a fault drawn as "none",
valid arguments, one call, a text reply), so a failing case shrinks to a small, readable script.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from ..data.decisions import Approve, Deny
from ..data.errors import ModelError
from ..data.events import ModelResponse, PendingRequest, TextPart, ToolCall, Usage
from ..data.limits import Limits
from ..data.result import RunResult
from ..models.scripted import ScriptItem as ScriptItem
from ..runtime.agent import TRANSFER_TOOL, Agent
from ..runtime.tools import Tool
from .invariants import scripted as scripted
from .schema import from_schema

_INVALID_VALUES: st.SearchStrategy[Any] = st.sampled_from([None, [], {"nested": True}, "not-a-number", -1.5])


_PERMILLE = st.integers(0, 999)
"""Strategies drawn from often are made once (making one per draw costs more than the draw)."""


def _chance(draw: st.DrawFn, rate: float) -> bool:
    """True with probability ``rate``; shrinks to False."""
    if rate <= 0:
        return False
    return draw(_PERMILLE) >= 1000 - int(rate * 1000)


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


@st.composite
def decisions(
    draw: st.DrawFn, waiting: RunResult | Sequence[PendingRequest], *, deny: float = 0.3, undecided: float = 0.0
) -> dict[str, Any]:
    """Decisions for a suspended run's pending requests, to hand to ``Runner.resume``: a
    confirmation is approved, a credential gets a drawn token, a long-running call a drawn
    result; at rate ``deny`` a request is denied instead, at rate ``undecided`` it is left
    waiting (the run suspends again). ``deny=0`` approves every confirmation. Shrinks toward
    approving everything. ``waiting`` is the suspended RunResult (or its ``pending``)."""
    pending = waiting.pending if isinstance(waiting, RunResult) else waiting
    chosen: dict[str, Any] = {}
    for request in pending:
        if _chance(draw, undecided):
            continue
        if _chance(draw, deny):
            chosen[request.call_id] = Deny(reason=draw(st.text(max_size=12)))
        elif request.kind == "confirmation":
            chosen[request.call_id] = Approve()
        elif request.kind == "credential":
            chosen[request.call_id] = draw(_TOKENS)
        else:
            chosen[request.call_id] = draw(_RESULTS)
    return chosen


_TOKENS = st.text(min_size=1, max_size=16)
_RESULTS: st.SearchStrategy[Any] = (
    st.text(max_size=20) | st.integers() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
)


# ---------------------------------------------------------------- hostile tools and models

HOSTILE_KINDS = (
    "fine",
    "raises",
    "system_exit",
    "generator_exit",
    "own_cancel",
    "keyboard_interrupt",
    "bytes",
    "iterator",
    "cycle",
    "bad_str",
    "rewind",
    "forget",
    "huge",
)
"""What the tools of :func:`hostile_tools` do, one tool per kind (the tool's name)."""


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


def _cycle() -> list[Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return cycle


_RAISES: dict[str, Any] = {
    "raises": lambda: RuntimeError("the tool failed"),
    "system_exit": lambda: SystemExit(2),
    "generator_exit": GeneratorExit,
    "own_cancel": lambda: asyncio.CancelledError("the tool's own"),
    "keyboard_interrupt": KeyboardInterrupt,
}
_RETURNS: dict[str, Any] = {
    "fine": lambda: "ok",
    "bytes": lambda: b"\xff\xfe\x00",
    "iterator": itertools.count,
    "cycle": _cycle,
    "bad_str": _BadStr,
    "huge": lambda: "x" * 300_000,
}


def _misbehave(kind: str, ctx: Any) -> Any:
    if kind in _RAISES:
        raise _RAISES[kind]()
    if kind == "rewind":
        ctx.run_state.iteration = 0
    elif kind == "forget":
        ctx.run_state.messages.clear()
    return _RETURNS.get(kind, _RETURNS["fine"])()


def hostile_tools(executions: list[str], *, keyboard_interrupt: bool = True) -> list[Tool]:
    """One tool per kind of :data:`HOSTILE_KINDS` (named for it; each takes ``x: int``), half of
    them sync (run in threads) and half async. Each appends its name to ``executions`` when it
    runs, then misbehaves as its name says: raising BaseExceptions, returning values that cannot
    become JSON or are huge, or trying to rewind the run or clear its history."""
    tools: list[Tool] = []
    for i, kind in enumerate(HOSTILE_KINDS):
        if kind == "keyboard_interrupt" and not keyboard_interrupt:
            continue
        tools.append(Tool(_hostile_fn(kind, executions, is_async=bool(i % 2)), name=kind,
                          description=f"A tool that is {kind.replace('_', ' ')}."))  # fmt: skip
    return tools


def _hostile_fn(kind: str, executions: list[str], *, is_async: bool) -> Any:
    def sync_fn(x: int, ctx: Any) -> Any:
        executions.append(kind)
        return _misbehave(kind, ctx)

    async def async_fn(x: int, ctx: Any) -> Any:
        executions.append(kind)
        return _misbehave(kind, ctx)

    return async_fn if is_async else sync_fn


class HostileModel:
    """A model (not a built-in one: its replies are checked) that replays a script of
    :func:`hostile_replies` items: replies, exceptions to raise, malformed replies. Past the end
    of the script it answers ``"done"``."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.calls = 0

    async def complete(self, request: Any) -> ModelResponse:
        self.calls += 1
        if self.calls > len(self.script):
            return ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn")
        item = self.script[self.calls - 1]
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]


_TRANSIENT: tuple[Callable[[], Exception], ...] = (
    lambda: ConnectionResetError("connection reset"),
    lambda: TimeoutError("read timed out"),
    lambda: OSError("network down"),
)
"""Each makes a fresh exception: one instance raised again and again would grow its traceback
(and keep every run it went through alive) from example to example."""


@st.composite
def _malformed(draw: st.DrawFn) -> ModelResponse:
    how = draw(st.sampled_from(["parts None", "usage None", "str part", "negative usage", "call id None"]))
    text = (TextPart(text="x"),)
    if how == "parts None":
        return ModelResponse.model_construct(parts=None)  # type: ignore[arg-type]
    if how == "usage None":
        return ModelResponse.model_construct(parts=text, usage=None, stop_reason="end_turn")  # type: ignore[arg-type]
    if how == "str part":
        return ModelResponse.model_construct(parts=("text",), usage=Usage(), stop_reason="end_turn")  # type: ignore[arg-type]
    if how == "negative usage":
        usage = Usage.model_construct(input_tokens=-draw(st.integers(1, 10**6)))
        return ModelResponse.model_construct(parts=text, usage=usage, stop_reason="end_turn")
    call = ToolCall.model_construct(id=None, name="fine", args={"x": 1})  # type: ignore[arg-type]
    return ModelResponse.model_construct(parts=(call,), usage=Usage(), stop_reason="tool_use")


_FEW, _DIGIT, _SEED = st.integers(1, 3), st.integers(0, 9), st.integers(0, 2**32 - 1)
_INPUT, _OUTPUT = st.integers(0, 60), st.integers(0, 30)


@st.composite
def _calls(draw: st.DrawFn, names: list[str], wide: int) -> tuple[ToolCall, ...]:
    if not _chance(draw, 0.1):
        name = st.sampled_from(names)
        calls = [ToolCall(name=draw(name), args={"x": draw(_DIGIT)}) for _ in range(draw(_FEW))]
    else:  # a very wide reply: its calls come from one drawn seed (hundreds of draws cost more than the run)
        count, pick = draw(st.integers(4, wide)), random.Random(draw(_SEED))
        calls = [ToolCall(name=pick.choice(names), args={"x": pick.randrange(10)}) for _ in range(count)]
    if len(calls) > 1 and _chance(draw, 0.3):  # a provider sends one id twice
        dup = draw(st.integers(1, len(calls) - 1))
        calls[dup] = calls[dup].model_copy(update={"id": calls[0].id})
    return tuple(calls)


@st.composite
def hostile_replies(
    draw: st.DrawFn, names: Sequence[str] = HOSTILE_KINDS, *, max_replies: int = 6, wide: int = 200
) -> list[Any]:
    """Scripts for :class:`HostileModel`: tool-use replies calling ``names`` (duplicate ids in
    one reply, ids an earlier reply used, now and then very wide replies of up to ``wide``
    calls), text replies, transient exceptions (ConnectionResetError, TimeoutError, OSError),
    and malformed replies (parts or usage None, a str part, negative usage, a call without an
    id)."""
    script: list[Any] = []
    pool = list(names)
    used: list[str] = []
    for _ in range(draw(st.integers(0, max_replies))):
        if _chance(draw, 0.1):
            script.append(draw(st.sampled_from(_TRANSIENT))())
        elif _chance(draw, 0.05):
            script.append(draw(_malformed()))
        elif _chance(draw, 0.15):
            script.append(ModelResponse(parts=(TextPart(text="an answer"),), stop_reason="end_turn"))
        else:
            usage = Usage(input_tokens=draw(_INPUT), output_tokens=draw(_OUTPUT), requests=1)
            calls = draw(_calls(pool, wide))
            if used and _chance(draw, 0.2):  # a provider reuses an id of an earlier turn
                calls = (calls[0].model_copy(update={"id": draw(st.sampled_from(used))}), *calls[1:])
            used += [c.id for c in calls]
            script.append(ModelResponse(parts=calls, stop_reason="tool_use", usage=usage))
    return script
