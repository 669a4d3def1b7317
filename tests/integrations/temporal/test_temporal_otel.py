"""OpenTelemetry spans of Temporal runs: the span tree ``Runner.run`` gives, once per run, although
the workflow's code runs again on every replay (Temporal's replayer, a worker killed and replaced)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from loopwright import Runner, RunResult, approve

if not os.environ.get("CI"):
    pytest.importorskip("temporalio", reason="pip install -e '.[dev]' for the Temporal tests")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

import loopwright.integrations.otel
from loopwright.integrations.otel import Tracing
from loopwright.integrations.temporal import TemporalRunner
from tests.integrations.otel.test_otel import tree
from tests.integrations.temporal import app

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # type: ignore[attr-defined]
    yield exporter
    provider.shutdown()


def _tracing(exporter: InMemorySpanExporter) -> Tracing:
    return Tracing(tracer_provider=exporter.provider)  # type: ignore[attr-defined]


def _runner_spans(agent: Any, *inputs: Any) -> tuple[ReadableSpan, ...]:
    """The spans ``Runner.run`` gives ``agent`` (``inputs``: the text, then decisions to resume with)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = Runner(agent, observers=[Tracing(tracer_provider=provider)])
    result = runner.run_sync(inputs[0])
    for decisions in inputs[1:]:
        result = runner.resume_sync(result.run_state, decisions)
    return exporter.get_finished_spans()


def _shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each span's name and its attributes that do not depend on the run id, in start order."""
    varying = {"loopwright.run.id", "gen_ai.conversation.id"}
    return [
        (s.name, sorted((k, v) for k, v in (s.attributes or {}).items() if k not in varying))
        for s in sorted(spans, key=lambda s: s.start_time or 0)
    ]


def _transitions(spans: tuple[ReadableSpan, ...]) -> list[tuple[Any, Any]]:
    return [
        (e.attributes["loopwright.transition.from"], e.attributes["loopwright.transition.to"])
        for s in spans
        for e in s.events
        if e.name == "loopwright.transition" and e.attributes is not None
    ]


def test_a_three_call_run_gives_the_spans_runner_run_gives_once_and_a_replay_adds_none(
    temporal: str, exported: InMemorySpanExporter
) -> None:
    run_id = uuid.uuid4().hex[:12]

    async def main() -> RunResult:
        runner = TemporalRunner(app.three(), client=await Client.connect(temporal), task_queue=f"q-{run_id}")
        async with runner.worker():
            result = await runner.run("go", run_id=run_id)
            await runner.client.get_workflow_handle(run_id).result()  # (the workflow task that ended it completed)
        before = len(exported.get_finished_spans())
        await runner.replay(run_id)  # the workflow's whole code again, from the history
        assert len(exported.get_finished_spans()) == before
        return result

    loopwright.integrations.otel.instrument(tracer_provider=exported.provider)  # type: ignore[attr-defined]
    try:  # (every runner of the process, as a worker's app turns it on)
        result = asyncio.run(main())
    finally:
        loopwright.integrations.otel.uninstrument()
    spans = exported.get_finished_spans()
    reference = _runner_spans(app.three(), "go")
    assert tree(spans) == tree(reference)
    assert [name for _, name in tree(spans)] == [
        "invoke_agent three",
        *["chat scripted", "execute_tool work"] * 3,
        "chat scripted",
    ]
    assert _shape(spans) == _shape(reference)
    assert _transitions(spans) == _transitions(reference)
    (root,) = [s for s in spans if s.parent is None]
    assert root.attributes is not None and root.attributes["loopwright.run.id"] == result.run_id
    assert len({s.context.trace_id for s in spans}) == 1
    assert all(root.start_time <= s.start_time and s.end_time <= root.end_time for s in spans)  # type: ignore[operator]


def test_a_suspended_run_is_traced_in_two_legs_as_on_runner(temporal: str, exported: InMemorySpanExporter) -> None:
    run_id = uuid.uuid4().hex[:12]

    async def main() -> None:
        runner = TemporalRunner(
            app.payer(), client=await Client.connect(temporal), task_queue=f"q-{run_id}", observers=[_tracing(exported)]
        )
        async with runner.worker():
            await runner.run("pay", run_id=run_id)
            await runner.resume(run_id, {"p1": approve()})

    asyncio.run(main())
    spans = exported.get_finished_spans()
    reference = _runner_spans(app.payer(), "pay", {"p1": approve()})
    assert tree(spans) == tree(reference)
    assert _shape(spans) == _shape(reference)
    legs = [s for s in spans if s.parent is None]
    assert len(legs) == 2 and [len(s.links) for s in legs] == [0, 1]  # the resumed leg links to the first


def test_a_workflow_agent_on_temporal_gives_the_spans_runner_run_gives(
    temporal: str, exported: InMemorySpanExporter
) -> None:
    async def main() -> None:
        runner = TemporalRunner(app.pipeline(), client=await Client.connect(temporal), task_queue=f"q-{uuid.uuid4()}")
        async with runner.worker():
            await runner.run("go")

    loopwright.integrations.otel.instrument(tracer_provider=exported.provider)  # type: ignore[attr-defined]
    try:  # (the children run in the stages' activities, on runners of their own: traced as they go there)
        asyncio.run(main())
        on_temporal = tree(exported.get_finished_spans())
        exported.clear()
        Runner(app.pipeline()).run_sync("go")
    finally:
        loopwright.integrations.otel.uninstrument()
    reference = tree(exported.get_finished_spans())
    assert on_temporal == reference and len(reference) == 18
