"""After the fallback row, the GenAI spans name the model that answered (name and provider), not the primary."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwright import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    Usage,
    approve,
    tool,
)
from loopwright.integrations.otel import Tracing


class Down:
    """The primary: its provider is down."""

    model = "primary-1"
    provider = "primary-co"

    async def complete(self, request: Any) -> ModelResponse:
        raise ModelError("503 from the provider", status=503, retryable=True)


class Backup:
    """The fallback: answers, naming no model in its reply (as a plain adapter may)."""

    model = "backup-1"
    provider = "backup-co"

    async def complete(self, request: Any) -> ModelResponse:
        usage = Usage(input_tokens=5, output_tokens=2, requests=1)
        return ModelResponse(parts=(TextPart(text="from the backup"),), stop_reason="end_turn", usage=usage)


def test_the_chat_and_agent_spans_name_the_fallback_that_answered(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    agent = Agent(name="assistant", model=Down(), fallback_models=[Backup()], limits=Limits(max_model_retries=0))
    result = Runner(agent, observers=[Tracing(tracer_provider=provider)]).run_sync("hi")
    assert result.outcome == "final" and result.output == "from the backup", result.error
    spans = exporter.get_finished_spans()
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert [s.name for s in chats] == ["chat primary-1", "chat backup-1"]
    failed, answered = (dict(s.attributes or {}) for s in chats)
    assert failed["gen_ai.request.model"] == "primary-1" and failed["gen_ai.provider.name"] == "primary-co"
    assert answered["gen_ai.request.model"] == "backup-1" and answered["gen_ai.provider.name"] == "backup-co"
    assert answered["gen_ai.response.model"] == "backup-1"
    (agent_span,) = (s for s in spans if s.name == "invoke_agent assistant")
    attributes = dict(agent_span.attributes or {})
    assert attributes["gen_ai.request.model"] == "backup-1" and attributes["gen_ai.provider.name"] == "backup-co"


def test_a_resumed_leg_names_the_fallback_the_run_is_on(exported: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = exported

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    backup = ScriptedModel([[ToolCall(id="c1", name="refund", args={"order": "A1"})], "Refunded."], name="backup-2")
    agent = Agent(
        name="support", model=Down(), fallback_models=[backup], tools=[refund], limits=Limits(max_model_retries=0)
    )
    runner = Runner(agent, observers=[Tracing(tracer_provider=provider)])
    paused = runner.run_sync("refund A1")
    assert paused.outcome == "suspended", paused.error
    done = runner.resume_sync(paused, {"c1": approve()})
    assert done.outcome == "final", done.error
    roots = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "invoke_agent support"), key=lambda s: s.start_time or 0
    )
    assert [dict(s.attributes or {})["gen_ai.request.model"] for s in roots] == ["backup-2", "backup-2"]
    chats = [
        s.name
        for s in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
        if s.name.startswith("chat")
    ]
    assert chats == ["chat primary-1", "chat backup-2", "chat backup-2"]
