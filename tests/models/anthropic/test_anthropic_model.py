"""AnthropicModel against a real HTTP server speaking the Messages API (tests/fake_claude.py),
through the real SDK and the real Runner: tool round trips, streaming, thinking, prompt
caching, usage and budgets, cut-short replies, retries and errors."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest
from pydantic import BaseModel

from loopwright import Agent, AnthropicModel, ConfigurationError, Limits, Runner, RunResult, tool
from loopwright.data.events import ErrorOccurred, TextDelta, ToolAnswered
from loopwright.models.anthropic.mapping import CONTINUE
from tests.fake_claude import (
    Cut,
    Error,
    FakeClaude,
    StreamError,
    cut_tool_use,
    message,
    server_tool_use,
    text,
    thinking,
    tool_use,
    web_search_result,
)


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"sunny in {city}"


def agent(fake: FakeClaude, *, retries: int = 0, base_url: str | None = None, **kw: Any) -> Agent:
    """An agent on AnthropicModel, its client pointed at the fake server (the client's own SDK
    retries: ``retries``; AnthropicModel turns them off); no prompt caching unless ``cache``."""
    client = anthropic.AsyncAnthropic(base_url=base_url or fake.base_url, api_key="test-key", max_retries=retries)
    options = {"temperature": 0.2, **kw.pop("options", {})}
    name, budget, cache = kw.pop("model", "claude-test"), kw.pop("max_tokens", 512), kw.pop("cache", None)
    model = AnthropicModel(name, max_tokens=budget, client=client, cache=cache, **options)
    limits = Limits(max_model_retries=kw.pop("max_model_retries", 0), retry_backoff_s=0, **kw.pop("limits", {}))
    return Agent(
        name="claude",
        model=model,
        static_instruction="You are terse.",
        instruction=kw.pop("instruction", "Today is {day}."),
        tools=[weather],
        limits=limits,
        **kw,
    )


def _client(a: Agent) -> Any:
    """The client the test gave the agent's model (the test closes it)."""
    model = a.model
    assert isinstance(model, AnthropicModel)
    return model._given


def run(a: Agent, text_: str = "Weather in Paris?") -> RunResult:
    """A whole run in a fresh event loop; the test's client is closed in that loop."""

    async def go() -> RunResult:
        try:
            return await Runner(a).run(text_, state={"day": "Monday"})
        finally:
            await _client(a).close()

    return asyncio.run(go())


def stream(a: Agent, text_: str = "Weather in Paris?") -> tuple[list[Any], RunResult]:
    """A streamed run: every event as ``Runner.stream`` yielded it, and the result."""

    async def go() -> tuple[list[Any], RunResult]:
        try:
            s = Runner(a).stream(text_, state={"day": "Monday"})
            events = [e async for e in s]
            return events, s.result
        finally:
            await _client(a).close()

    return asyncio.run(go())


def replies(result: RunResult) -> list[Any]:
    return [e.response for e in result.events if e.type == "model_responded"]


# ---------------------------------------------------------------- round trips


def test_multi_step_tool_round_trip(fake: FakeClaude) -> None:
    fake.script += [
        message(text("Let me check."), tool_use("tu_1", "weather", {"city": "Paris"}), stop_reason="tool_use"),
        message(text("It is sunny in Paris.")),
    ]
    result = run(agent(fake))
    assert result.outcome == "final" and result.output == "It is sunny in Paris."
    first, second = fake.requests
    assert first["model"] == "claude-test" and first["max_tokens"] == 512
    assert first["temperature"] == 0.2  # passed through although this SDK release does not name it
    assert first["stream"] is True and "tool_choice" not in first  # complete() streams too
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}]
    assert first["tools"] == [
        {"name": "weather", "description": "Weather in a city.", "input_schema": weather.spec.input_schema}
    ]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny in Paris", "is_error": False}],
        },
    ]
    assert result.usage.requests == 2 and result.usage.input_tokens == 20 and result.usage.output_tokens == 10


def test_parallel_tool_use_answered_in_one_turn_in_call_order_with_errors(fake: FakeClaude) -> None:
    fake.script += [
        message(
            tool_use("a", "weather", {"city": "Oslo"}),
            tool_use("b", "weather", {"city": "Atlantis"}),
            tool_use("c", "nope", {}),
            stop_reason="tool_use",
        ),
        message(text("Done.")),
    ]
    result = run(agent(fake))
    assert result.outcome == "final"
    sent = fake.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # one user turn answers all three
    answer = sent[-1]["content"]
    assert [(b["type"], b["tool_use_id"], b["is_error"]) for b in answer] == [
        ("tool_result", "a", False),
        ("tool_result", "b", True),
        ("tool_result", "c", True),
    ]
    assert answer[0]["content"] == "sunny in Oslo"
    assert answer[1]["content"] == "tool 'weather' raised LookupError: no such city"
    assert "nope" in answer[2]["content"]


def test_static_instruction_is_cached_the_dynamic_one_is_not(fake: FakeClaude) -> None:
    fake.script.append(message(text("ok"), usage={"cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}))
    result = run(agent(fake, cache="5m"))
    assert fake.requests[0]["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
    ]
    assert fake.requests[0]["messages"] == [  # the dynamic instruction travels after the cached prefix
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris?", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "<instructions>\nToday is Monday.\n</instructions>"},
            ],
        }
    ]
    assert (result.usage.cache_read_tokens, result.usage.cache_creation_tokens) == (100, 20)
    assert result.usage.total_tokens == 10 + 5 + 100 + 20


def test_two_static_instructions_put_the_one_cache_breakpoint_on_the_last(fake: FakeClaude) -> None:
    fake.script.append(message(text("ok")))
    run(agent(fake, instruction="Answer in French.", cache="5m"))
    assert fake.requests[0]["system"] == [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Answer in French.", "cache_control": {"type": "ephemeral"}},
    ]


def test_cache_tokens_count_toward_the_token_budget(fake: FakeClaude) -> None:
    fake.script += [
        message(
            tool_use("t", "weather", {"city": "Oslo"}), stop_reason="tool_use", usage={"cache_read_input_tokens": 90}
        ),
        message(text("never asked for")),
    ]
    result = run(agent(fake, limits={"max_total_tokens": 100, "salvage": False}))
    assert result.outcome == "limit" and result.limit == "max_total_tokens"
    assert result.usage.total_tokens == 10 + 5 + 90 and len(fake.requests) == 1


def test_a_request_larger_than_the_token_budget_left_is_never_sent(fake: FakeClaude) -> None:
    fake.script += [message(tool_use("t", "weather", {"city": "Paris"}), stop_reason="tool_use"), message(text("no"))]
    huge = "Weather in Paris? " + "and more detail " * 150_000  # about 2.4 MB
    result = run(agent(fake, limits={"max_total_tokens": 1_000}), huge)
    assert result.outcome == "limit" and result.limit == "max_total_tokens"  # salvage refused it too
    assert result.error is not None and not result.error.retryable
    assert result.error.message.startswith("the request holds about 60")
    assert "more than the 1000 left of max_total_tokens; it was not sent" in result.error.message
    assert fake.requests == []
    fake.script.clear()
    fake.script += [message(tool_use("t", "weather", {"city": "Paris"}), stop_reason="tool_use"), message(text("ok"))]
    assert run(agent(fake, limits={"max_total_tokens": 1_000})).output == "ok"  # a small one goes through


# ---------------------------------------------------------------- streaming and thinking


def test_streaming_equals_non_streaming_and_deltas_arrive(fake: FakeClaude) -> None:
    reply = message(
        thinking("Paris is in France.", "sig-abc"),
        text("It is sunny in Paris, as forecast."),
        tool_use("tu_9", "weather", {"city": "Paris", "days": [1, 2]}),
        stop_reason="tool_use",
        usage={"cache_read_input_tokens": 7, "cache_creation_input_tokens": 3},
    )
    fake.script += [reply, message(text("ok")), reply, message(text("ok"))]
    plain = run(agent(fake))
    events, streamed = stream(agent(fake))
    assert replies(streamed) == replies(plain)
    assert streamed.usage == plain.usage and streamed.messages == plain.messages
    assert fake.requests[2]["stream"] is True and fake.requests[0]["stream"] is True
    assert fake.requests[3] == fake.requests[1]  # the same history goes back
    first_reply = next(i for i, e in enumerate(events) if e.type == "model_responded")
    deltas = [e for e in events[:first_reply] if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas if not d.thought) == "It is sunny in Paris, as forecast."
    assert "".join(d.text for d in deltas if d.thought) == "Paris is in France."
    assert len(deltas) > 3  # they arrived in pieces, as the server sent them


def test_thinking_blocks_round_trip_with_signatures(fake: FakeClaude) -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque=="}
    turn = (thinking("I should look.", "sig-1"), redacted, tool_use("t", "weather", {"city": "Rome"}))
    fake.script += [message(*turn, stop_reason="tool_use"), message(text("Sunny."))] * 2
    for result in (run(agent(fake)), stream(agent(fake))[1]):
        assert result.output == "Sunny."
    for sent in (fake.requests[1], fake.requests[3]):
        assert sent["messages"][1] == {"role": "assistant", "content": list(turn)}


# ---------------------------------------------------------------- cut-short replies


def test_max_tokens_is_continued_in_a_user_turn_never_by_prefill(fake: FakeClaude) -> None:
    """Claude 4.6 and later refuse a request that ends with the assistant (the fake does too)."""
    fake.script += [
        message(text("The forecast for Paris is "), stop_reason="max_tokens"),
        message(text("sunny all week.")),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "final" and result.output == "The forecast for Paris is sunny all week."
    assert [r.stop_reason for r in replies(result)] == ["max_tokens", "end_turn"]
    first, second = fake.requests
    assert second["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": [{"type": "text", "text": "The forecast for Paris is "}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE}]},
    ]
    note = next(e for e in result.events if isinstance(e, ErrorOccurred))
    assert note.error.kind == "max_tokens" and note.error.retryable


def test_a_reply_cut_twice_keeps_every_request_a_prefix_of_the_next(fake: FakeClaude) -> None:
    fake.script += [
        message(text("One, "), stop_reason="max_tokens"),
        message(text("two, "), stop_reason="max_tokens"),
        message(text("three.")),
    ]
    result = run(agent(fake, instruction=""))
    assert result.output == "One, two, three."
    for before, after in itertools.pairwise(fake.requests):  # so the prompt cache keeps working
        assert after["messages"][: len(before["messages"]) - 1] == before["messages"][:-1]
        assert after != before
    assert [m["role"] for m in fake.requests[2]["messages"]] == ["user", "assistant", "user", "assistant", "user"]


def test_a_tool_call_cut_by_max_tokens_is_never_run(fake: FakeClaude) -> None:
    fake.script += [
        message(text("Checking"), tool_use("cut", "weather", {"city": "Par"}), stop_reason="max_tokens"),
        message(text(" done.")),
    ]
    result = run(agent(fake, instruction=""))
    assert not [e for e in result.events if isinstance(e, ToolAnswered)]
    assert result.output == "Checking done."
    assert fake.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "Checking"}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE}]},
    ]


def test_a_cut_that_left_nothing_usable_is_retried_once_with_a_bigger_budget(fake: FakeClaude) -> None:
    cut = cut_tool_use("cut", "weather", '{"city": "Par')
    fake.script += [message(cut, stop_reason="max_tokens"), message(text("Sunny in Paris."))]
    events, result = stream(agent(fake, instruction=""))
    assert result.outcome == "final" and result.output == "Sunny in Paris."
    assert not [e for e in events if isinstance(e, ToolAnswered)]
    first, second = fake.requests
    assert second == {**first, "max_tokens": 1024}  # never the same request twice
    assert result.trace.count("reason") == 1


def test_a_cut_and_retried_attempt_is_billed_to_the_step(fake: FakeClaude) -> None:
    """The API bills a cut reply's output: its usage joins the step's, so ``max_total_tokens``
    and cost see it (it was dropped: 0 of 1,536 output tokens reported)."""
    cut = cut_tool_use("cut", "weather", '{"city": "Par')
    fake.script += [
        message(cut, stop_reason="max_tokens", usage={"input_tokens": 100, "output_tokens": 512}),
        message(text("Sunny in Paris."), usage={"input_tokens": 100, "output_tokens": 1024}),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "final" and len(fake.requests) == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (200, 1536)
    (responded,) = [e for e in result.events if e.type == "model_responded"]
    assert responded.response.usage.output_tokens == 1536


TOO_LONG = "prompt is too long: 203714 tokens > 200000 maximum"


def test_a_prompt_too_long_takes_the_token_budget_edge(fake: FakeClaude) -> None:
    """The API's 400 "prompt is too long" is a full context window, not a failure: the run takes
    the token-budget edge (salvage here; it failed before)."""
    fake.script += [Error(400, "invalid_request_error", TOO_LONG), message(text("From what I have: sunny."))]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "salvaged" and result.output == "From what I have: sunny."
    assert result.trace[-3:] == ["reason", "salvage", "done"]
    assert result.limit == "max_total_tokens"


def test_a_reply_cut_by_a_full_context_window_is_kept_not_continued(fake: FakeClaude) -> None:
    """``model_context_window_exceeded``: a continuation cannot fit. The run takes the
    token-budget edge; the salvage call is refused for the same reason, and the partial answer
    is what the run salvages (it was lost: output None, outcome failed)."""
    fake.script += [
        message(text("Paris: sunny, 24 degrees, light"), stop_reason="model_context_window_exceeded"),
        Error(400, "invalid_request_error", TOO_LONG),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "salvaged" and result.output == "Paris: sunny, 24 degrees, light"
    assert len(fake.requests) == 2  # the reply, then the salvage call; no continuation
    assert "salvage" in result.trace


@pytest.mark.parametrize(
    ("model", "thinking", "says"),
    [
        ("claude-sonnet-5-5", {"type": "disabled"}, "cannot turn thinking off"),
        ("claude-opus-5-5", {"type": "enabled", "budget_tokens": 4000}, "takes no budget_tokens"),
        ("anthropic.claude-haiku-5-5-v1:0", {"type": "enabled", "budget_tokens": 4000}, "takes no budget_tokens"),
    ],
)
def test_thinking_the_model_refuses_is_refused_when_the_model_is_built(
    fake: FakeClaude, model: str, thinking: dict[str, Any], says: str
) -> None:
    """The API answers these with 400 on every call (the fake does too: first below); they are
    refused when the model is built, with what to use instead."""
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key")

    async def direct() -> None:
        async with client.messages.stream(
            model=model, max_tokens=64, thinking=thinking, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            await stream.get_final_message()

    with pytest.raises(anthropic.BadRequestError):
        asyncio.run(direct())
    with pytest.raises(ConfigurationError, match=says):
        AnthropicModel(model, client=client, thinking=thinking)
    AnthropicModel("claude-sonnet-4-5", client=client, thinking={"type": "enabled", "budget_tokens": 4000})


def test_parallel_tool_calls_false_reaches_the_api_in_tool_choice(fake: FakeClaude) -> None:
    """``disable_parallel_tool_use`` could not be expressed (``tool_choice`` is loopwright's):
    ``parallel_tool_calls=False`` merges it into the tool_choice loopwright sends."""
    fake.script += [
        message(tool_use("t1", "weather", {"city": "Paris"}), stop_reason="tool_use"),
        message(text("Sunny.")),
    ]
    result = run(agent(fake, instruction="", options={"parallel_tool_calls": False}))
    assert result.outcome == "final"
    assert fake.requests[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    with pytest.raises(ConfigurationError, match="parallel_tool_calls must be True or False"):
        AnthropicModel("claude-sonnet-5-5", parallel_tool_calls="no")  # type: ignore[arg-type]


class Forecast(BaseModel):
    city: str
    degrees: int


def test_an_output_type_is_sent_as_the_apis_json_schema_format(fake: FakeClaude) -> None:
    """Native structured output: the request carries ``output_config.format`` (the schema as the
    SDK's ``transform_schema`` shapes it); a reply that validates ends the run in one step. An id
    the facts table does not know gets the JSON-text way only."""
    fake.script += [message(text('{"city": "Paris", "degrees": 24}'))]
    with pytest.warns(UserWarning, match="does not accept temperature"):
        claude = agent(fake, instruction="", model="claude-sonnet-5-5")
    result = run(claude.replace(output_type=Forecast))
    assert result.outcome == "final" and result.output == Forecast(city="Paris", degrees=24)
    assert result.trace.count("reason") == 1
    sent = fake.requests[0]["output_config"]["format"]
    assert sent["type"] == "json_schema" and sent["schema"]["properties"].keys() == {"city", "degrees"}
    assert sent["schema"]["additionalProperties"] is False
    fake.requests.clear()
    fake.script += [message(text('{"city": "Paris", "degrees": 24}'))]
    run(agent(fake, instruction="", model="my-proxy-alias").replace(output_type=Forecast))
    assert "output_config" not in fake.requests[0]


CLEARED = {
    "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_input_tokens": 4200, "cleared_tool_uses": 3}]
}
EDITING = {"edits": [{"type": "clear_tool_uses_20250919"}]}


def test_beta_options_go_to_the_beta_endpoint_and_compaction_blocks_round_trip(fake: FakeClaude) -> None:
    """``context_management`` (and the other beta-only options) were refused by the GA endpoint;
    with them the request goes to the beta one, a streamed compaction block keeps its summary
    (the GA stream dropped its ``compaction_delta``) and goes back verbatim, and what context
    editing cleared is reported on the reply (``details["context_management"]``)."""
    summary = {"type": "compaction", "content": "Earlier: Paris asked twice.", "encrypted_content": "enc-1"}
    fake.script += [
        {
            **message(summary, text("Sunny."), usage={"input_tokens": 10, "output_tokens": 5}),
            "context_management": CLEARED,
        },
        message(text("Still sunny.")),
    ]
    claude = agent(
        fake, instruction="", options={"context_management": EDITING, "betas": ["context-management-2025-06-27"]}
    )
    result, more = asyncio.run(_twice(claude))
    assert result.outcome == "final" and result.output == "Sunny."
    assert fake.headers[0]["anthropic-beta"] == "context-management-2025-06-27"
    assert fake.requests[0]["context_management"] == EDITING
    (responded,) = [e for e in result.events if e.type == "model_responded"]
    assert responded.response.details["context_management"] == CLEARED
    (kept,) = [p for p in responded.response.parts if getattr(p, "kind", None) == "compaction"]
    assert kept.block["content"] == "Earlier: Paris asked twice." and kept.block["encrypted_content"] == "enc-1"
    assert more.output == "Still sunny."
    assert fake.requests[1]["messages"][1]["content"][0] == summary  # verbatim (0.98's stream drops encrypted_content)


async def _twice(claude: Agent) -> tuple[RunResult, RunResult]:
    """A run, then the conversation going on from it (one event loop: the test's client is bound to it)."""
    try:
        first = await Runner(claude).run("Weather in Paris?", state={"day": "Monday"})
        return first, await Runner(claude).run("And tomorrow?", after=first, state={"day": "Monday"})
    finally:
        await _client(claude).close()


def test_a_cut_inside_thinking_twice_ends_clearly(fake: FakeClaude) -> None:
    unsigned = thinking("Let me think about Paris and", "")  # cut before its signature
    fake.script += [message(unsigned, stop_reason="max_tokens")] * 3 + [message(text("never asked for"))]
    result = run(agent(fake, instruction="", limits={"max_iterations": 5}, max_model_retries=3))
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert result.error.message.startswith("the reply was cut by max_tokens=1024 before it produced anything usable")
    assert [r["max_tokens"] for r in fake.requests] == [512, 1024]  # one bigger try, then a clear end


def test_a_paused_server_tool_turn_goes_back_last_unchanged(fake: FakeClaude) -> None:
    search = server_tool_use("srv_1", "web_search", {"query": "Paris weather"})
    fake.script += [
        message(text("Searching."), search, stop_reason="pause_turn"),
        message(web_search_result("srv_1", "https://w.example/paris", "Paris"), text("Sunny, says the web.")),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "final" and result.output == "Searching.Sunny, says the web."
    assert fake.requests[1]["messages"][-1] == {"role": "assistant", "content": [text("Searching."), search]}


@pytest.mark.parametrize(
    ("stop", "requests"),
    [("end_turn", 1), ("stop_sequence", 1), ("refusal", 1), ("pause_turn", 2), ("max_tokens", 2)],
)
def test_every_stop_reason_is_decided_on_purpose(fake: FakeClaude, stop: str, requests: int) -> None:
    fake.script += [message(text("Part one."), stop_reason=stop), message(text(" Part two."))]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "final" and len(fake.requests) == requests
    assert replies(result)[0].stop_reason == stop  # the loop and the app see why the model stopped
    if stop == "pause_turn":  # the API asks for a paused turn back as it is, last
        assert fake.requests[1]["messages"][-1] == {"role": "assistant", "content": [text("Part one.")]}
    if stop == "max_tokens":  # a cut turn is continued on request, never prefilled
        assert fake.requests[1]["messages"][-1] == {"role": "user", "content": [text(CONTINUE)]}
    assert result.output == ("Part one. Part two." if requests == 2 else "Part one.")


def test_cut_short_replies_are_bounded_by_max_iterations(fake: FakeClaude) -> None:
    fake.script += [message(text(f"part {n} "), stop_reason="max_tokens") for n in range(3)]
    result = run(agent(fake, instruction="", limits={"max_iterations": 3, "salvage": False}))
    assert result.outcome == "limit" and result.limit == "max_iterations" and len(fake.requests) == 3


# ---------------------------------------------------------------- retries and errors


def test_one_retry_budget_on_the_engine_edge_honouring_retry_after(fake: FakeClaude) -> None:
    fake.script += [Error(429, "rate_limit_error", "slow down", retry_after="0.3"), message(text("after the wait"))]
    started = time.monotonic()
    result = run(agent(fake, retries=5, max_model_retries=2))  # the client's own 5 SDK retries are turned off
    assert result.output == "after the wait" and len(fake.requests) == 2
    assert time.monotonic() - started >= 0.3  # the engine's backoff is 0 here: Retry-After set the wait
    assert [h["x-stainless-retry-count"] for h in fake.headers] == ["0", "0"]  # no hidden SDK retry
    assert result.trace.count("reason") == 2  # the retry is in the trace
    error = next(e for e in result.events if isinstance(e, ErrorOccurred)).error
    assert error.status == 429 and error.retry_after == 0.3


def test_server_errors_exhausted_fail_with_the_api_message(fake: FakeClaude) -> None:
    fake.script += [Error(500, "api_error", "internal trouble")] * 4
    result = run(agent(fake, retries=1, max_model_retries=1))
    assert result.outcome == "failed" and len(fake.requests) == 2  # 1 + 1 engine retry: one budget
    assert result.error is not None and result.error.status == 500 and result.error.retryable
    assert result.error.message == "Anthropic API error 500: api_error: internal trouble [request-id req_002]"
    assert result.trace.count("reason") == 2
    events = result.events  # whether an error was retried is the table's choice: the next state shows it
    after = [next(f.state for f in events[i:] if f.type == "state_entered") for i, e in enumerate(events)
             if isinstance(e, ErrorOccurred)]  # fmt: skip
    assert after == ["reason", "failed"]


def test_overloaded_mid_stream_takes_the_retry_edge(fake: FakeClaude) -> None:
    reply = message(text("A long and careful answer."))
    fake.script += [StreamError(reply, events=4), reply]
    events, result = stream(agent(fake, retries=3, max_model_retries=1))
    assert result.outcome == "final" and result.output == "A long and careful answer."
    error = next(e for e in events if isinstance(e, ErrorOccurred))
    assert error.error.retryable and error.error.status == 529
    assert (
        error.error.message
        == "Anthropic API error 529 in the reply stream: overloaded_error: Overloaded [request-id req_001]"
    )
    assert len(fake.requests) == 2  # a 200 stream is not retried by the SDK; the reason stage retried it


def test_bad_request_fails_at_once(fake: FakeClaude) -> None:
    fake.script += [Error(400, "invalid_request_error", "messages: roles must alternate")]
    result = run(agent(fake, retries=3, max_model_retries=3))
    assert result.outcome == "failed" and len(fake.requests) == 1
    assert result.error is not None and result.error.status == 400 and not result.error.retryable
    assert result.error.message == (
        "Anthropic API error 400: invalid_request_error: messages: roles must alternate [request-id req_001]"
    )


def test_unauthorised_says_to_set_the_key(fake: FakeClaude) -> None:
    fake.script += [Error(401, "authentication_error", "invalid x-api-key")]
    result = run(agent(fake, retries=2, max_model_retries=2))
    assert result.outcome == "failed" and result.error is not None and len(fake.requests) == 1
    assert result.error.message == (
        "the Anthropic API refused the credentials (401 authentication_error: invalid x-api-key); "
        "set ANTHROPIC_API_KEY to a valid key [request-id req_001]"
    )


def test_an_unreachable_api_is_a_retryable_connection_error(fake: FakeClaude) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run(agent(fake, base_url=f"http://127.0.0.1:{port}", max_model_retries=1))
    assert result.outcome == "failed" and result.error is not None and result.error.retryable
    assert result.error.message.startswith("could not reach the Anthropic API")
    assert result.trace.count("reason") == 2


def test_a_stream_cut_mid_message_is_a_clear_error_and_keeps_what_arrived(fake: FakeClaude) -> None:
    fake.script += [Cut(message(text("The weather in Paris is quite lovely today.")), events=5)]
    events, result = stream(agent(fake))
    assert result.outcome == "failed" and result.error is not None and result.error.retryable
    assert result.error.message.startswith("the reply stream broke off: RemoteProtocolError")
    seen = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert seen == "The weather in Paris "  # all three 7-character deltas the server sent before the cut
    kinds = [e.type for e in events]
    assert kinds.index("error_occurred") > max(i for i, k in enumerate(kinds) if k == "text_delta")
    assert kinds[-1] == "run_finished"


def test_a_stream_that_ends_without_message_stop_is_an_error(fake: FakeClaude) -> None:
    fake.script += [Cut(message(text("Half an answer")), events=4, clean=True)]
    _, result = stream(agent(fake))
    assert result.outcome == "failed" and result.error is not None
    assert result.error.message.startswith("the reply stream ended before the message was complete")


_CREDENTIAL_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
)


@pytest.fixture
def no_credentials(fake: FakeClaude, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No key in the environment and no profile on disk (a fresh HOME); requests would go to the fake."""
    for name in _CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    return tmp_path


def test_missing_key_is_reported_before_any_request(fake: FakeClaude, no_credentials: Path) -> None:
    model = AnthropicModel("claude-test")  # building it (at import time, for a diagram) is fine
    result = Runner(Agent(name="a", model=model, limits=Limits(max_model_retries=3))).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert result.error.message == (
        "ANTHROPIC_API_KEY is not set (and no other Anthropic credentials were found): export "
        "ANTHROPIC_API_KEY=<your key> (and ANTHROPIC_BASE_URL for a proxy) and run again, or pass "
        "AnthropicModel(client=anthropic.AsyncAnthropic(api_key=...))"
    )
    assert fake.requests == [] and result.trace.count("reason") == 1


def test_a_configured_profile_that_cannot_load_is_reported_before_any_request(
    fake: FakeClaude, no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(no_credentials))  # the SDK then insists on a profile there
    result = Runner(Agent(name="a", model=AnthropicModel("claude-test"))).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert result.error.message.startswith("the Anthropic credentials could not be loaded: Config file not found")
    assert fake.requests == []


def test_own_clients_follow_the_event_loop(fake: FakeClaude, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.script += [message(text("one")), message(text("two"))]
    runner = Runner(Agent(name="a", model=AnthropicModel("claude-test", max_retries=0)))
    assert runner.run_sync("first").output == "one"
    assert runner.run_sync("second").output == "two"  # a new event loop, a new client


def test_demo_on_claude_against_the_fake_server(fake: FakeClaude) -> None:
    fake.script += [message(text("You can afford it."))]
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.base_url}
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "demo", "--json", "--model", "claude-test"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"outcome":"final"' in done.stdout.splitlines()[-1]
    assert fake.requests[0]["model"] == "claude-test" and fake.requests[0]["stream"] is True
