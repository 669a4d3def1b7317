"""OpenAIModel (api="chat") against what OpenAI-compatible servers really send (tests/fake_openai.py's
quirks), through the real openai SDK and the real Runner: streamed calls without ``index`` or all at
``index`` 0, several calls in one delta, calls without ids, arguments as objects or not JSON, no
usage, and DeepSeek's thinking mode that wants its ``reasoning_content`` back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    Message,
    ModelRequest,
    Runner,
    RunResult,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    tool,
)
from loopwright.models.openai import OpenAIModel
from tests.fake_openai import DEEPSEEK_400, FakeOpenAI, chat_call, completion
from tests.helpers import one_tool_agent, openai_on


@tool
def double(d: str) -> str:
    """Double a digit."""
    return d * 2


def model(fake: FakeOpenAI, **kw: Any) -> OpenAIModel:
    return openai_on(fake, "local-model", api="chat", **kw)


def agent(m: OpenAIModel, **limits: Any) -> Agent:
    return one_tool_agent(m, double, **limits)


def streamed(a: Agent, text: str = "Double 1 and 2.") -> tuple[RunResult, list[Any]]:
    async def go() -> tuple[RunResult, list[Any]]:
        stream = Runner(a).stream(text)
        events = [e async for e in stream]
        return stream.result, events

    return asyncio.run(go())


def ran(result: RunResult) -> list[tuple[str, Any]]:
    return [(p.name, p.content) for m in result.messages for p in m.parts if isinstance(p, ToolResult)]


TWO_CALLS = completion(None, chat_call("call_a", "double", {"d": "1"}), chat_call("call_b", "double", {"d": "2"}))


@pytest.mark.parametrize("quirk", ["no_index", "index_zero", "one_delta", "name_every_chunk"])
@pytest.mark.parametrize("streaming", [True, False])
def test_two_parallel_calls_stay_two_whatever_their_index(quirk: str, streaming: bool) -> None:
    with FakeOpenAI(script=[TWO_CALLS, completion("11 and 22")], quirks={quirk}) as fake:
        a = agent(model(fake))
        result = streamed(a)[0] if streaming else asyncio.run(Runner(a).run("Double 1 and 2."))
    assert result.outcome == "final", result.error
    assert result.output == "11 and 22"
    assert ran(result) == [("double", "11"), ("double", "22")]
    tools = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["call_a", "call_b"]


@pytest.mark.parametrize("streaming", [True, False])
def test_calls_without_ids_get_local_ones_and_run(streaming: bool) -> None:
    with FakeOpenAI(script=[TWO_CALLS, completion("done")], quirks={"no_ids"}) as fake:
        a = agent(model(fake))
        result = streamed(a)[0] if streaming else asyncio.run(Runner(a).run("Double 1 and 2."))
    assert result.outcome == "final", result.error
    assert ran(result) == [("double", "11"), ("double", "22")]
    sent = fake.requests[1]["messages"]
    ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m["tool_calls"]]
    assert len(set(ids)) == 2 and all(ids)
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


@pytest.mark.parametrize("streaming", [True, False])
def test_arguments_given_as_an_object_are_the_arguments(streaming: bool) -> None:
    with FakeOpenAI(script=[TWO_CALLS, completion("done")], quirks={"object_arguments", "no_ids"}) as fake:
        a = agent(model(fake))
        result = streamed(a)[0] if streaming else asyncio.run(Runner(a).run("Double 1 and 2."))
    assert result.outcome == "final", result.error
    assert ran(result) == [("double", "11"), ("double", "22")]


@pytest.mark.parametrize("streaming", [True, False])
def test_arguments_that_are_not_json_reach_the_model_as_an_error_it_corrects(streaming: bool) -> None:
    bad = completion(None, chat_call("call_x", "double", "{'d': '1'}"))
    good = completion(None, chat_call("call_y", "double", {"d": "1"}))
    with FakeOpenAI(script=[bad, good, completion("11")]) as fake:
        a = agent(model(fake))
        result = streamed(a)[0] if streaming else asyncio.run(Runner(a).run("Double 1."))
    assert result.outcome == "final", result.error
    assert len(fake.requests) == 3  # never the same request sent again
    answer = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")
    assert answer["tool_call_id"] == "call_x"
    assert "arguments_not_json" in answer["content"] and "invalid arguments" in answer["content"]
    assert ran(result)[-1] == ("double", "11")


def test_a_tool_with_retries_charges_bad_json_to_the_tool_retry_budget() -> None:
    @tool(retries=1)
    def strict_double(d: str) -> str:
        """Double a digit."""
        return d * 2

    bad = completion(None, chat_call("call_x", "strict_double", "not json"))
    with FakeOpenAI(script=[bad, completion("fixed")]) as fake:
        a = Agent(name="a", model=model(fake), tools=[strict_double],
                  limits=Limits(max_model_retries=0, retry_backoff_s=0, max_tool_retries=0, salvage=False))  # fmt: skip
        result = asyncio.run(Runner(a).run("Double 1."))
    assert (result.outcome, result.limit) == ("limit", "max_tool_retries"), result.error
    answer = next(m for m in fake.requests[-1]["messages"] if m["role"] == "tool") if len(fake.requests) > 1 else None
    assert answer is None  # the budget ended the loop before another request


def test_a_server_without_usage_gets_an_estimate_that_says_so_and_budgets_fire() -> None:
    script = [TWO_CALLS, TWO_CALLS, TWO_CALLS, completion("done")]
    with FakeOpenAI(script=list(script), quirks={"no_usage"}) as fake:
        result, events = streamed(agent(model(fake)))
    assert result.outcome == "final", result.error
    replies = [e for e in events if e.type == "model_responded"]
    assert all(e.response.details.get("usage_estimated") is True for e in replies)
    assert all(e.response.usage.input_tokens > 0 and e.response.usage.output_tokens > 0 for e in replies)
    assert result.usage.total_tokens > 0
    # a token budget the estimates spend ends the run on it
    with FakeOpenAI(script=list(script), quirks={"no_usage"}) as fake:
        result, _ = streamed(agent(model(fake), max_total_tokens=150))
    assert result.outcome in ("limit", "salvaged"), (result.outcome, result.error)
    assert result.limit == "max_total_tokens"


def test_max_cost_usd_fires_on_estimated_usage() -> None:
    url_model = "gpt-5.5"  # a priced model behind an OpenAI-compatible proxy that sends no usage
    calls = completion(
        None, chat_call("c1", "double", {"d": "1"}), chat_call("c2", "double", {"d": "2"}), model="gpt-5.5"
    )
    script = [calls, calls, calls, completion("done", model="gpt-5.5")]
    with FakeOpenAI(script=script, quirks={"no_usage"}) as fake:
        url = fake.base_url
        m = OpenAIModel(
            url_model, api="chat", base_url=url, client=lambda: openai.AsyncOpenAI(base_url=url, api_key="k")
        )
        result, events = streamed(agent(m, max_cost_usd=0.0005, salvage=False))
    priced = [e.response.usage.cost_usd for e in events if e.type == "model_responded"]
    assert priced and all(c is not None and c > 0 for c in priced)
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")


def test_usage_a_server_does_send_is_not_marked_estimated() -> None:
    with FakeOpenAI(script=[completion("hi")]) as fake:
        result, events = streamed(agent(model(fake)))
    reply = next(e for e in events if e.type == "model_responded")
    assert "usage_estimated" not in reply.response.details
    assert result.usage.input_tokens == 10


# ---------------------------------------------------------------- thinking models


def deepseek_script() -> list[Any]:
    return [
        completion(None, chat_call("call_1", "double", {"d": "4"}), reasoning="I should double 4 first."),
        completion(None, chat_call("call_2", "double", {"d": "44"}), reasoning="Now double the result."),
        completion("4444", reasoning="Done."),
    ]


@pytest.mark.parametrize("streaming", [True, False])
def test_a_deepseek_style_server_completes_a_tool_loop_with_send_reasoning(streaming: bool) -> None:
    with FakeOpenAI(script=deepseek_script(), quirks={"reasoning_required"}) as fake:
        a = agent(model(fake, send_reasoning=True))
        result = streamed(a)[0] if streaming else asyncio.run(Runner(a).run("Double 4 twice."))
    assert result.outcome == "final", result.error
    assert result.output == "4444"
    last = [m for m in fake.requests[2]["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in last] == ["I should double 4 first.", "Now double the result."]
    thoughts = [p.text for m in result.messages for p in m.parts if isinstance(p, ThoughtPart)]
    assert thoughts[:2] == ["I should double 4 first.", "Now double the result."]  # still shown as thoughts


def test_without_send_reasoning_the_deepseek_style_server_refuses_with_its_400() -> None:
    with FakeOpenAI(script=deepseek_script(), quirks={"reasoning_required"}) as fake:
        result = asyncio.run(Runner(agent(model(fake))).run("Double 4 twice."))
    assert result.outcome == "failed"
    assert DEEPSEEK_400 in str(result.error)


def test_foreign_thoughts_are_never_sent_to_an_openai_compatible_server() -> None:
    """Claude's signed thinking and Gemini's thoughts in a history replayed on a Chat server."""
    history = [
        Message(role="user", parts=(TextPart(text="Double 4."),)),
        Message(
            role="assistant",
            parts=(
                ThoughtPart(text="claude thinks", signature="sig-claude"),
                ThoughtPart(text="gemini thinks"),
                ThoughtPart(redacted=True, data="opaque"),
                ToolCall(id="toolu_1", name="double", args={"d": "4"}),
            ),
        ),
        Message(role="user", parts=(ToolResult(call_id="toolu_1", name="double", content="44"),)),
    ]
    with FakeOpenAI(script=[completion("44")]) as fake:
        response = asyncio.run(model(fake, send_reasoning=True).complete(ModelRequest(messages=history)))
    assert response.text == "44"
    body = json.dumps(fake.requests[0])
    assert "thinks" not in body and "opaque" not in body and "sig-claude" not in body
    assistant = next(m for m in fake.requests[0]["messages"] if m["role"] == "assistant")
    assert "reasoning_content" not in assistant and "reasoning" not in assistant


def test_send_reasoning_is_for_the_chat_api() -> None:
    with pytest.raises(ConfigurationError, match="send_reasoning=True is for api='chat'"):
        OpenAIModel("gpt-5.5", send_reasoning=True)
    with pytest.raises(ConfigurationError, match="send_reasoning must be True or False"):
        OpenAIModel("m", api="chat", base_url="http://x/v1", send_reasoning="yes")  # type: ignore[arg-type]


def test_a_chat_server_s_reasoning_tokens_are_read() -> None:
    reply = completion("hi")
    reply["usage"]["completion_tokens_details"] = {"reasoning_tokens": 7}
    with FakeOpenAI(script=[reply]) as fake:
        response = asyncio.run(
            model(fake).complete(ModelRequest(messages=[Message(role="user", parts=(TextPart(text="hi"),))]))
        )
    assert response.details["reasoning_tokens"] == 7
