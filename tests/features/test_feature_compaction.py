"""History compaction: older turns replaced by a summary past a token threshold, tool call/result
pairs intact, the last turns verbatim, bounded by max_compactions, counted in the token budget."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from loopwright import (
    Agent,
    AnthropicModel,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
    tool,
)
from loopwright.features import BUILT_IN_MACHINES, Compaction, machine_for
from loopwright.features.compaction import SUMMARY_INSTRUCTION, cut_point
from loopwright.testing import assert_run_invariants
from tests.fake_claude import FakeClaude, message, text, tool_use


@tool
def read_page(n: int) -> str:
    """Read one page of the report."""
    return f"page {n}: " + "lorem ipsum " * 20


class Model:
    """Reads pages 1..pages, then answers; the history it is sent grows by ~400 tokens a step
    (what a provider would count); summary requests are answered and recorded."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.read = 0  # what the model knows it has read (a summary keeps it; the model remembers here)
        self.requests: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        size = 400 * len(request.messages)
        usage = Usage(input_tokens=size, output_tokens=20, requests=1)
        if request.instructions and request.instructions[0].text == SUMMARY_INSTRUCTION:
            self.summaries.append(request)
            read = [p.content for m in request.messages for p in m.parts if isinstance(p, ToolResult)]
            return ModelResponse(parts=(TextPart(text=f"Read {len(read)} pages so far."),), usage=usage)
        self.requests.append(request)
        if self.read < self.pages:
            self.read += 1
            call = ToolCall(name="read_page", args={"n": self.read})
            return ModelResponse(parts=(call,), stop_reason="tool_use", usage=usage)
        return ModelResponse(parts=(TextPart(text=f"The report has {self.pages} pages."),), usage=usage)


def make(model: Any, **kw: Any) -> Agent:
    limits = Limits(retry_backoff_s=0, max_iterations=20, **kw.pop("limits", {}))
    return Agent(name="reader", model=model, tools=[read_page], limits=limits, **kw)


def test_older_turns_are_replaced_by_a_summary_and_the_run_goes_on() -> None:
    model = Model(pages=8)
    agent = make(model, compaction=Compaction(max_tokens=3000, keep_last=2))
    result = Runner(agent).run_sync("How many pages?")
    assert result.outcome == "final" and result.output == "The report has 8 pages."
    assert result.trace.count("compact") >= 1
    (first, *_) = [e for e in result.events if e.type == "compacted"]
    assert first.summary.startswith("Read ") and first.kept >= 2
    # the history after it: the user's request with the summary, then the verbatim tail
    after = model.requests[-1].messages
    assert after[0].role == "user" and after[0].parts[0].text == "How many pages?"
    assert after[0].parts[1].text.startswith("[Summary of the conversation so far; older turns were compacted]")
    assert max(len(r.messages) for r in model.requests) < 2 * 8 + 1  # never the whole history again
    # every tool result still follows its call
    for request in model.requests:
        calls = {p.id for m in request.messages for p in m.parts if isinstance(p, ToolCall)}
        results = {p.call_id for m in request.messages for p in m.parts if isinstance(p, ToolResult)}
        assert results <= calls and all(m.role == "user" for m in request.messages[:1])
    assert result.usage.requests == len(model.requests) + len(model.summaries)  # the summaries count
    assert_run_invariants(result, agent)


def test_compactions_are_a_budget() -> None:
    model = Model(pages=10)
    agent = make(model, compaction=Compaction(max_tokens=1500, keep_last=2), limits={"max_compactions": 2})
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and result.trace.count("compact") == 2 and len(model.summaries) == 2
    assert result.run_state.charges["max_compactions"] == 2


def test_the_token_budget_counts_the_summary_calls() -> None:
    model = Model(pages=10)
    limits = {"max_total_tokens": 20_000}
    agent = make(model, compaction=Compaction(max_tokens=2000, keep_last=2), limits=limits)
    result = Runner(agent).run_sync("go")
    summary_tokens = sum(400 * len(r.messages) + 20 for r in model.summaries)
    assert summary_tokens > 0 and result.usage.total_tokens >= summary_tokens
    assert result.limit in (None, "max_total_tokens")


def test_the_cut_never_splits_a_tool_call_from_its_result() -> None:
    from loopwright import Message

    user = Message(role="user", parts=(TextPart(text="go"),))
    call = Message(role="assistant", parts=(ToolCall(id="c", name="read_page", args={"n": 1}),))
    answer = Message(role="user", parts=(ToolResult(call_id="c", name="read_page", content="p"),))
    history = [user, call, answer, call, answer, call, answer]
    assert cut_point(history, 1) == 5 and history[5].role == "assistant"  # keeps the last pair
    assert cut_point(history, 2) == 5 and cut_point(history, 3) == 3
    assert cut_point(history[:3], 1) == 0  # nothing older than the first step: nothing to cut


def test_a_history_too_short_to_cut_is_left_alone_and_said_so() -> None:
    model = Model(pages=2)
    result = Runner(make(model, compaction=Compaction(max_tokens=1, keep_last=50))).run_sync("go")
    assert result.outcome == "final" and not model.summaries
    kinds = [e.error.message for e in result.events if e.type == "error_occurred"]
    assert kinds and all("too short to cut (keep_last=50)" in k for k in kinds)


def test_the_compacted_history_is_saved_with_the_run() -> None:
    model = Model(pages=6)
    result = Runner(make(model, compaction=Compaction(max_tokens=2500, keep_last=2))).run_sync("go")
    loaded = RunState.from_json(result.run_state.to_json())
    assert loaded.messages == result.messages and loaded.features["compaction"].summary


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="positive whole number of tokens"):
        Compaction(max_tokens=0)
    with pytest.raises(ValueError, match="keep at least the last message"):
        Compaction(keep_last=0)
    with pytest.raises(ConfigurationError, match="compaction must be"):
        make(Model(1), compaction=1000)
    agent = make(Model(1), compaction=Compaction(), limits={"max_repeated_calls": None})
    assert machine_for(agent) is BUILT_IN_MACHINES["compaction"]


# ------------------------------------------------------------------ the fake Messages API over real HTTP


def test_compaction_against_the_messages_api(fake: FakeClaude) -> None:
    big = {"input_tokens": 9000, "output_tokens": 30}
    fake.script += [
        message(text("Reading page 1."), tool_use("tu_1", "read_page", {"n": 1}), stop_reason="tool_use", usage=big),
        message(text("Reading page 2."), tool_use("tu_2", "read_page", {"n": 2}), stop_reason="tool_use", usage=big),
        message(text("Pages 1 and 2 are lorem ipsum; page 3 is next."), usage={"input_tokens": 2000}),  # the summary
        message(text("Reading page 3."), tool_use("tu_3", "read_page", {"n": 3}), stop_reason="tool_use"),
        message(text("The report is lorem ipsum throughout.")),
    ]
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    agent = make(
        AnthropicModel("claude-test", max_tokens=512, client=client),
        compaction=Compaction(max_tokens=8000, keep_last=2),
    )

    async def go() -> RunResult:
        try:
            return await Runner(agent).run("Summarise the report.")
        finally:
            await client.close()

    result = asyncio.run(go())
    assert result.outcome == "final" and result.output == "The report is lorem ipsum throughout."
    summary_request, after = fake.requests[2], fake.requests[3]
    # an instruction that changes from call to call goes after the cached prefix (the adapter's
    # caching rule): the summary instruction is the last block of the last user turn
    last_block = summary_request["messages"][-1]["content"][-1]
    assert last_block["type"] == "text" and SUMMARY_INSTRUCTION.strip() in last_block["text"]
    assert summary_request["tool_choice"] == {"type": "none"}
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "user"]
    first = after["messages"][0]["content"]
    assert first[0]["text"] == "Summarise the report." and "Pages 1 and 2 are lorem ipsum" in first[1]["text"]
    assert after["messages"][1]["content"][1]["id"] == "tu_2"  # the last call kept with its result
    assert after["messages"][2]["content"][0]["tool_use_id"] == "tu_2"
