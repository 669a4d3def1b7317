"""OpenTelemetry: a run becomes GenAI-convention spans (agent, chat, execute_tool, transfers),
tools' own spans nest, contents are opt-in and redacted, untraced runs cost nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import loopwright.integrations.otel
from loopwright import Agent, ModelError, ModelResponse, Runner, TextPart, ToolCall, Usage, tool
from loopwright.data.events import EventBase
from loopwright.integrations.otel import Tracing, redact_secrets
from loopwright.models.scripted import ScriptedModel


def reply(parts: Any, stop: str = "tool_use", model: str = "claude-test-1") -> ModelResponse:
    usage = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=30, requests=1)
    parts = (TextPart(text=parts),) if isinstance(parts, str) else tuple(parts)
    return ModelResponse(parts=parts, usage=usage, stop_reason=stop, model=model)  # type: ignore[arg-type]


def hand(to: str, task: str) -> list[ToolCall]:
    return [ToolCall(id=f"t-{to}", name="transfer_to_agent", args={"agent_name": to, "task": task})]


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def helpdesk() -> Agent:
    """dispatcher -> billing (a tool call, then back) -> dispatcher answers; the dispatcher's
    first model call fails once and is retried."""
    billing = Agent(
        name="billing",
        description="charges and refunds",
        tools=[refund],
        model=ScriptedModel(
            [reply([ToolCall(id="c-refund", name="refund", args={"order": "A1"})]), reply(hand("dispatcher", "ok"))],
            name="claude-billing",
        ),
    )
    return Agent(
        name="dispatcher",
        description="routes requests",
        sub_agents=[billing],
        model=ScriptedModel(
            [
                ModelError("overloaded", status=529, retryable=True),
                reply(hand("billing", "refund A1")),
                reply("Refunded A1.", stop="end_turn"),
            ],
            name="claude-dispatcher",
        ),
    )


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """(depth, name) of every span, depth-first in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in by_parent.get(parent, []):
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


@pytest.mark.slow
def test_a_multi_agent_run_with_tools_and_a_retry_becomes_genai_spans(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    result = Runner(helpdesk(), observers=[Tracing(tracer_provider=provider)]).run_sync("refund order A1")
    assert result.outcome == "final" and result.output == "Refunded A1."
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        (0, "invoke_agent dispatcher"),
        (1, "chat claude-dispatcher"),  # the failed attempt
        (1, "chat claude-dispatcher"),  # its retry
        (1, "execute_tool transfer_to_agent"),
        (1, "invoke_agent billing"),  # the transfer: a child agent span
        (2, "chat claude-billing"),
        (2, "execute_tool refund"),
        (2, "chat claude-billing"),
        (2, "execute_tool transfer_to_agent"),
        (1, "chat claude-dispatcher"),
    ]
    assert len({s.context.trace_id for s in spans}) == 1

    run = one(spans, "invoke_agent dispatcher")
    assert run.kind is SpanKind.INTERNAL
    assert run.attributes is not None and {
        k: run.attributes[k]
        for k in ("gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.agent.description", "gen_ai.request.model")
    } == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "dispatcher",
        "gen_ai.agent.description": "routes requests",
        "gen_ai.request.model": "claude-dispatcher",
    }
    assert run.attributes["loopwright.run.id"] == result.run_id and run.attributes["loopwright.outcome"] == "final"
    assert run.attributes["gen_ai.usage.input_tokens"] == 4 * 130  # four answered calls, cache reads included
    assert run.attributes["gen_ai.usage.output_tokens"] == 4 * 20

    failed, retried, last = sorted(
        (s for s in spans if s.name == "chat claude-dispatcher"), key=lambda s: s.start_time or 0
    )
    for chat in (failed, retried, last):
        assert chat.kind is SpanKind.CLIENT and chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "claude-dispatcher"
        assert chat.attributes["gen_ai.provider.name"] == "loopwright.ScriptedModel"
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes is not None
    assert failed.attributes["error.type"] == "529" and failed.attributes["loopwright.attempt"] == 1
    assert "gen_ai.usage.input_tokens" not in failed.attributes
    assert retried.attributes is not None and retried.attributes["loopwright.attempt"] == 2
    assert retried.status.status_code is StatusCode.UNSET
    assert retried.attributes["gen_ai.usage.input_tokens"] == 130  # input + cache reads
    assert retried.attributes["gen_ai.usage.output_tokens"] == 20
    assert retried.attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    assert retried.attributes["gen_ai.response.model"] == "claude-test-1"
    assert retried.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert last.attributes is not None and last.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)

    call = one(spans, "execute_tool refund")
    assert call.kind is SpanKind.INTERNAL and call.attributes is not None
    assert dict(call.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "refund",
        "gen_ai.tool.call.id": "c-refund",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Refund an order.",
        "gen_ai.agent.name": "billing",
    }
    billing = one(spans, "invoke_agent billing")
    assert call.parent is not None and call.parent.span_id == billing.context.span_id
    assert billing.attributes is not None and billing.attributes["gen_ai.agent.name"] == "billing"

    # transitions are span events (from, to, guard) on the active agent's span
    moves = [
        (e.attributes["loopwright.transition.from"], e.attributes["loopwright.transition.to"],
         e.attributes["loopwright.transition.guard"])
        for e in run.events if e.name == "loopwright.transition" and e.attributes is not None
    ]  # fmt: skip
    assert moves[:3] == [
        ("start", "preprocess", "else"),
        ("preprocess", "reason", "else"),
        ("reason", "reason", "has_retryable_model_error & retries_left"),
    ]
    assert moves[-1] == ("decide", "done", "is_final_response")
    assert [e.name for e in billing.events].count("loopwright.transition") >= 6
    transfers = [e.attributes for e in (*run.events, *billing.events) if e.name == "loopwright.transfer"]
    assert [(a["loopwright.transfer.from"], a["loopwright.transfer.to"]) for a in transfers if a] == [
        ("dispatcher", "billing"),
        ("billing", "dispatcher"),
    ]
    # every span ends within its parent
    by_id = {s.context.span_id: s for s in spans}
    for s in spans:
        if s.parent is not None:
            parent = by_id[s.parent.span_id]
            assert parent.start_time <= s.start_time <= s.end_time <= parent.end_time, s.name  # type: ignore[operator]


class PriceServer:
    """A real HTTP server on loopback that records the traceparent header of each request."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("traceparent")))
                body = json.dumps({"item": self.path.strip("/"), "price": 5}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_a_tools_own_http_spans_nest_under_its_execute_tool_span(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    tracer = provider.get_tracer("shop-app")
    server = PriceServer()

    @tool
    async def price(item: str) -> Any:
        """Price of an item, from the price service."""
        with tracer.start_as_current_span(f"GET /{item}", kind=SpanKind.CLIENT):
            headers: dict[str, str] = {}
            propagate.inject(headers)  # the app's HTTP instrumentation does this for every request
            request = urllib.request.Request(f"{server.url}/{item}", headers=headers)
            await asyncio.sleep(0.01)  # both calls are in flight at once
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(request, timeout=5).read())
        return json.loads(body)

    calls = [ToolCall(id="c-apple", name="price", args={"item": "apple"}),
             ToolCall(id="c-pear", name="price", args={"item": "pear"})]  # fmt: skip
    agent = Agent(name="shop", tools=[price], model=ScriptedModel([reply(calls), reply("5 each", stop="end_turn")]))
    try:
        with tracer.start_as_current_span("POST /ask") as request_span:  # the app's own request
            result = Runner(agent, observers=[Tracing(tracer_provider=provider)]).run_sync("prices?")
    finally:
        server.close()
    assert result.outcome == "final", result.error
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent shop")
    assert run.parent is not None and run.parent.span_id == request_span.get_span_context().span_id
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name == "execute_tool price" and s.attributes}
    assert set(tools) == {"c-apple", "c-pear"}
    for item, call_id in (("apple", "c-apple"), ("pear", "c-pear")):
        http = one(spans, f"GET /{item}")
        assert http.parent is not None and http.parent.span_id == tools[call_id].context.span_id
        assert tools[call_id].parent is not None and tools[call_id].parent.span_id == run.context.span_id
        # and the trace crossed the wire: the server saw the tool's span as its parent
        traceparent = dict(server.seen)[f"/{item}"]
        assert traceparent is not None
        assert traceparent.startswith(f"00-{http.context.trace_id:032x}-{http.context.span_id:016x}-")
    # the context stays inside the calls: the next model call is the agent's child, not a tool's
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert all(c.parent is not None and c.parent.span_id == run.context.span_id for c in chats)


def test_contents_are_off_by_default_and_redacted_when_on(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported

    @tool
    def charge(order: str, api_key: str) -> str:
        """Charge an order again."""
        return f"charged {order}"

    def agent() -> Agent:
        call = ToolCall(id="c1", name="charge", args={"order": "A1", "api_key": "k-123"})
        return Agent(
            name="billing",
            instruction="You refund orders.",
            tools=[charge],
            model=ScriptedModel([reply([call]), reply("done, mail ann@example.com", stop="end_turn")]),
        )

    text = "refund A1, my key is sk-ant-0123456789abcdef"
    Runner(agent(), observers=[Tracing(tracer_provider=provider)]).run_sync(text)
    for span in exporter.get_finished_spans():
        assert span.attributes is not None
        assert not [k for k in span.attributes if "messages" in k or "arguments" in k or "result" in k or "instr" in k]
    exporter.clear()

    Runner(agent(), observers=[Tracing(tracer_provider=provider, capture_content=True)]).run_sync(text)
    spans = exporter.get_finished_spans()
    first = min((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert first.attributes is not None
    messages = json.loads(str(first.attributes["gen_ai.input.messages"]))
    assert messages == [{"role": "user", "parts": [{"type": "text", "content": "refund A1, my key is [REDACTED]"}]}]
    assert json.loads(str(first.attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You refund orders."}
    ]
    assert json.loads(str(first.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "charge",
                    "arguments": {"order": "A1", "api_key": "[REDACTED]"},
                }
            ],
            "finish_reason": "tool_use",
        }
    ]
    call = one(spans, "execute_tool charge")
    assert call.attributes is not None
    assert json.loads(str(call.attributes["gen_ai.tool.call.arguments"])) == {"order": "A1", "api_key": "[REDACTED]"}
    assert json.loads(str(call.attributes["gen_ai.tool.call.result"])) == "charged A1"
    last = max((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert "[REDACTED]" in str(last.attributes["gen_ai.output.messages"]) and "ann@" not in str(last.attributes)  # type: ignore[index]


def test_redact_secrets_walks_values() -> None:
    assert redact_secrets({"Authorization": "x", "n": [1, "Bearer abc.def"], "ok": "plain"}) == {
        "Authorization": "[REDACTED]",
        "n": [1, "[REDACTED]"],
        "ok": "plain",
    }


@pytest.mark.slow
def test_a_run_no_tracer_records_builds_no_event(exported: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """No tracer provider (the API's default): instrument() adds no per-run watcher, so the run
    records its events compactly and builds none (the zero-cost path)."""
    loopwright.integrations.otel.instrument()  # the global provider: none is set in this process
    try:
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        runner = Runner(helpdesk())

        async def go() -> tuple[str, list[int], bool]:
            run = runner.start("refund A1")
            outcome = (await run.run_to_end()).outcome
            built = [i for i, e in enumerate(run.ctx.log.entries) if isinstance(e, EventBase)]
            return outcome, built, run.ctx.watchers == () and run.ctx.tool_scopes == ()

        outcome, built, unwatched = asyncio.run(go())
        assert outcome == "final"
        assert built == [] and unwatched  # no event object built, no watcher, no tool scope
    finally:
        loopwright.integrations.otel.uninstrument()


@pytest.mark.slow
def test_instrument_traces_every_runner_once_a_provider_is_set() -> None:
    """One line; the global provider may be set after it (a fresh interpreter owns the global)."""
    code = """
import loopwright.integrations.otel
from loopwright import Agent, Runner, ScriptedModel
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

loopwright.integrations.otel.instrument()
Runner(Agent(name="early", model=ScriptedModel(["hi"]))).run_sync("x")   # no provider yet: no span
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
Runner(Agent(name="late", model=ScriptedModel(["hi"]))).run_sync("x")
loopwright.integrations.otel.instrument()   # again: replaces, does not double
Runner(Agent(name="again", model=ScriptedModel(["hi"]))).run_sync("x")
loopwright.integrations.otel.uninstrument()
Runner(Agent(name="off", model=ScriptedModel(["hi"]))).run_sync("x")
print(sorted(s.name for s in exporter.get_finished_spans()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(["chat scripted", "chat scripted", "invoke_agent again", "invoke_agent late"])


def test_a_suspended_run_ends_its_spans_and_the_resume_traces_the_approved_call(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    from loopwright import approve

    provider, exporter = exported

    @tool(requires_confirmation=True)
    def wire(amount: int) -> str:
        """Wire money."""
        with provider.get_tracer("bank-app").start_as_current_span("POST /wires"):
            return f"wired {amount}"

    agent = Agent(
        name="bank",
        tools=[wire],
        model=ScriptedModel(
            [reply([ToolCall(id="c-wire", name="wire", args={"amount": 5})]), reply("sent", "end_turn")]
        ),
    )
    runner = Runner(agent, observers=[Tracing(tracer_provider=provider)])
    paused = runner.run_sync("wire 5")
    assert paused.outcome == "suspended"
    first = exporter.get_finished_spans()
    run = one(first, "invoke_agent bank")
    assert run.attributes is not None and run.attributes["loopwright.outcome"] == "suspended"
    assert "loopwright.suspended" in [e.name for e in run.events]
    done = runner.resume_sync(paused, {"c-wire": approve()})
    assert done.outcome == "final"
    spans = exporter.get_finished_spans()[len(first) :]
    resumed = one(spans, "invoke_agent bank")
    assert "loopwright.resumed" in [e.name for e in resumed.events]
    call = one(spans, "execute_tool wire")
    assert call.parent is not None and call.parent.span_id == resumed.context.span_id
    assert call.attributes is not None and call.attributes["gen_ai.tool.call.id"] == "c-wire"
    post = one(spans, "POST /wires")  # the approved call's own span nests under it, in the resumed leg
    assert post.parent is not None and post.parent.span_id == call.context.span_id


@pytest.mark.slow
def test_a_sampled_out_run_is_not_watched() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = Runner(helpdesk(), observers=[Tracing(tracer_provider=provider)])

    async def go() -> tuple[str, bool]:
        run = runner.start("refund A1")
        outcome = (await run.run_to_end()).outcome
        return outcome, run.ctx.watchers == () and run.ctx.tool_scopes == ()

    assert asyncio.run(go()) == ("final", True)
    assert exporter.get_finished_spans() == ()


@pytest.mark.slow
def test_transition_events_can_be_left_out(exported: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = exported
    Runner(helpdesk(), observers=[Tracing(tracer_provider=provider, transition_events=False)]).run_sync("A1")
    spans = exporter.get_finished_spans()
    assert len(spans) == 10
    names = {e.name for s in spans for e in s.events}
    assert "loopwright.transition" not in names and "loopwright.transfer" in names


@pytest.mark.slow
def test_a_model_clients_own_spans_nest_under_its_chat_span(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    tracer = provider.get_tracer("model-client")

    class ClientModel:
        """A model whose client makes its own span per request (as an instrumented HTTP client does)."""

        model = "claude-client"

        def __init__(self) -> None:
            self.replies = [ModelError("overloaded", status=529, retryable=True), reply("hi", stop="end_turn")]

        async def complete(self, request: Any) -> ModelResponse:
            with tracer.start_as_current_span("POST /v1/messages", kind=SpanKind.CLIENT):
                await asyncio.sleep(0)
                answer = self.replies.pop(0)
                if isinstance(answer, Exception):
                    raise answer
                return answer

    agent = Agent(name="talker", model=ClientModel())
    assert Runner(agent, observers=[Tracing(tracer_provider=provider)]).run_sync("hello").outcome == "final"
    spans = exporter.get_finished_spans()
    assert [name for _, name in tree(spans)] == [
        "invoke_agent talker", "chat claude-client", "POST /v1/messages", "chat claude-client", "POST /v1/messages",
    ]  # fmt: skip
    assert [depth for depth, _ in tree(spans)] == [0, 1, 2, 1, 2]
    assert one(spans, "invoke_agent talker").attributes["gen_ai.provider.name"] == "loopwright.ClientModel"  # type: ignore[index]
