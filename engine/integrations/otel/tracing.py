"""OpenTelemetry traces of loopwright runs, following the GenAI semantic conventions.

One line turns it on for every runner of the process, on the global tracer provider::

    import loopwright.integrations.otel
    loopwright.integrations.otel.instrument()

or per runner: ``Runner(agent, observers=[loopwright.integrations.otel.Tracing()])``. Needs the ``otel`` extra
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
the active agent's span; limits, suspensions and resumptions are span events too. After the
fallback row (``Agent(fallback_models=...)``) the spans name the model the agent is on: the
``chat`` span of each call names the model called (``gen_ai.request.model``,
``gen_ai.provider.name``), the agent's span is updated to it, and a ``loopwright.model_switched``
span event names both models.

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
import os
from collections.abc import Collection, Sequence
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanContext, SpanKind, Tracer, TracerProvider
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwright.integrations.otel needs the OpenTelemetry API: pip install 'loopwright[otel]'"
    ) from exc

from ...runtime.observers import INSTRUMENTS
from .genai import agent_attributes, ns
from .redact import REDACTED, Redactor, redact_secrets
from .spans import RunTrace

_NO_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_UNKNOWN = object()
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
WAITING_RUNS = 10_000
"""Waiting runs whose earlier legs an observer remembers for the links of their resumed legs."""


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
        if getattr(run.runner, "legs_traced_by_engine", False):
            return None  # a durable engine's run: the engine hands each leg to trace_leg, once
        return self._begin(run)

    def _begin(self, run: Any, at: float | None = None) -> RunTrace | None:
        if self.on_global and _no_global_provider():
            return None  # the cheap check: no tracer provider is set at all
        root = run.runner.agent
        rs = run.state
        earlier = self.waiting.pop(rs.run_id, ()) if self.waiting else ()
        links = [Link(leg, {"loopwright.run.id": rs.run_id, "loopwright.link": "resumed_from"}) for leg in earlier]
        start = ns(at) if at is not None else None
        span = self.tracer.start_span(
            f"invoke_agent {root.name}", kind=SpanKind.INTERNAL, links=links, start_time=start
        )
        if not span.is_recording():
            return None  # no provider, or sampled out: the run is not watched at all
        span.set_attributes(agent_attributes(root, rs.run_id, rs.fallbacks))
        if len(rs.trace) > 1:  # a leg of a run that went past its start: resumed after a wait or a pause
            span.set_attribute("loopwright.resumed", True)
        return RunTrace(self, run, span, earlier, at)

    def trace_leg(
        self,
        run: Any,
        events: Sequence[Any],
        result: Any,
        *,
        started: float,
        ended: float,
        ran: Collection[str] = (),
    ) -> None:
        """The spans of one leg of a run a durable engine drove (a Temporal workflow), built at
        once when the leg stopped, from its recorded events: the same spans :meth:`on_start`'s
        :class:`RunTrace` builds as a run goes, with the times the events carry. ``run``: its
        runner and the run state as the leg began; ``result``: the RunResult at its stop;
        ``started``/``ended``: the leg's bounds (seconds); ``ran``: the calls that waited and ran
        in the leg (approved: their ``execute_tool`` spans). The engine calls it once per leg."""
        watcher = self._begin(run, at=started)
        if watcher is None:
            return
        watcher.ran = set(ran)
        for event in events:
            watcher.on_event(event)
        watcher.finish(result, at=ended)

    def wait(self, run_id: str, legs: tuple[SpanContext, ...]) -> None:
        """Remember the legs of a run that now waits, for its resumed leg's links."""
        if len(self.waiting) >= WAITING_RUNS:  # runs never resumed here: forget the oldest
            del self.waiting[next(iter(self.waiting))]
        self.waiting[run_id] = legs


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
