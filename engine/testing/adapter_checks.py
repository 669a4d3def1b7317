"""The adapter conformance kit's checks (:mod:`.adapter_kit` describes each): one coroutine per
check, run against an :class:`~loopwright.testing.adapter_harness.AdapterHarness` (through the
real :class:`~loopwright.Runner` where a run is involved), :data:`CHECKS` by name, and
:func:`check_adapter`, which runs them all.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from ..data.errors import ContextWindowError, ModelError
from ..data.events import (
    Message,
    ModelRequest,
    ModelResponded,
    ModelResponse,
    ProviderPart,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from ..data.limits import Limits
from ..loop.runner import Runner
from ..models.base import Model, StreamDelta
from ..runtime.agent import Agent
from ..runtime.tools import tool
from .adapter_harness import QUIRKS, AdapterHarness, Call, Failure, NotApplicable, Reply

# ------------------------------------------------------------------ the agent the checks run


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _agent(model: Model, **limits: Any) -> Agent:
    return Agent(
        name="kit",
        model=model,
        instruction="Answer briefly.",
        tools=[lookup],
        limits=Limits(**{"max_model_retries": 0, "retry_backoff_s": 0, **limits}),
    )


def _request(history: Sequence[Message] | None = None) -> ModelRequest:
    spec = ToolSpec(
        name="lookup",
        description="Look something up.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    messages = list(history) if history is not None else [Message(role="user", parts=(TextPart(text="Find x."),))]
    return ModelRequest(messages=messages, tools=(spec,))


def _fail(h: AdapterHarness, check: str, what: str) -> AssertionError:
    return AssertionError(f"{h.name} fails {check}: {what}")


def _calls(result_messages: Sequence[Message]) -> list[ToolCall]:
    return [p for m in result_messages for p in m.parts if isinstance(p, ToolCall)]


def _results(result_messages: Sequence[Message]) -> list[ToolResult]:
    return [p for m in result_messages for p in m.parts if isinstance(p, ToolResult)]


# ------------------------------------------------------------------ the checks


async def check_tool_round_trip(h: AdapterHarness) -> None:
    """A tool call runs with its arguments and its result goes back under the call's id."""
    h.clear()
    h.script(Reply(text="Looking.", calls=(Call("call_kit_1", "lookup", {"q": "x"}),)), Reply(text="It is x."))
    result = await Runner(_agent(h.make_model())).run("Find x.")
    if result.outcome != "final" or result.output != "It is x.":
        raise _fail(h, "tool_round_trip", f"the run ended {result.outcome!r} with {result.output!r} ({result.error})")
    calls = _calls(result.messages)
    if [(c.id, c.name, c.args) for c in calls] != [("call_kit_1", "lookup", {"q": "x"})]:
        raise _fail(h, "tool_round_trip", f"the reply's call came out as {calls!r}")
    bodies = h.requests()
    if len(bodies) != 2:
        raise _fail(h, "tool_round_trip", f"the server got {len(bodies)} requests, not 2")
    answered = h.answered_ids(bodies[1])
    if answered != ["call_kit_1"]:
        raise _fail(h, "tool_round_trip", f"the tool result went back under {answered!r}, not ['call_kit_1']")
    if "found x" not in json.dumps(bodies[1]):
        raise _fail(h, "tool_round_trip", "the tool's result ('found x') is not in the next request")


async def check_parallel_calls_in_order(h: AdapterHarness) -> None:
    """Three calls in one reply all run, and are answered in the order the model asked."""
    h.clear()
    calls = tuple(Call(f"call_p{n}", "lookup", {"q": q}) for n, q in enumerate("abc", 1))
    h.script(Reply(calls=calls), Reply(text="done"))
    result = await Runner(_agent(h.make_model())).run("Find a, b and c.")
    if result.outcome != "final":
        raise _fail(h, "parallel_calls_in_order", f"the run ended {result.outcome!r} ({result.error})")
    answered = h.answered_ids(h.requests()[1])
    if answered != ["call_p1", "call_p2", "call_p3"]:
        raise _fail(h, "parallel_calls_in_order", f"the results went back as {answered!r}")
    contents = [r.content for r in _results(result.messages)]
    if contents != ["found a", "found b", "found c"]:
        raise _fail(h, "parallel_calls_in_order", f"the tools answered {contents!r}")


async def check_stream_equals_complete(h: AdapterHarness, reply: Reply | None = None) -> None:
    """``stream`` yields deltas then the very reply ``complete`` gives; the deltas add up to its text."""
    h.clear()
    reply = reply or Reply(text="Streaming is the same.", calls=(Call("call_s1", "lookup", {"q": "s"}),))
    h.script(reply, reply)
    model = h.make_model()
    request = _request()
    whole = await model.complete(request)
    stream = getattr(model, "stream", None)
    if stream is None:
        raise _fail(h, "stream_equals_complete", "the adapter has no stream method (StreamingModel)")
    items = [item async for item in stream(request)]
    if not items or not isinstance(items[-1], ModelResponse):
        raise _fail(h, "stream_equals_complete", "the stream did not end with a ModelResponse")
    last: ModelResponse = items[-1]
    if any(not isinstance(i, StreamDelta) for i in items[:-1]):
        raise _fail(h, "stream_equals_complete", "the stream yielded something other than StreamDelta before its end")
    for field_name in ("parts", "usage", "stop_reason"):
        streamed, completed = getattr(last, field_name), getattr(whole, field_name)
        if streamed != completed:
            raise _fail(
                h, "stream_equals_complete", f"{field_name} differs: streamed {streamed!r}, complete {completed!r}"
            )
    shown = "".join(i.text for i in items[:-1] if isinstance(i, StreamDelta) and not i.thought)
    if shown != whole.text:
        raise _fail(h, "stream_equals_complete", f"the text deltas add up to {shown!r}, the reply says {whole.text!r}")
    expected = [(c.id, c.name, c.args) for c in reply.calls]
    if [(c.id, c.name, c.args) for c in whole.tool_calls] != expected:
        raise _fail(h, "stream_equals_complete", f"the calls came out as {whole.tool_calls!r}, not {expected!r}")
    if whole.usage != reply.usage:
        raise _fail(h, "usage_summed", f"the reply's usage came out as {whole.usage!r}, not {reply.usage!r}")


_RETRYABLE = {429: True, 500: True, 503: True, 400: False, 401: False, 403: False, 404: False}


async def _error_of(call: Awaitable[Any]) -> BaseException | None:
    try:
        await call
    except Exception as exc:
        return exc
    return None


async def check_errors_mapped(h: AdapterHarness) -> None:
    """Every error class becomes the right ModelError (see the module docstring)."""
    request = _request()
    for status, retryable in _RETRYABLE.items():
        h.clear()
        h.script(Failure(status, retry_after=2.0 if status == 429 else None))
        exc = await _error_of(h.make_model().complete(request))
        if not isinstance(exc, ModelError):
            raise _fail(h, "errors_mapped", f"a {status} raised {exc!r}, not a ModelError")
        if exc.retryable is not retryable or isinstance(exc, ContextWindowError):
            raise _fail(h, "errors_mapped", f"a {status} came out with retryable={exc.retryable}, not {retryable}")
        if exc.status != status:
            raise _fail(h, "errors_mapped", f"a {status} came out with status={exc.status}")
        if status == 429 and exc.retry_after != 2.0:
            raise _fail(h, "errors_mapped", f"a 429 with Retry-After: 2 came out with retry_after={exc.retry_after}")
    exc = await _error_of(h.make_unreachable_model().complete(request))
    if not isinstance(exc, ModelError) or not exc.retryable:
        raise _fail(h, "errors_mapped", f"a server that is down raised {exc!r}, not a retryable ModelError")
    # the run waits at least the Retry-After before its retry, then goes on
    h.clear()
    h.script(Failure(503, retry_after=0.2), Reply(text="back"))
    started = time.monotonic()
    result = await Runner(_agent(h.make_model(), max_model_retries=1)).run("Hello.")
    waited = time.monotonic() - started
    if result.outcome != "final" or result.output != "back":
        raise _fail(h, "errors_mapped", f"a 503 then a reply ended {result.outcome!r} ({result.error})")
    if waited < 0.2:
        raise _fail(h, "errors_mapped", f"the retry came {waited:.3f}s after a 503 with Retry-After: 0.2")


async def check_context_window(h: AdapterHarness) -> None:
    """The server's "the prompt is too long" is a ContextWindowError (the run takes the
    token-budget edge: compaction, salvage or outcome ``limit``, not ``failed``)."""
    h.clear()
    h.script(Failure(400, context_window=True))
    exc = await _error_of(h.make_model().complete(_request()))
    if not isinstance(exc, ContextWindowError):
        raise _fail(h, "context_window", f"a full context window raised {exc!r}, not a ContextWindowError")
    h.clear()
    h.script(Failure(400, context_window=True))
    result = await Runner(_agent(h.make_model())).run("Hello.")
    if result.outcome == "failed":
        raise _fail(h, "context_window", f"a full context window failed the run ({result.error})")


async def check_cut_reply_continued(h: AdapterHarness) -> None:
    """A reply cut by the output limit keeps its text; the run goes round and sends it back."""
    h.clear()
    h.script(Reply(text="The first half", cut=True), Reply(text=" and the rest."))
    result = await Runner(_agent(h.make_model())).run("Write it.")
    if result.outcome != "final":
        raise _fail(h, "cut_reply_continued", f"the run ended {result.outcome!r} ({result.error})")
    bodies = h.requests()
    if len(bodies) != 2:
        raise _fail(h, "cut_reply_continued", f"the server got {len(bodies)} requests, not 2: the run did not go round")
    if "The first half" not in json.dumps(bodies[1]):
        raise _fail(h, "cut_reply_continued", "the cut reply's text was not sent back")
    cut = [m for m in result.messages if m.role == "assistant" and m.text == "The first half"]
    if not cut:
        raise _fail(h, "cut_reply_continued", "the cut reply's text is not in the history")


async def check_usage_summed(h: AdapterHarness) -> None:
    """Each reply's usage (input, cached input, output) is reported; a run sums it."""
    h.clear()
    first = Reply(calls=(Call("call_u1", "lookup", {"q": "u"}),), input_tokens=100, cached_tokens=40, output_tokens=7)
    second = Reply(text="ok", input_tokens=130, cached_tokens=0, output_tokens=3)
    h.script(first, second)
    result = await Runner(_agent(h.make_model())).run("Use it.")
    if result.outcome != "final":
        raise _fail(h, "usage_summed", f"the run ended {result.outcome!r} ({result.error})")
    if result.usage != first.usage + second.usage:
        raise _fail(h, "usage_summed", f"the run's usage is {result.usage!r}, not {first.usage + second.usage!r}")


async def check_request_not_mutated(h: AdapterHarness) -> None:
    """``complete`` leaves the request as it was; the same request makes the same body twice."""
    h.clear()
    history = [
        Message(role="user", parts=(TextPart(text="Find y."),)),
        Message(
            role="assistant", parts=(TextPart(text="Looking."), ToolCall(id="call_m1", name="lookup", args={"q": "y"}))
        ),
        Message(role="user", parts=(ToolResult(call_id="call_m1", name="lookup", content="found y"),)),
    ]
    request = _request(history)
    before = request.model_dump(mode="json")
    h.script(Reply(text="y"), Reply(text="y"))
    model = h.make_model()
    await model.complete(request)
    await model.complete(request)
    if request.model_dump(mode="json") != before:
        raise _fail(h, "request_not_mutated", "complete changed the request it was given")
    first, second = h.requests()
    if first != second:
        raise _fail(h, "request_not_mutated", "the same request made two different bodies")
    if h.answered_ids(first) != ["call_m1"]:
        raise _fail(h, "request_not_mutated", f"the history's tool result went as {h.answered_ids(first)!r}")


async def check_ids_unique(h: AdapterHarness) -> None:
    """A reply that repeats a call id still gets each call run and answered once, under unique ids."""
    h.clear()
    h.script(Reply(calls=(Call("dup", "lookup", {"q": "a"}), Call("dup", "lookup", {"q": "b"}))), Reply(text="ok"))
    result = await Runner(_agent(h.make_model())).run("Find a and b.")
    if result.outcome != "final":
        raise _fail(h, "ids_unique", f"the run ended {result.outcome!r} ({result.error})")
    ids = [c.id for c in _calls(result.messages)]
    if len(ids) != 2 or len(set(ids)) != 2:
        raise _fail(h, "ids_unique", f"the calls' ids in the history are {ids!r}")
    answered = h.answered_ids(h.requests()[1])
    if answered != ids:
        raise _fail(h, "ids_unique", f"the results went back under {answered!r}, the calls are {ids!r}")


# ------------------------------------------------------------------ server quirks


def _applies(h: AdapterHarness, check: str, quirk: str) -> None:
    """Raise :class:`NotApplicable` when the harness's server cannot send ``quirk``."""
    cannot_send = getattr(h, "cannot_send", None)
    if not callable(cannot_send):
        raise NotApplicable(f"{check}: {h.name}'s harness scripts no server quirks (it has no cannot_send)")
    why = cannot_send(quirk)
    if why is not None:
        raise NotApplicable(f"{check}: {QUIRKS[quirk]} cannot occur on {h.name}: {why}")


async def _streamed_run(h: AdapterHarness, text: str, **limits: Any) -> tuple[Any, list[Any]]:
    stream = Runner(_agent(h.make_model(), **limits)).stream(text)
    events = [event async for event in stream]
    return stream.result, events


async def _two_calls_run(h: AdapterHarness, check: str, quirk: str, *, streamed: bool) -> None:
    """Two calls in one reply sent with ``quirk``: both run, each answered once, the run ends final."""
    h.clear()
    calls = (Call("call_q1", "lookup", {"q": "a"}), Call("call_q2", "lookup", {"q": "b"}))
    h.script(Reply(calls=calls, quirks=(quirk,)), Reply(text="done"))
    how = "streamed" if streamed else "whole"
    if streamed:
        result, _ = await _streamed_run(h, "Find a and b.")
    else:
        result = await Runner(_agent(h.make_model())).run("Find a and b.")
    if result.outcome != "final" or result.output != "done":
        raise _fail(h, check, f"({how}) the run ended {result.outcome!r} ({result.error})")
    contents = [r.content for r in _results(result.messages)]
    if contents != ["found a", "found b"]:
        raise _fail(h, check, f"({how}) the tools answered {contents!r}, not ['found a', 'found b']")
    ids = [c.id for c in _calls(result.messages)]
    if len(ids) != 2 or len(set(ids)) != 2 or not all(ids):
        raise _fail(h, check, f"({how}) the calls' ids in the history are {ids!r}")
    answered = h.answered_ids(h.requests()[1])
    if len(answered) != 2:
        raise _fail(h, check, f"({how}) the next request answered {answered!r}, not both calls")


async def check_calls_without_index(h: AdapterHarness) -> None:
    """Two streamed calls without an index, or both at index 0, stay two calls that both run."""
    _applies(h, "calls_without_index", "calls_without_index")
    await _two_calls_run(h, "calls_without_index", "calls_without_index", streamed=True)
    _applies(h, "calls_without_index", "calls_at_one_index")
    await _two_calls_run(h, "calls_without_index", "calls_at_one_index", streamed=True)


async def check_calls_without_ids(h: AdapterHarness) -> None:
    """Calls without an id get ids of their own (unique in the run); both run and are answered."""
    _applies(h, "calls_without_ids", "calls_without_ids")
    for streamed in (True, False):
        await _two_calls_run(h, "calls_without_ids", "calls_without_ids", streamed=streamed)


async def check_object_arguments(h: AdapterHarness) -> None:
    """Arguments given as a JSON object (not a string) are the call's arguments."""
    _applies(h, "object_arguments", "object_arguments")
    for streamed in (True, False):
        await _two_calls_run(h, "object_arguments", "object_arguments", streamed=streamed)


async def check_no_usage(h: AdapterHarness) -> None:
    """A reply without usage gets an estimate that says so (``details["usage_estimated"]``), so a
    run's ``max_total_tokens`` still counts it and fires."""
    _applies(h, "no_usage", "no_usage")
    h.clear()
    h.script(Reply(text="An answer without usage.", quirks=("no_usage",)))
    result, events = await _streamed_run(h, "Hello.")
    replies = [e.response for e in events if isinstance(e, ModelResponded)]
    if result.outcome != "final" or not replies:
        raise _fail(h, "no_usage", f"the run ended {result.outcome!r} ({result.error})")
    usage = replies[0].usage
    if not usage.input_tokens or not usage.output_tokens or replies[0].details.get("usage_estimated") is not True:
        raise _fail(h, "no_usage", f"a reply without usage came out with {usage!r}, {replies[0].details!r}")
    h.clear()
    looping = Reply(calls=(Call("call_n1", "lookup", {"q": "n"}),), quirks=("no_usage",))
    h.script(looping, Reply(calls=(Call("call_n2", "lookup", {"q": "m"}),), quirks=("no_usage",)),
             Reply(text="never", quirks=("no_usage",)))  # fmt: skip
    result, _ = await _streamed_run(h, "Hello.", max_total_tokens=2 * usage.input_tokens, salvage=False)
    if result.limit != "max_total_tokens":
        raise _fail(h, "no_usage", f"max_total_tokens did not fire on estimated usage: {result.outcome!r}")


async def check_reasoning_returned(h: AdapterHarness) -> None:
    """Reasoning sent with a tool call comes back on the next request (a server that requires
    it refuses the request otherwise), and the tool loop completes."""
    _applies(h, "reasoning_required", "reasoning_required")
    h.clear()
    first = Reply(calls=(Call("call_r1", "lookup", {"q": "r"}),), reasoning="I should look r up.",
                  quirks=("reasoning_required",))  # fmt: skip
    h.script(first, Reply(text="It is r.", quirks=("reasoning_required",)))
    result = await Runner(_agent(h.make_model())).run("Find r.")
    if result.outcome != "final" or result.output != "It is r.":
        raise _fail(h, "reasoning_returned", f"the run ended {result.outcome!r} ({result.error})")
    returned = h.returned_reasoning(h.requests()[1])  # type: ignore[attr-defined]
    if returned != ["I should look r up."]:
        raise _fail(h, "reasoning_returned", f"the next request carried back {returned!r}")


FOREIGN = "kit-foreign-signature"
"""The marker of what another provider (or another model) left in the history: never sent."""


async def check_foreign_thought_signatures(h: AdapterHarness) -> None:
    """A tool turn another provider made replays on this one without its signatures and reasoning."""
    h.clear()
    signature = base64.b64encode(FOREIGN.encode()).decode()
    made_elsewhere = (
        ProviderPart(provider="gemini", kind="thought_signature", block={"signature": signature, "model": "gemini-0"}),
        ProviderPart(provider="elsewhere", kind="reasoning", block={"type": "reasoning", "encrypted_content": FOREIGN}),
        ToolCall(id="call_f1", name="lookup", args={"q": "f"}),
    )
    history = [
        Message(role="user", parts=(TextPart(text="Find f."),)),
        Message(role="assistant", parts=made_elsewhere),
        Message(role="user", parts=(ToolResult(call_id="call_f1", name="lookup", content="found f"),)),
    ]
    spec = ToolSpec(name="lookup", description="Look something up.", input_schema={"type": "object"})
    h.script(Reply(text="It is f."))
    model = h.make_model()
    try:
        response = await model.complete(ModelRequest(messages=history, tools=(spec,)))
    except ModelError as exc:
        raise AssertionError(f"{h.name} fails foreign_thought_signatures: the server refused it: {exc}") from None
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
    (body,) = h.requests()
    sent = json.dumps(body, default=str)
    if FOREIGN in sent or signature in sent or signature.rstrip("=") in sent:
        raise AssertionError(
            f"{h.name} fails foreign_thought_signatures: another model's signature or reasoning was sent"
        )
    if h.answered_ids(body) != ["call_f1"] or response.text != "It is f.":
        raise AssertionError(f"{h.name} fails foreign_thought_signatures: the call went as {h.answered_ids(body)!r}")


CHECKS: dict[str, Callable[[AdapterHarness], Coroutine[Any, Any, None]]] = {
    "tool_round_trip": check_tool_round_trip,
    "parallel_calls_in_order": check_parallel_calls_in_order,
    "stream_equals_complete": check_stream_equals_complete,
    "errors_mapped": check_errors_mapped,
    "context_window": check_context_window,
    "cut_reply_continued": check_cut_reply_continued,
    "usage_summed": check_usage_summed,
    "request_not_mutated": check_request_not_mutated,
    "ids_unique": check_ids_unique,
    "foreign_thought_signatures": check_foreign_thought_signatures,
    "calls_without_index": check_calls_without_index,
    "calls_without_ids": check_calls_without_ids,
    "object_arguments": check_object_arguments,
    "no_usage": check_no_usage,
    "reasoning_returned": check_reasoning_returned,
}
"""Every check, by name, in the order :func:`check_adapter` runs them."""


async def check_adapter(harness: AdapterHarness, *, skip: Sequence[str] = ()) -> dict[str, str]:
    """Run every check (but those named in ``skip``); raise one AssertionError listing each
    that failed. Returns the checks that did not apply (a quirk the harness's API cannot send),
    each with why."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValueError(f"no such check(s) {unknown}; the checks are {', '.join(CHECKS)}")
    failures: list[str] = []
    not_applicable: dict[str, str] = {}
    for name, check in CHECKS.items():
        if name in skip:
            continue
        try:
            await check(harness)
        except AssertionError as exc:
            failures.append(str(exc))
        except NotApplicable as exc:
            not_applicable[name] = str(exc)
    if failures:
        raise AssertionError("\n".join(failures))
    return not_applicable
