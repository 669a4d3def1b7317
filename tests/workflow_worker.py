"""A worker process for the workflow kill -9 test: ``python -m tests.workflow_worker STORE RUN_ID
LOG [approve]`` runs (or, if the store holds it, resumes) a sequence whose middle step is a
parallel of two branches; the ``pay`` branch waits for a confirmation, then calls ``crash``,
which kills this process with SIGKILL the first time (with ``LOOPWRIGHT_CRASH_IN=summary``,
step 3 calls it instead). Each tool run appends a line to LOG.
Prints the outcome."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, approve, tool
from loopwright.durable.checkpoint import rebuild
from loopwright.stores import open_store
from loopwright.workflows import ParallelAgent, SequentialAgent

LOG = Path(os.environ.get("LOOPWRIGHT_TEST_LOG", "executions.log"))


def _ran(name: str) -> None:
    with LOG.open("a") as f:
        f.write(f"{name}\n")


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    _ran(f"lookup {topic}")
    return f"facts on {topic}"


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    _ran(f"refund {order}")
    return f"refunded {order}"


@tool
def crash() -> str:
    """Record the refund (the first time, the worker dies here: kill -9)."""
    _ran("crash")
    marker = LOG.with_suffix(".crashed")
    if not marker.exists():
        marker.write_text("once")
        os.kill(os.getpid(), signal.SIGKILL)
    return "recorded"


def _agent(name: str, calls: list[ToolCall], answer: str, tools: list[Any]) -> Agent:
    """An agent that makes ``calls`` one per pass (by how many results its history holds), then answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages for p in m.parts if p.type == "tool_result")
        if done < len(calls):
            return ModelResponse(parts=(calls[done],), stop_reason="tool_use")
        return ModelResponse(parts=(TextPart(text=answer),), stop_reason="end_turn")

    return Agent(name=name, model=ScriptedModel(reply), tools=tools)


def make_workflow() -> SequentialAgent:
    research = _agent("research", [ToolCall(name="lookup", args={"topic": "refunds"})], "researched", [lookup])
    notes = _agent("notes", [ToolCall(name="lookup", args={"topic": "notes"})], "noted", [lookup])
    in_branch = os.environ.get("LOOPWRIGHT_CRASH_IN", "pay") == "pay"  # else in step 3, the summary
    crashing = [ToolCall(name="crash", args={})]
    pay = _agent("pay", [ToolCall(name="refund", args={"order": "A1"}), *crashing[:in_branch]], "paid", [refund, crash])
    summary = _agent(
        "summary",
        [ToolCall(name="lookup", args={"topic": "summary"}), *crashing[in_branch:]],
        "all done",
        [lookup, crash],
    )
    return SequentialAgent("desk", steps=[research, ParallelAgent("work", branches=[notes, pay]), summary])


async def main(url: str, run_id: str, decide: bool) -> str:
    store = await open_store(url)
    runner = Runner(make_workflow(), store=store)
    saved = await store.load(run_id)
    if saved is None:
        result = await runner.run("refund order A1", run_id=run_id)
    elif decide:  # approve what the workflow's children wait for
        waiting = rebuild(saved).features["workflow"].pending
        result = await runner.resume(run_id, {p.call_id: approve() for p in waiting})
    else:
        result = await runner.resume(run_id)
    await store.close()
    return f"{result.outcome} {result.output!r}"


if __name__ == "__main__":
    print(asyncio.run(main(sys.argv[1], sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == "approve")), flush=True)
