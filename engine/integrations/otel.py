"""OpenTelemetry traces of loopwright runs, following the GenAI semantic conventions.

One line turns it on for every runner of the process, on the global tracer provider::

    import loopwright.otel
    loopwright.otel.instrument()

or per runner: ``Runner(agent, observers=[loopwright.otel.Tracing()])``. Needs the ``otel`` extra
(``pip install 'loopwright[otel]'``, the OpenTelemetry API only); the app brings its SDK and
exporter (Jaeger, Tempo, Honeycomb, Datadog, Logfire...). A run becomes::

    invoke_agent dispatcher                 (INTERNAL; the run; child of the caller's current span)
    ├── chat claude-sonnet-4-5              (CLIENT; one per model call, a retry is another one;
    │                                        current while the model is called: its client's spans nest)
    ├── execute_tool transfer_to_agent      (INTERNAL; one per tool call)
    ├── invoke_agent billing                (a transfer: the target's turn, a child agent span)
    │   ├── chat ...
    │   └── execute_tool refund             (current while the tool runs: its own spans nest here)
    └── ...

Transitions are span events (``loopwright.transition``, with from, to, guard and iteration) on
the active agent's span; limits, suspensions and resumptions are span events too.

Waits: a run that waits (for an approval, a credential, a long-running result) is traced in
legs, one ``invoke_agent`` root span per leg. A resumed leg links to every earlier leg of the run
(span links with ``loopwright.run.id``, for runs resumed through the same observer; a leg resumed
elsewhere carries ``loopwright.run.id`` and ``loopwright.resumed``). An ``execute_tool`` span means
the tool ran: a call that waits for approval gets an ``await_confirmation <tool>`` span instead
(``loopwright.tool.executed=false``) and its ``execute_tool`` span in the leg that runs it; a call
answered without running (denied, timed out, a long-running tool's result supplied) is a
``loopwright.tool.not_run`` event. A tool that ran and then waits (a credential, a long-running
result) keeps its ``execute_tool`` span, with ``loopwright.wait.kind``. Message
contents (model input and output, tool arguments and results) are off by default; turn them on
with ``capture_content=True`` (or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``):
they go through ``redact`` first (:func:`redact_secrets` unless you pass your own).

Cost: a run that no tracer records (no tracer provider set, or sampled out) costs one
non-recording span at its start and nothing per iteration (the observer returns no per-run
watcher, so no event is even built).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer, TracerProvider
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwright.otel needs the OpenTelemetry API: pip install 'loopwright[otel]' (or opentelemetry-api)"
    ) from exc

from ..data.events import Message, ModelResponse, TextPart, ThoughtPart, ToolCall, ToolResult
from ..runtime.observers import INSTRUMENTS

_NO_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_UNKNOWN = object()
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
REDACTED = "[REDACTED]"
WAITING_RUNS = 10_000
"""Waiting runs whose earlier legs an observer remembers for the links of their resumed legs."""
Redactor = Callable[[Any], Any]

_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|api[_-]?key|authorization|credential|cookie", re.I)
_SECRET_TEXT = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{12,}"),  # API keys (Anthropic, OpenAI, Stripe...)
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),  # JWTs
    re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),  # e-mail addresses
]


def redact_secrets(value: Any) -> Any:
    """The default redactor: values under keys that name a secret (password, token, api_key,
    authorization...) and text that looks like a key, a bearer token, a JWT or an e-mail address
    become ``[REDACTED]``. Walks dicts, lists and strings; returns a redacted copy."""
    if isinstance(value, str):
        for pattern in _SECRET_TEXT:
            value = pattern.sub(REDACTED, value)
        return value
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else redact_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(v) for v in value]
    return value


class Tracing:
    """The OpenTelemetry observer: for each run a tracer records, a :class:`RunTrace` that turns
    its events into spans. ``tracer_provider`` defaults to the global one (looked up when a
    run starts, so a provider set after ``instrument()`` is used). ``transition_events=False``
    leaves out the span event of each transition (about half of what tracing costs a run)."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | None = None,
        redact: Redactor | None = redact_secrets,
        transition_events: bool = True,
    ) -> None:
        if capture_content is None:
            capture_content = os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")
        self.tracer: Tracer = trace.get_tracer("loopwright", _version(), tracer_provider=tracer_provider)
        self.on_global = tracer_provider is None
        self.transition_events = transition_events
        self.capture_content = capture_content
        self.redact: Redactor = redact or (lambda value: value)
        self.waiting: dict[str, tuple[SpanContext, ...]] = {}
        """Run id -> the root spans of the legs of a run that waits (suspended or paused)."""

    def on_start(self, run: Any) -> RunTrace | None:
        if self.on_global and _no_global_provider():
            return None  # the cheap check: no tracer provider is set at all
        root = run.runner.agent
        rs = run.state
        earlier = self.waiting.pop(rs.run_id, ()) if self.waiting else ()
        links = [Link(leg, {"loopwright.run.id": rs.run_id, "loopwright.link": "resumed_from"}) for leg in earlier]
        span = self.tracer.start_span(f"invoke_agent {root.name}", kind=SpanKind.INTERNAL, links=links)
        if not span.is_recording():
            return None  # no provider, or sampled out: the run is not watched at all
        span.set_attributes(_agent_attributes(root, rs.run_id))
        if len(rs.trace) > 1:  # a leg of a run that went past its start: resumed after a wait or a pause
            span.set_attribute("loopwright.resumed", True)
        return RunTrace(self, run, span, earlier)

    def wait(self, run_id: str, legs: tuple[SpanContext, ...]) -> None:
        """Remember the legs of a run that now waits, for its resumed leg's links."""
        if len(self.waiting) >= WAITING_RUNS:  # runs never resumed here: forget the oldest
            del self.waiting[next(iter(self.waiting))]
        self.waiting[run_id] = legs


class RunTrace:
    """One run's spans, built from its events as they are emitted (a per-run observer)."""

    def __init__(self, tracing: Tracing, run: Any, root: Span, earlier: tuple[SpanContext, ...] = ()) -> None:
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
        self.waited: dict[str, str] = _pending(run.state) if len(run.state.trace) > 1 else {}
        """Calls that waited (call id -> the kind of wait): answered unrun, they get no span."""
        if run.state.active_agent != self.tree.root.name:
            self._enter_agent(run.state.active_agent, time.time())

    # ------------------------------------------------------------ the observer hooks

    def on_event(self, event: Any) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def on_finish(self, result: Any) -> None:
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
        end = time.time_ns()
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
        return self.tracer.start_span(name, parent, kind=kind, attributes=attributes, start_time=_ns(at))

    def _enter_agent(self, name: str, at: float) -> None:
        """A transfer to ``name``: close the turns of agents that are not its ancestors, then
        open its span as a child of the nearest open ancestor (or come back to it)."""
        ancestors = set()
        parent = self.tree.parent(name)
        while parent is not None:
            ancestors.add(parent.name)
            parent = self.tree.parent(parent.name)
        while len(self.agents) > 1 and self.agents[-1][0] != name and self.agents[-1][0] not in ancestors:
            self.agents.pop()[1].end(_ns(at))
        if self.agents[-1][0] == name:
            return
        agent = self.tree.agents[name]
        span = self._child(
            f"invoke_agent {name}", SpanKind.INTERNAL, at, _agent_attributes(agent, self.run.state.run_id)
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
            timestamp=_ns(event.time),
        )

    def _model_requested(self, event: Any) -> None:
        model = self.tree.agents[event.agent].model
        name = _model_name(model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider(model),
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
            attributes["gen_ai.input.messages"] = self._json([_message(m) for m in request.messages])
        if self.chat is not None:  # a call that never answered
            self.chat.end(_ns(event.time))
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
            output = {"role": "assistant", "parts": _parts(response.parts)}
            if response.stop_reason:
                output["finish_reason"] = response.stop_reason
            span.set_attribute("gen_ai.output.messages", self._json([output]))
        span.end(_ns(event.time))

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
        span.end(_ns(event.time))

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
        if span is None and event.call_id in self.waited:  # denied, timed out, or its result supplied
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
        span.end(_ns(event.time))

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
        self._agent_span.add_event("loopwright.tool.not_run", attributes, timestamp=_ns(event.time))

    def _transferred(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.transfer",
            {"loopwright.transfer.from": event.from_agent, "loopwright.transfer.to": event.to_agent},
            timestamp=_ns(event.time),
        )
        self._enter_agent(event.to_agent, event.time)

    def _limit(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.limit_reached",
            {
                "loopwright.limit": event.limit,
                "loopwright.limit.value": event.value,
                "loopwright.limit.used": event.used,
            },
            timestamp=_ns(event.time),
        )

    def _suspended(self, event: Any) -> None:
        end = _ns(event.time)
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
            timestamp=_ns(event.time),
        )

    def _resumed(self, event: Any) -> None:
        self._agent_span.add_event(
            "loopwright.resumed",
            {"loopwright.decided": list(event.decided), "loopwright.timed_out": event.timed_out},
            timestamp=_ns(event.time),
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
    "limit_reached": RunTrace._limit,
    "suspended": RunTrace._suspended,
    "resumed": RunTrace._resumed,
}


def _pending(rs: Any) -> dict[str, str]:
    """The calls a run waits for (call id -> kind), from every feature slice that says."""
    waits: dict[str, str] = {}
    for part in rs.features.values():
        requests = getattr(part, "pending_requests", None)
        if requests is not None:
            waits.update((request.call_id, request.kind) for request in requests())
    return waits


def _no_global_provider() -> bool:
    """No global tracer provider is set (or the no-op one is). Reads the API's global directly:
    ``get_tracer_provider()`` looks at the environment on every call, a few microseconds a run."""
    provider = vars(trace).get("_TRACER_PROVIDER", _UNKNOWN)
    if provider is _UNKNOWN or (provider is None and _PROVIDER_FROM_ENV):  # ask the documented way
        return isinstance(trace.get_tracer_provider(), _NO_PROVIDER)
    return provider is None or isinstance(provider, trace.NoOpTracerProvider)


def _version() -> str | None:
    try:
        return importlib.metadata.version("loopwright")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return None


def _ns(at: float) -> int:
    return int(at * 1e9)


def _agent_attributes(agent: Any, run_id: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.provider.name": _provider(agent.model),
        "loopwright.run.id": run_id,
    }
    if agent.description:
        attributes["gen_ai.agent.description"] = agent.description
    model = _model_name(agent.model)
    if model:
        attributes["gen_ai.request.model"] = model
    return attributes


def _provider(model: Any) -> str:
    """``gen_ai.provider.name``: a model's own ``provider`` attribute, "anthropic" for
    AnthropicModel, else ``loopwright.<class name>`` (ScriptedModel and your own)."""
    given = getattr(model, "provider", None)
    if isinstance(given, str):
        return given
    kind = type(model).__name__
    return "anthropic" if kind == "AnthropicModel" else f"loopwright.{kind}"


def _model_name(model: Any) -> str:
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _parts(parts: Any) -> list[dict[str, Any]]:
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


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": _parts(message.parts)}


# ------------------------------------------------------------ turning it on for every runner

_installed: list[Tracing] = []


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool | None = None,
    redact: Redactor | None = redact_secrets,
    transition_events: bool = True,
) -> Tracing:
    """Trace every run of every runner of this process (the global tracer provider unless
    ``tracer_provider`` is given). Calling it again replaces the earlier settings. Returns the
    observer (``uninstrument()`` removes it)."""
    uninstrument()
    tracing = Tracing(
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        redact=redact,
        transition_events=transition_events,
    )
    INSTRUMENTS.add(tracing)
    _installed.append(tracing)
    return tracing


def uninstrument() -> None:
    """Stop tracing the runs of every runner (what :func:`instrument` turned on)."""
    while _installed:
        INSTRUMENTS.remove(_installed.pop())


__all__ = ["CONTENT_ENV", "REDACTED", "RunTrace", "Tracing", "instrument", "redact_secrets", "uninstrument"]
