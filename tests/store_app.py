"""Agents for the store tests, importable by the subprocesses that run and resume them.

Every real execution of a tool is recorded in ``EXECUTED`` as ``(label, idempotency key)`` and,
when ``LOOPWRIGHT_TEST_LOG`` names a file, appended to it (one line, flushed) so a parent
process sees the executions of a child it kills.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from loopwright import Agent, Limits, ModelRequest, ModelResponse, RunContext, ScriptedModel, ToolCall, tool
from loopwright.models.scripted import to_response

EXECUTED: list[tuple[str, str | None]] = []
CRASH_AFTER: set[str] = set()


def labels() -> Counter[str]:
    """How many times each tool call (by its label) executed."""
    return Counter(label for label, _key in EXECUTED)


"""Labels whose next execution "kills the process" right after doing its work (raises Crash)."""


class Crash(BaseException):
    """Stands for the process dying: nothing in the engine catches it."""


def _record(label: str, ctx: RunContext) -> None:
    EXECUTED.append((label, ctx.idempotency_key))
    path = os.environ.get("LOOPWRIGHT_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{label}\t{ctx.idempotency_key}\n")
            f.flush()


@tool
async def work(label: str, ctx: RunContext, seconds: float = 0.0) -> str:
    """Do one piece of work (recorded when it starts: its effect is done), taking ``seconds``."""
    _record(label, ctx)
    if seconds:
        await asyncio.sleep(seconds)
    if label in CRASH_AFTER:
        CRASH_AFTER.discard(label)
        raise Crash(label)
    return f"did {label}"


@tool(requires_confirmation=lambda args: args["amount"] > 100)
async def pay(amount: int, ctx: RunContext, seconds: float = 0.0) -> str:
    """Pay an amount (over 100 needs approval)."""
    if seconds:
        await asyncio.sleep(seconds)
    _record(f"pay {amount}", ctx)
    return f"paid {amount}"


def by_turn(script: Sequence[Any]) -> ScriptedModel:
    """A model whose reply is picked by how many replies the history holds, so a run resumed in
    a new process (with a new model) gets the reply the uninterrupted run would have got."""
    replies = [to_response(item, i) for i, item in enumerate(script)]

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        answer = replies[done]
        assert isinstance(answer, ModelResponse)
        return answer

    return ScriptedModel(reply)


def _replies_so_far(request: ModelRequest) -> int:
    """Replies in the history as an agent of a tree sees it: its own assistant turns, and other
    agents' tool-use turns shown to it as context ("[name] called ...")."""
    count = 0
    for m in request.messages:
        if m.role == "assistant" or (
            m.agent is not None and any("] called " in getattr(p, "text", "") for p in m.parts)
        ):
            count += 1
    return count


def tree_agent(script: Sequence[Any], **limits: Any) -> Agent:
    """``root`` with the sub-agent ``helper``: both have the tools and answer from one script
    (a reply picked by the replies so far), so a script may transfer back and forth."""
    replies = [to_response(item, i) for i, item in enumerate(script)]

    def reply(request: ModelRequest) -> ModelResponse:
        answer = replies[_replies_so_far(request)]
        assert isinstance(answer, ModelResponse)
        return answer

    limits.setdefault("retry_backoff_s", 0)
    limits.setdefault("max_iterations", 50)
    model = ScriptedModel(reply)
    helper = Agent(name="helper", model=model, tools=[work, pay], description="helps")
    return Agent(name="root", model=model, tools=[work, pay], sub_agents=[helper], limits=Limits(**limits))


def make_agent(script: Sequence[Any], **limits: Any) -> Agent:
    limits.setdefault("retry_backoff_s", 0)
    limits.setdefault("max_iterations", 50)
    return Agent(name="durable", model=by_turn(script), tools=[work, pay], limits=Limits(**limits))


def steps_script(steps: int, calls: int = 1, seconds: float = 0.0) -> list[Any]:
    """``steps`` tool-use replies of ``calls`` parallel ``work`` calls each (fixed ids), then a text."""
    script: list[Any] = [
        [ToolCall(id=f"s{s}c{c}", name="work", args={"label": f"s{s}c{c}", "seconds": seconds}) for c in range(calls)]
        for s in range(steps)
    ]
    script.append("all done")
    return script
