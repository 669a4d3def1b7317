"""What AnthropicModel makes of replies over real HTTP (tests/fake_claude.py): bodies that are not
a message (HTML pages, broken JSON, torn bodies) are plain, short, retryable errors; every block
the API sends is kept (server tools, their results, citations) and goes back unchanged; server
tools given as options join the agent's tools; an unknown block never ends as a silent ``""``."""

from __future__ import annotations

import pytest

from loopwright.data.events import ErrorOccurred, ProviderPart
from loopwright.data.run_state import RunState
from tests.fake_claude import (
    FakeClaude,
    Raw,
    cited_text,
    message,
    server_tool_use,
    text,
    tool_use,
    web_search_result,
)
from tests.models.anthropic.test_anthropic_model import agent, replies, run, stream

_HTML_502 = (
    "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>"
    + "<p>The upstream server sent an invalid response.</p>" * 200
    + "</body></html>"
)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Raw(502, _HTML_502), "Anthropic API error 502: the server answered with an HTML page (502 Bad Gateway)"),
        (Raw(200, _HTML_502), "the reply stream ended before the message was complete"),
        (Raw(200, '{"type": "message", "content": [', "application/json"), "the reply"),
        (Raw(200, "event: message_start\ndata: {broken\n\n", "text/event-stream"), "the reply was not a Messages API"),
        (Raw(200, "event: message_start\ndata: {}\n\n", "text/event-stream", torn=True), "the reply"),
    ],
    ids=["502-html", "200-html", "200-broken-json", "200-broken-event", "200-torn"],
)
def test_a_body_that_is_not_a_message_is_a_short_plain_retryable_error(fake: FakeClaude, reply: Raw, says: str) -> None:
    fake.script += [reply, message(text("Recovered."))]
    result = run(agent(fake, max_model_retries=1))
    assert result.outcome == "final" and result.output == "Recovered."  # retried on the engine's edge
    error = next(e for e in result.events if isinstance(e, ErrorOccurred)).error
    assert error.retryable and error.message.startswith(says), error.message
    assert len(error.message) < 400 and "<p>" not in error.message
    assert "AttributeError: 'str' object" not in error.message  # the SDK's parse of a page is not the message


def test_server_tool_blocks_and_citations_are_kept_and_go_back_unchanged(fake: FakeClaude) -> None:
    search = server_tool_use("srv_1", "web_search", {"query": "Paris weather"})
    found = web_search_result("srv_1", "https://w.example/paris", "Paris weather")
    cited = cited_text("Sunny, says the web.", "https://w.example/paris", "sunny")
    turn = (text("Let me search."), search, found, cited, tool_use("tu_1", "weather", {"city": "Paris"}))
    fake.script += [message(*turn, stop_reason="tool_use"), message(text("Sunny indeed."))] * 2
    web = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    for result in (run(agent(fake, options={"tools": [web]})), stream(agent(fake, options={"tools": [web]}))[1]):
        assert result.outcome == "final" and result.output == "Sunny indeed."
        first = replies(result)[0]
        kept = [p for p in first.parts if isinstance(p, ProviderPart)]
        assert [p.kind for p in kept] == ["server_tool_use", "web_search_tool_result"]
        assert first.details["citations"][0]["cited_text"] == "sunny"  # citations reach the result
    back = [text("Let me search."), search, found, text("Sunny, says the web."), turn[-1]]
    for sent in fake.requests[1::2]:  # every block goes back, server blocks unchanged (citations stay with us)
        assert sent["messages"][1] == {"role": "assistant", "content": back}
    for sent in fake.requests[0::2]:  # server tools given as options join the agent's own
        assert [t["name"] for t in sent["tools"]] == ["web_search", "weather"] and sent["tools"][0] == web


def test_kept_blocks_survive_a_saved_run_state(fake: FakeClaude) -> None:
    search = server_tool_use("srv_1", "web_search", {"query": "Paris"})
    fake.script += [message(text("Searching."), search, stop_reason="pause_turn"), message(text("Found."))]
    result = run(agent(fake))
    saved = RunState.from_json(result.run_state.to_json())
    assert saved.messages == result.messages
    assert any(isinstance(p, ProviderPart) and p.block == search for m in saved.messages for p in m.parts)


def test_reply_details_are_kept(fake: FakeClaude) -> None:
    reply = message(text("Done"), stop_reason="stop_sequence")
    reply |= {
        "id": "msg_42",
        "stop_sequence": "END",
        "container": {"id": "cntr_1", "expires_at": "2026-11-23T13:00:00Z"},
    }
    fake.script += [reply, message(text("again"))]
    first = replies(run(agent(fake)))[0]
    assert first.details == {"id": "msg_42", "stop_sequence": "END", "container": "cntr_1"}


def test_an_unknown_block_alone_is_an_error_never_a_silent_empty_answer(fake: FakeClaude) -> None:
    fake.script += [message({"type": "hologram", "data": "?"})]
    result = run(agent(fake))
    assert result.outcome == "failed" and result.output != ""
    assert result.error is not None and not result.error.retryable
    assert "content block of type 'hologram'" in result.error.message
