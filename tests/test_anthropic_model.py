"""AnthropicModel against a real HTTP server speaking the Messages API (tests/fake_claude.py),
through the real SDK and the real Runner: request and response mapping, streaming, thinking,
prompt caching, usage, retries and errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, Limits, Runner, RunResult, tool
from loopwright.events import ModelRequest, TextDelta, ToolAnswered

from .fake_claude import Cut, Error, FakeClaude, message, text, thinking, tool_use


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"sunny in {city}"


@pytest.fixture
def fake() -> Iterator[FakeClaude]:
    with FakeClaude() as server:
        yield server


def agent(fake: FakeClaude, *, retries: int = 0, **kw: Any) -> Agent:
    def client() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=retries)

    model = _PerLoop(client)
    limits = Limits(max_model_retries=kw.pop("max_model_retries", 0), retry_backoff_s=0)
    return Agent(
        name="claude",
        model=model,  # type: ignore[arg-type]
        static_instruction="You are terse.",
        instruction=kw.pop("instruction", "Today is {day}."),
        tools=[weather],
        limits=limits,
        **kw,
    )


class _PerLoop:
    """An AnthropicModel on a test client made, used and closed inside one call."""

    def __init__(self, make: Any) -> None:
        self.make = make

    async def complete(self, request: ModelRequest) -> Any:
        async with self.make() as client:
            return await AnthropicModel("claude-test", max_tokens=512, client=client, temperature=0.2).complete(request)

    async def stream(self, request: ModelRequest) -> Any:
        async with self.make() as client:
            model = AnthropicModel("claude-test", max_tokens=512, client=client, temperature=0.2)
            async for item in model.stream(request):
                yield item


def run(a: Agent, text_: str = "Weather in Paris?") -> RunResult:
    return Runner(a).run_sync(text_, state={"day": "Monday"})


def stream(a: Agent, text_: str = "Weather in Paris?") -> tuple[list[Any], RunResult]:
    async def go() -> tuple[list[Any], RunResult]:
        s = Runner(a).stream(text_, state={"day": "Monday"})
        events = [e async for e in s]
        return events, s.result

    return asyncio.run(go())


def test_multi_step_tool_round_trip(fake: FakeClaude) -> None:
    fake.script += [
        message(text("Let me check."), tool_use("tu_1", "weather", {"city": "Paris"}), stop_reason="tool_use"),
        message(text("It is sunny in Paris.")),
    ]
    result = run(agent(fake))
    assert result.outcome == "final" and result.output == "It is sunny in Paris."
    first, second = fake.requests
    assert first["model"] == "claude-test" and first["max_tokens"] == 512
    assert first["temperature"] == 0.2  # passed through even where the SDK does not name it
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
    answer = fake.requests[1]["messages"][-1]
    assert answer["role"] == "user"
    assert [(b["tool_use_id"], b["is_error"]) for b in answer["content"]] == [("a", False), ("b", True), ("c", True)]
    assert answer["content"][1]["content"] == "tool 'weather' raised LookupError: no such city"


def test_static_instruction_is_cached_the_dynamic_one_is_not(fake: FakeClaude) -> None:
    fake.script.append(message(text("ok"), usage={"cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}))
    result = run(agent(fake))
    assert fake.requests[0]["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Today is Monday."},
    ]
    assert (result.usage.cache_read_tokens, result.usage.cache_creation_tokens) == (100, 20)
    assert result.usage.total_tokens == 10 + 5 + 100 + 20


def test_streaming_equals_non_streaming_and_deltas_arrive(fake: FakeClaude) -> None:
    reply = message(
        thinking("Paris is in France.", "sig-abc"),
        text("It is sunny in Paris, as forecast."),
        tool_use("tu_9", "weather", {"city": "Paris"}),
        stop_reason="tool_use",
    )
    fake.script += [reply, message(text("ok")), reply, message(text("ok"))]
    plain = run(agent(fake))
    events, streamed = stream(agent(fake))
    plain_reply = next(e.response for e in plain.events if e.type == "model_response")
    streamed_reply = next(e.response for e in streamed.events if e.type == "model_response")
    assert streamed_reply == plain_reply
    assert fake.requests[2]["stream"] is True and "stream" not in fake.requests[0]
    first_reply = next(i for i, e in enumerate(events) if e.type == "model_response")
    deltas = [e for e in events[:first_reply] if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas if not d.thought) == "It is sunny in Paris, as forecast."
    assert "".join(d.text for d in deltas if d.thought) == "Paris is in France."
    assert len(deltas) > 3  # they arrived in pieces, as the server sent them


def test_thinking_blocks_round_trip_with_signatures(fake: FakeClaude) -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque=="}
    fake.script += [
        message(thinking("I should look.", "sig-1"), redacted, tool_use("t", "weather", {"city": "Rome"})),
        message(text("Sunny.")),
    ]
    result = run(agent(fake))
    assert result.output == "Sunny."
    assistant = fake.requests[1]["messages"][1]
    assert assistant["content"][:2] == [
        {"type": "thinking", "thinking": "I should look.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque=="},
    ]


def test_rate_limit_is_retried_by_the_sdk(fake: FakeClaude) -> None:
    fake.script += [Error(429, "rate_limit_error", "slow down"), message(text("after the wait"))]
    result = run(agent(fake, retries=2))
    assert result.output == "after the wait" and len(fake.requests) == 2


def test_server_errors_exhausted_fail_with_the_api_message(fake: FakeClaude) -> None:
    fake.script += [Error(500, "api_error", "internal trouble")] * 4
    result = run(agent(fake, retries=1, max_model_retries=1))
    assert result.outcome == "failed" and len(fake.requests) == 4  # (1 + 1 SDK retry) x (1 + 1 engine retry)
    assert result.error is not None and result.error.status == 500
    assert result.error.message == "Anthropic API error 500: api_error: internal trouble"
    assert result.trace.count("reason") == 2


def test_bad_request_fails_at_once(fake: FakeClaude) -> None:
    fake.script += [Error(400, "invalid_request_error", "messages: roles must alternate")]
    result = run(agent(fake, retries=3, max_model_retries=3))
    assert result.outcome == "failed" and len(fake.requests) == 1
    assert result.error is not None
    assert result.error.message == "Anthropic API error 400: invalid_request_error: messages: roles must alternate"


def test_unauthorised_says_to_set_the_key(fake: FakeClaude) -> None:
    fake.script += [Error(401, "authentication_error", "invalid x-api-key")]
    result = run(agent(fake))
    assert result.outcome == "failed" and result.error is not None
    assert result.error.message == (
        "the Anthropic API refused the credentials (401 authentication_error: invalid x-api-key); "
        "set ANTHROPIC_API_KEY to a valid key"
    )


def test_a_stream_cut_mid_message_is_a_clear_error_and_keeps_what_arrived(fake: FakeClaude) -> None:
    fake.script += [Cut(message(text("The weather in Paris is quite lovely today.")), events=5)]
    events, result = stream(agent(fake))
    assert result.outcome == "failed" and result.error is not None
    assert result.error.message.startswith("the reply stream")
    seen = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert seen and "The weather in Paris is quite lovely today.".startswith(seen)  # nothing lost
    assert [e.type for e in events][-1] == "run_finished"


def test_max_tokens_is_continued_not_truncated(fake: FakeClaude) -> None:
    fake.script += [
        message(text("The forecast for Paris is "), stop_reason="max_tokens"),
        message(text("sunny all week.")),
    ]
    result = run(agent(fake, instruction=""))
    assert result.outcome == "final" and result.output == "The forecast for Paris is sunny all week."
    last = fake.requests[1]["messages"][-1]
    assert last == {"role": "assistant", "content": [{"type": "text", "text": "The forecast for Paris is"}]}
    note = next(e for e in result.events if e.type == "error")
    assert note.error.kind == "max_tokens"  # type: ignore[attr-defined]


def test_a_tool_call_cut_by_max_tokens_is_never_run(fake: FakeClaude) -> None:
    fake.script += [
        message(text("Checking"), tool_use("cut", "weather", {"city": "Par"}), stop_reason="max_tokens"),
        message(text(" done.")),
    ]
    result = run(agent(fake, instruction=""))
    assert not [e for e in result.events if isinstance(e, ToolAnswered)]
    assert result.output == "Checking done."


def test_missing_key_is_reported_before_any_request(fake: FakeClaude) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    env["ANTHROPIC_BASE_URL"] = fake.base_url
    code = (
        "from loopwright import Agent, AnthropicModel, Runner\n"
        "r = Runner(Agent(name='a', model=AnthropicModel('claude-test'))).run_sync('hi')\n"
        "print(r.outcome, '|', r.error.message)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.startswith("failed | ANTHROPIC_API_KEY is not set"), done.stderr
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


@pytest.mark.parametrize(
    ("stop", "outcome", "requests"),
    [("stop_sequence", "final", 1), ("refusal", "final", 1), ("pause_turn", "final", 2)],
)
def test_every_stop_reason_is_decided_on_purpose(fake: FakeClaude, stop: str, outcome: str, requests: int) -> None:
    fake.script += [message(text("Part one."), stop_reason=stop), message(text(" Part two."))]
    result = run(agent(fake, instruction=""))
    assert result.outcome == outcome and len(fake.requests) == requests
    reply = next(e.response for e in result.events if e.type == "model_response")
    assert reply.stop_reason == stop  # the loop and the app see why the model stopped
    if stop == "pause_turn":  # a paused turn is sent back for the model to continue
        assert fake.requests[1]["messages"][-1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": "Part one."}],
        }
        assert result.output == "Part one. Part two."
    else:
        assert result.output == "Part one."
