"""One run's spans: :class:`RunTrace` turns a run's events into OpenTelemetry spans as they
are emitted (the per-run observer :class:`~loopwright.integrations.otel.Tracing` starts)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, Tracer

from ...data.events import ModelResponse, ToolCall
from .genai import (
    agent_attributes,
    current_model,
    genai_message,
    genai_parts,
    model_attributes,
    model_name,
    ns,
    pending_calls,
    provider_name,
)
from .redact import Redactor


class TraceSettings(Protocol):
    """What a :class:`RunTrace` reads of the observer that started it (a ``Tracing``)."""

    tracer: Tracer
    capture_content: bool
    transition_events: bool
    redact: Redactor

    def wait(self, run_id: str, legs: tuple[SpanContext, ...]) -> None: ...


class RunTrace:
    """One run's spans, built from its events as they are emitted (a per-run observer)."""

    def __init__(
        self,
        tracing: TraceSettings,
        run: Any,
        root: Span,
        earlier: tuple[SpanContext, ...] = (),
        at: float | None = None,
    ) -> None:
        self.tracing = tracing
        self.earlier = earlier
        self.tracer = tracing.tracer
        self.content = tracing.capture_content
        self.transitions = tracing.transition_events
        self.redact = tracing.redact
        self.run = run
        self.tree = run.runner.tree
        self.root = root
        self.agents: list[tuple[str, Span]] = [(self.tree.root.name, root)]
        self.chat: Span | None = None
        self.tools: dict[str, Span] = {}
        self.usage = [0, 0]  # input (with cache), output tokens of the whole run
        self.waited: dict[str, str] = pending_calls(run.state) if len(run.state.trace) > 1 else {}
        """Calls that waited (call id -> the kind of wait): answered unrun, they get no span."""
        self.ran: set[str] = set()
        """Calls that waited and ran, in a leg traced after the fact (``Tracing.trace_leg``: no
        ``tool_scope`` was entered here): answered, they get their ``execute_tool`` span."""
        if run.state.active_agent != self.tree.root.name:
            self._enter_agent(run.state.active_agent, time.time() if at is None else at)

    # ------------------------------------------------------------ the observer hooks

    def on_event(self, event: Any) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def on_finish(self, result: Any) -> None:
        self.finish(result)

    def finish(self, result: Any, at: float | None = None) -> None:
        """End the run's spans (its leg's) at ``at`` (seconds; default now), its result on the root."""
        root = self.root
        if result.outcome in ("suspended", "paused"):
            self.tracing.wait(result.run_id, (*self.earlier, root.get_span_context()))
        root.set_attribute("loopwright.outcome", result.outcome)
        root.set_attribute("loopwright.iterations", result.iterations)
        root.set_attribute("loopwright.tool_calls", result.tool_calls)
        root.set_attribute("gen_ai.usage.input_tokens", self.usage[0])
        root.set_attribute("gen_ai.usage.output_tokens", self.usage[1])
        if result.limit:
            root.set_attribute("loopwright.limit", result.limit)
        if result.outcome == "failed":
            kind = result.error.kind if result.error else "failed"
            root.set_attribute("error.type", kind)
            root.set_status(Status(StatusCode.ERROR, result.error.message if result.error else "the run failed"))
        end = time.time_ns() if at is None else ns(at)
        for span in (*self.tools.values(), *([self.chat] if self.chat else [])):
            span.end(end)
        self.tools.clear()
        self.chat = None
        for _name, span in reversed(self.agents):
            span.end(end)
        self.agents = []

    def tool_scope(self, call: ToolCall) -> AbstractContextManager[Any]:
        """Make the call's ``execute_tool`` span current while the tool runs."""
        span = self.tools.get(call.id)
        if span is None:  # a call approved on resume: called in an earlier leg of the run
            rs = self.run.state
            span = self._open_tool(call.id, call.name, call.args, rs.active_agent, time.time())
        return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def model_scope(self, request: Any) -> AbstractContextManager[Any]:
        """Make the current ``chat`` span current while the model is called (its client's spans)."""
        span = self.chat
        if span is None:
            return nullcontext()
        return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    # ------------------------------------------------------------ events into spans

    @property
    def _agent_span(self) -> Span:
        return self.agents[-1][1] if self.agents else self.root

    def _child(self, name: str, kind: SpanKind, at: float, attributes: dict[str, Any]) -> Span:
        parent = trace.set_span_in_context(self._agent_span)
        return self.tracer.start_span(name, parent, kind=kind, attributes=attributes, start_time=ns(at))

    def _enter_agent(self, name: str, at: float) -> None:
        """A transfer to ``name``: close the turns of agents that are not its ancestors, then
        open its span as a child of the nearest open ancestor (or come back to it)."""
        ancestors = set()
        parent = self.tree.parent(name)
        while parent is not None:
            ancestors.add(parent.name)
            parent = self.tree.parent(parent.name)
        while len(self.agents) > 1 and self.agents[-1][0] != name and self.agents[-1][0] not in ancestors:
            self.agents.pop()[1].end(ns(at))
        if self.agents[-1][0] == name:
            return
        agent = self.tree.agents[name]
        span = self._child(
            f"invoke_agent {name}",
            SpanKind.INTERNAL,
            at,
            agent_attributes(agent, self.run.state.run_id, self.run.state.fallbacks),
        )
        self.agents.append((name, span))

    def _transition(self, event: Any) -> None:
        if not self.transitions:
            return
        self._agent_span.add_event(
            "loopwright.transition",
            {
                "loopwright.transition.from": event.source,
                "loopwright.transition.to": event.state,
                "loopwright.transition.guard": event.guard or "",
                "loopwright.iteration": event.iteration,
            },
            timestamp=ns(event.time),
        )

    def _model_requested(self, event: Any) -> None:
        model = current_model(self.tree.agents[event.agent], self.run.state.fallbacks)  # (after a switch: the fallback)
        name = model_name(model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(model),
            "gen_ai.agent.name": event.agent,
            "loopwright.attempt": event.attempt,
            "loopwright.iteration": event.iteration,
        }
        if name:
            attributes["gen_ai.request.model"] = name
        request = self.run.state.request
        if request is not None:
            settings = request.settings
            for key in ("max_tokens", "temperature", "top_p", "top_k"):
                if isinstance(settings.get(key), int | float):
                    attributes[f"gen_ai.request.{key}"] = settings[key]
        if self.content and request is not None:
            attributes["gen_ai.system_instructions"] = self._json(
                [{"type": "text", "content": i.text} for i in request.instructions]
            )
            attributes["gen_ai.input.messages"] = self._json([genai_message(m) for m in request.messages])
        if self.chat is not None:  # a call that never answered
            self.chat.end(ns(event.time))
        self.chat = self._child(f"chat {name}".rstrip(), SpanKind.CLIENT, event.time, attributes)

    def _model_responded(self, event: Any) -> None:
        span, self.chat = self.chat, None
        if span is None:
            return
        response: ModelResponse = event.response
        usage = response.usage
        given = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
        self.usage[0] += given
        self.usage[1] += usage.output_tokens
        span.set_attribute("gen_ai.usage.input_tokens", given)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if usage.cache_read_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
        if usage.cache_creation_tokens:
            span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_tokens)
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.stop_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
        if self.content:
            output = {"role": "assistant", "parts": genai_parts(response.parts)}
            if response.stop_reason:
                output["finish_reason"] = response.stop_reason
            span.set_attribute("gen_ai.output.messages", self._json([output]))
        span.end(ns(event.time))

    def _error(self, event: Any) -> None:
        error = event.error
        span = self.chat
        if span is None:
            self._agent_span.add_event(
                "loopwright.error", {"error.type": error.kind, "loopwright.error.message": error.message}
            )
            return
        self.chat = None
        span.set_attribute("error.type", str(error.status) if error.status else f"{error.kind}_error")
        span.set_attribute("loopwright.retryable", error.retryable)
        span.set_status(Status(StatusCode.ERROR, error.message))
        span.end(ns(event.time))

    def _tool_called(self, event: Any) -> None:
        self._open_tool(event.call_id, event.name, event.args, event.agent, event.time)

    def _open_tool(self, call_id: str, name: str, args: Any, agent: str, at: float) -> Span:
        tool = self.tree.agents[agent].tools.get(name) if agent in self.tree.agents else None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": agent,
        }
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        if self.content and args is not None:
            attributes["gen_ai.tool.call.arguments"] = self._json(args)
        span = self.tools[call_id] = self._child(f"execute_tool {name}", SpanKind.INTERNAL, at, attributes)
        return span

    def _tool_answered(self, event: Any) -> None:
        span = self.tools.pop(event.call_id, None)
        if span is None and event.call_id in self.waited and event.call_id not in self.ran:  # denied, timed out...
            self._not_run(event, self.waited.pop(event.call_id))
            return
        if span is None:  # answered without a call seen in this leg: its span covers its duration
            span = self._open_tool(event.call_id, event.name, None, event.agent, event.time - event.duration_s)
            del self.tools[event.call_id]
        if self.content:
            span.set_attribute("gen_ai.tool.call.result", self._json(event.content))
        if event.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, str(event.content)[:300]))
        span.end(ns(event.time))

    def _not_run(self, event: Any, kind: str) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id,
            "loopwright.wait.kind": kind,
        }
        if event.is_error:
            attributes["error.type"] = "tool_error"
        if self.content:
            attributes["gen_ai.tool.call.result"] = self._json(event.content)
        self._agent_span.add_event("loopwright.tool.not_run", attributes, timestamp=ns(event.time))

    def _transferred(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.transfer",
            {"loopwright.transfer.from": event.from_agent, "loopwright.transfer.to": event.to_agent},
            timestamp=ns(event.time),
        )
        self._enter_agent(event.to_agent, event.time)

    def _switched(self, event: Any) -> None:
        """The fallback row: the agent's span names the model it is on from here on."""
        model = current_model(self.tree.agents[event.agent], self.run.state.fallbacks)
        for name, span in self.agents:
            if name == event.agent:
                span.set_attributes(model_attributes(model))
        self._agent_span.add_event(
            "loopwright.model_switched",
            {
                "loopwright.model.from": event.from_model,
                "loopwright.model.to": event.to_model,
                "error.type": event.error.kind,
            },
            timestamp=ns(event.time),
        )

    def _limit(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.limit_reached",
            {
                "loopwright.limit": event.limit,
                "loopwright.limit.value": event.value,
                "loopwright.limit.used": event.used,
            },
            timestamp=ns(event.time),
        )

    def _suspended(self, event: Any) -> None:
        end = ns(event.time)
        for request in event.pending:
            self.waited[request.call_id] = request.kind
            span = self.tools.pop(request.call_id, None)
            if span is None:
                continue
            span.set_attribute("loopwright.wait.kind", request.kind)
            ran = request.kind != "confirmation"  # a credential or a result is asked for by the running tool
            span.set_attribute("loopwright.tool.executed", ran)
            if not ran:  # not an execute_tool span: the tool runs (if approved) in the leg that resumes
                span.update_name(f"await_confirmation {request.tool}")
                span.set_attribute("gen_ai.operation.name", "await_confirmation")
            span.end(end)
        self._agent_span.add_event(
            "loopwright.suspended",
            {"loopwright.pending": [f"{p.kind}:{p.tool}:{p.call_id}" for p in event.pending]},
            timestamp=ns(event.time),
        )

    def _resumed(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.resumed",
            {"loopwright.decided": list(event.decided), "loopwright.timed_out": event.timed_out},
            timestamp=ns(event.time),
        )

    def _json(self, value: Any) -> str:
        return json.dumps(self.redact(value), default=str, ensure_ascii=False)


_HANDLERS: dict[str, Callable[[RunTrace, Any], None]] = {
    "state_entered": RunTrace._transition,
    "model_requested": RunTrace._model_requested,
    "model_responded": RunTrace._model_responded,
    "error_occurred": RunTrace._error,
    "tool_called": RunTrace._tool_called,
    "tool_answered": RunTrace._tool_answered,
    "transferred": RunTrace._transferred,
    "model_switched": RunTrace._switched,
    "limit_reached": RunTrace._limit,
    "suspended": RunTrace._suspended,
    "resumed": RunTrace._resumed,
}
