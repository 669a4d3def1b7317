"""What a run's spans say, in the OpenTelemetry GenAI semantic conventions' shapes: the agent's
attributes, messages and their parts, the calls a waiting run waits for. Plain data: no
OpenTelemetry here (:mod:`loopwright.integrations.otel` puts them on spans)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...data.events import Message, TextPart, ThoughtPart, ToolCall, ToolResult


def pending_calls(rs: Any) -> dict[str, str]:
    """The calls a run waits for (call id -> kind), from every feature slice that says."""
    waits: dict[str, str] = {}
    for part in rs.features.values():
        requests = getattr(part, "pending_requests", None)
        if requests is not None:
            waits.update((request.call_id, request.kind) for request in requests())
    return waits


def ns(at: float) -> int:
    return int(at * 1e9)


def agent_attributes(agent: Any, run_id: str, fallbacks: Mapping[str, int] | None = None) -> dict[str, Any]:
    """An ``invoke_agent`` span's attributes; its model is the one the agent is on (its own, or
    the fallback ``fallbacks`` says the run moved it to: ``RunState.fallbacks``)."""
    model = current_model(agent, fallbacks)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "loopwright.run.id": run_id,
    }
    if agent.description:
        attributes["gen_ai.agent.description"] = agent.description
    attributes.update(model_attributes(model))
    return attributes


def current_model(agent: Any, fallbacks: Mapping[str, int] | None) -> Any:
    """The model ``agent`` calls now: after the fallback row, the fallback model it is on."""
    n = fallbacks.get(agent.name, 0) if fallbacks else 0
    if not n:
        return agent.model
    models = getattr(agent, "models", ())
    return models[n] if n < len(models) else agent.model


def model_attributes(model: Any) -> dict[str, Any]:
    """``gen_ai.provider.name`` and (when the model has a name) ``gen_ai.request.model``."""
    attributes: dict[str, Any] = {"gen_ai.provider.name": provider_name(model)}
    name = model_name(model)
    if name:
        attributes["gen_ai.request.model"] = name
    return attributes


def provider_name(model: Any) -> str:
    """``gen_ai.provider.name``: a model's own ``provider`` attribute, "anthropic" for
    AnthropicModel, else ``loopwright.<class name>`` (ScriptedModel and your own)."""
    given = getattr(model, "provider", None)
    if isinstance(given, str):
        return given
    kind = type(model).__name__
    return "anthropic" if kind == "AnthropicModel" else f"loopwright.{kind}"


def model_name(model: Any) -> str:
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return ""


def genai_parts(parts: Any) -> list[dict[str, Any]]:
    """Content parts in the GenAI conventions' message shape."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "content": part.text})
        elif isinstance(part, ThoughtPart):
            out.append({"type": "reasoning", "content": part.text})
        elif isinstance(part, ToolCall):
            out.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.args})
        elif isinstance(part, ToolResult):
            out.append({"type": "tool_call_response", "id": part.call_id, "response": part.content})
    return out


def genai_message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": genai_parts(message.parts)}
