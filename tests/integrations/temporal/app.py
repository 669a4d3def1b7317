"""Agents for the Temporal tests, importable by worker subprocesses (``module:agent``).

Every execution of a tool is appended to the file ``LOOPWRIGHT_TEST_LOG`` names (one line,
flushed), so a test counts the executions of a worker it kills; ``LOOPWRIGHT_TEST_GATE`` names
a folder where ``work`` calls labelled ``hold-*`` announce themselves and wait for a ``go`` file
(the test kills the worker while one waits)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from loopwright import Agent, Limits, RunContext, ToolCall, tool
from loopwright.workflows import ParallelAgent, SequentialAgent
from tests.store_app import by_turn


def _record(label: str, ctx: RunContext) -> None:
    path = os.environ.get("LOOPWRIGHT_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{label}\t{ctx.idempotency_key}\n")
            f.flush()


@tool
async def work(label: str, ctx: RunContext) -> str:
    """Do one piece of work (recorded when it starts); a ``hold-*`` label waits for the gate."""
    _record(label, ctx)
    gate = os.environ.get("LOOPWRIGHT_TEST_GATE")
    if gate and label.startswith("hold"):
        folder = Path(gate)
        (folder / f"at-{label}").write_text(str(os.getpid()))
        while not (folder / "go").exists():  # noqa: ASYNC110 (a file another process writes: nothing to await)
            await asyncio.sleep(0.02)
    return f"did {label}"


@tool(requires_confirmation=lambda args: args["amount"] > 100)
async def pay(amount: int, ctx: RunContext) -> str:
    """Pay an amount (over 100 needs approval)."""
    _record(f"pay {amount}", ctx)
    return f"paid {amount}"


LIMITS = Limits(retry_backoff_s=0, max_iterations=20)


def calls(*labels: str) -> list[Any]:
    """One ``work`` call a reply, labelled in turn, then a text."""
    script: list[Any] = [[ToolCall(id=f"c{i}", name="work", args={"label": label})] for i, label in enumerate(labels)]
    script.append("all done")
    return script


def three(name: str = "three", *labels: str) -> Agent:
    """Three tool calls, one a turn, then a text."""
    return Agent(name=name, model=by_turn(calls(*(labels or ("a", "b", "c")))), tools=[work], limits=LIMITS)


def payer() -> Agent:
    """One payment that needs approval, then a text."""
    script: list[Any] = [[ToolCall(id="p1", name="pay", args={"amount": 500})], "paid"]
    return Agent(name="payer", model=by_turn(script), tools=[pay], limits=LIMITS)


def _leaf(name: str, label: str) -> Agent:
    return Agent(name=name, model=by_turn(calls(label)), tools=[work], limits=LIMITS, description=name)


def pipeline() -> SequentialAgent:
    """first (a call), then two branches in parallel (a call each), then last (a call)."""
    branches = ParallelAgent("branches", [_leaf("left", "left"), _leaf("right", "hold-right")])
    return SequentialAgent("pipeline", [_leaf("first", "first"), branches, _leaf("last", "last")])


killable = three("killable", "first", "hold-second", "third")
"""``module:agent`` for the kill test's worker: its second call waits for the gate."""
pipeline_agent = pipeline()
"""``module:agent`` for the workflow agent's kill test: the right branch waits for the gate."""
plain = three("plain")
"""``module:agent`` for the CLI test: three calls, then a text."""


def mixed_agent() -> Agent:
    """One reply of three calls at once, two instant and one that waits for the gate, then a text."""
    labels = ("quick-a", "quick-b", "hold-c")
    script: list[Any] = [
        [ToolCall(id=f"m-{label}", name="work", args={"label": label}) for label in labels],
        "all done",
    ]
    return Agent(name="mixed", model=by_turn(script), tools=[work], limits=LIMITS)


mixed = mixed_agent()
"""``module:agent`` for the kill test inside one stage: killed while ``hold-c`` waits, the quick calls done."""


def looped() -> Any:
    """Three rounds of one leaf (a call and a text each), the tree allowed two tool calls in all."""
    from loopwright.workflows import LoopAgent

    leaf = Agent(name="rounder", model=by_turn(calls("round")), tools=[work], limits=LIMITS)
    return LoopAgent("looped", body=[leaf], max_iterations=3, limits=Limits(max_tool_calls=2, retry_backoff_s=0))


def mapped() -> Any:
    """One leaf per item (a call and a text each), one at a time, the tree allowed two tool calls in all."""
    from loopwright.workflows import MapAgent

    leaf = Agent(name="itemer", model=by_turn(calls("item")), tools=[work], limits=LIMITS)
    return MapAgent("mapped", leaf, over="items", concurrency=1, limits=Limits(max_tool_calls=2, retry_backoff_s=0))


def timing_out() -> Agent:
    """The payer, whose approvals stay open for half a second."""
    return payer().replace(limits=LIMITS.model_copy(update={"wait_timeout_s": 0.5}))


def _trace_to_file(path: str) -> None:
    """Every span this process's runs make, one JSON line each in ``path`` (name, ids, parent)."""
    import json
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    import loopwright.integrations.otel

    class ToFile(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with open(path, "a") as f:
                for s in spans:
                    parent = s.parent.span_id if s.parent is not None else None
                    f.write(json.dumps({"name": s.name, "id": s.context.span_id, "parent": parent, "pid": os.getpid()}))
                    f.write("\n")
                f.flush()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ToFile()))
    loopwright.integrations.otel.instrument(tracer_provider=provider)


if os.environ.get("LOOPWRIGHT_TEST_SPANS"):  # a worker whose runs are traced (the kill test of spans)
    _trace_to_file(os.environ["LOOPWRIGHT_TEST_SPANS"])
