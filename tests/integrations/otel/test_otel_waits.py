"""OpenTelemetry across a wait: a call that waits for approval gets no ``execute_tool`` span (the
one that runs it on resume does), and each resumed leg links to the legs before it, by run id."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwright import Agent, ModelResponse, Pending, Runner, TextPart, ToolCall, Usage, approve, deny, tool
from loopwright.integrations.otel import Tracing
from loopwright.models.scripted import ScriptedModel


def reply(parts: Any, stop: str = "tool_use") -> ModelResponse:
    parts = (TextPart(text=parts),) if isinstance(parts, str) else tuple(parts)
    return ModelResponse(parts=parts, usage=Usage(input_tokens=10, output_tokens=5), stop_reason=stop)  # type: ignore[arg-type]


def calls(*names: str, n: int = 0) -> ModelResponse:
    return reply([ToolCall(id=f"c-{name}{n or ''}", name=name, args={"order": "A1"}) for name in names])


def named(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def legs(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The root ``invoke_agent`` span of each leg, in order."""
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent") and s.parent is None),
        key=lambda s: s.start_time or 0,
    )


def support(provider: TracerProvider, script: list[Any], **extra: Any) -> tuple[Runner, list[str]]:
    """An agent with ``refund`` (waits for approval) and ``lookup`` (plain); what ran is listed."""
    ran: list[str] = []

    @tool(requires_confirmation=True)
    def refund(order: str) -> str:
        """Refund an order."""
        with provider.get_tracer("shop").start_as_current_span("POST /refunds"):
            ran.append(f"refund {order}")
        return f"refunded {order}"

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(f"lookup {order}")
        return "paid"

    agent = Agent(name="support", tools=[refund, lookup, *extra.get("tools", [])], model=ScriptedModel(script))
    return Runner(agent, observers=[Tracing(tracer_provider=provider)]), ran


def test_a_call_waiting_for_approval_has_no_execute_tool_span_and_the_approved_run_has_one(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    runner, ran = support(provider, [calls("lookup", "refund"), reply("Refunded.", "end_turn")])
    paused = runner.run_sync("refund A1")
    assert paused.outcome == "suspended" and ran == ["lookup A1"]
    first = exporter.get_finished_spans()
    assert named(first, "execute_tool refund") == []  # it did not run: nothing for a dashboard to count
    assert len(named(first, "execute_tool lookup")) == 1  # the call that ran beside it is traced as ever
    (waited,) = named(first, "await_confirmation refund")
    attributes = dict(waited.attributes or {})
    assert attributes["loopwright.tool.executed"] is False and attributes["loopwright.wait.kind"] == "confirmation"
    assert attributes["gen_ai.operation.name"] == "await_confirmation"
    assert attributes["gen_ai.tool.call.id"] == "c-refund"

    done = runner.resume_sync(paused, {"c-refund": approve()})
    assert done.outcome == "final" and ran == ["lookup A1", "refund A1"]
    every = exporter.get_finished_spans()
    (executed,) = named(every, "execute_tool refund")  # one refund, one span, over both legs
    assert dict(executed.attributes or {}).get("loopwright.tool.executed", True) is True
    (post,) = named(every, "POST /refunds")  # the tool's own span nests under it
    assert post.parent is not None and post.parent.span_id == executed.context.span_id


def test_the_resumed_leg_links_to_the_first_by_run_id(exported: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = exported
    runner, _ = support(provider, [calls("refund"), reply("Refunded.", "end_turn")])
    paused = runner.run_sync("refund A1")
    done = runner.resume_sync(paused, {"c-refund": approve()})
    first, resumed = legs(exporter)
    assert not first.links and "loopwright.resumed" not in (first.attributes or {})  # a fresh run: neither
    (link,) = resumed.links
    assert (link.context.trace_id, link.context.span_id) == (first.context.trace_id, first.context.span_id)
    assert dict(link.attributes or {}) == {"loopwright.run.id": done.run_id, "loopwright.link": "resumed_from"}
    assert dict(first.attributes or {})["loopwright.run.id"] == dict(resumed.attributes or {})["loopwright.run.id"]
    assert dict(resumed.attributes or {})["loopwright.resumed"] is True


def test_a_run_that_waits_twice_links_each_leg_to_every_leg_before_it(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    script = [calls("refund"), calls("refund", n=2), reply("Refunded twice.", "end_turn")]
    runner, ran = support(provider, script)
    paused = runner.run_sync("refund A1 twice")
    paused = runner.resume_sync(paused, {"c-refund": approve()})
    assert paused.outcome == "suspended"
    done = runner.resume_sync(paused, {"c-refund2": approve()})
    assert done.outcome == "final" and ran == ["refund A1", "refund A1"]
    one, two, three = legs(exporter)
    assert [link.context.span_id for link in two.links] == [one.context.span_id]
    assert [link.context.span_id for link in three.links] == [one.context.span_id, two.context.span_id]
    assert len(named(exporter.get_finished_spans(), "execute_tool refund")) == 2  # it ran twice


def test_a_denied_call_never_ran_so_no_leg_has_an_execute_tool_span(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported
    runner, ran = support(provider, [calls("refund"), reply("I could not refund it.", "end_turn")])
    paused = runner.run_sync("refund A1")
    done = runner.resume_sync(paused, {"c-refund": deny("not eligible")})
    assert done.outcome == "final" and ran == []
    spans = exporter.get_finished_spans()
    assert named(spans, "execute_tool refund") == []
    _, resumed = legs(exporter)
    (answered,) = [e for e in resumed.events if e.name == "loopwright.tool.not_run"]
    attributes = dict(answered.attributes or {})
    assert attributes["gen_ai.tool.name"] == "refund" and attributes["gen_ai.tool.call.id"] == "c-refund"
    assert attributes["loopwright.wait.kind"] == "confirmation" and attributes["error.type"] == "tool_error"


def test_a_long_running_tool_runs_once_and_its_supplied_result_is_no_second_execution(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = exported

    @tool(long_running=True)
    def export(order: str) -> Pending:
        """Start an export."""
        return Pending(detail="exporting")

    runner, _ = support(provider, [calls("export"), reply("Exported.", "end_turn")], tools=[export])
    paused = runner.run_sync("export A1")
    assert paused.outcome == "suspended"
    (started,) = named(exporter.get_finished_spans(), "execute_tool export")  # it ran: it started the export
    attributes = dict(started.attributes or {})
    assert attributes["loopwright.wait.kind"] == "result" and attributes["loopwright.tool.executed"] is True
    done = runner.resume_sync(paused, {"c-export": {"rows": 3}})
    assert done.outcome == "final"
    assert len(named(exporter.get_finished_spans(), "execute_tool export")) == 1
    _, resumed = legs(exporter)
    (supplied,) = [e for e in resumed.events if e.name == "loopwright.tool.not_run"]
    assert dict(supplied.attributes or {})["loopwright.wait.kind"] == "result"


def test_a_run_resumed_from_saved_json_in_a_new_process_still_carries_its_run_id(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Across processes the first leg's span is not known here: the run id joins the legs."""
    from loopwright.data.run_state import RunState

    provider, exporter = exported
    runner, _ = support(provider, [calls("refund"), reply("Refunded.", "end_turn")])
    paused = runner.run_sync("refund A1")
    saved = paused.run_state.to_json()
    other, _ = support(provider, [reply("Refunded.", "end_turn")])  # another runner, another observer
    done = other.resume_sync(RunState.from_json(saved), {"c-refund": approve()})
    assert done.outcome == "final"
    first, resumed = legs(exporter)
    assert dict(resumed.attributes or {})["loopwright.run.id"] == dict(first.attributes or {})["loopwright.run.id"]
    assert dict(resumed.attributes or {})["loopwright.resumed"] is True
