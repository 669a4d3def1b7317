"""GeminiModel against a real HTTP server speaking the Gemini API (tests/fake_gemini.py), through
the real google-genai SDK and the real Runner: tool round trips, parallel calls, streaming,
thought signatures, structured output, images, usage, cut replies and blocked replies."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright import Agent, ImagePart, Limits, Message, ModelRequest, ModelResponse, Runner, RunResult, tool
from loopwright.data.events import Instruction, TextPart, ToolSpec
from loopwright.features.structured_output import instruction_for
from loopwright.models.base import StreamDelta
from loopwright.models.gemini import GeminiModel
from loopwright.models.gemini.mapping import CONTINUE, PLACEHOLDER, STRUCTURED_PREFIX
from tests.fake_gemini import MODEL, FakeGemini, GeminiHarness, call, reply, text


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


@tool
async def slow_weather(city: str, delay: float) -> str:
    """Weather in a city, answered after ``delay`` seconds."""
    await asyncio.sleep(delay)
    return f"sunny in {city}"


def model(fake: FakeGemini, name: str = MODEL, **options: Any) -> GeminiModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GeminiModel(name, api_key="test-key", base_url=fake.base_url, **options)


def agent(fake: FakeGemini, *, tools: Any = (weather,), **kw: Any) -> Agent:
    limits = Limits(max_model_retries=kw.pop("max_model_retries", 0), retry_backoff_s=0, **kw.pop("limits", {}))
    return Agent(
        name="gemini",
        model=kw.pop("model", None) or model(fake, **kw.pop("options", {})),
        static_instruction="You are terse.",
        tools=list(tools),
        limits=limits,
        **kw,
    )


def run(a: Agent, prompt: str | tuple[Any, ...] = "Weather in Paris?") -> RunResult:
    return Runner(a).run_sync(prompt)  # type: ignore[arg-type]


def stream_run(a: Agent, prompt: str = "Weather in Paris?") -> tuple[list[Any], RunResult]:
    async def go() -> tuple[list[Any], RunResult]:
        s = Runner(a).stream(prompt)
        events = [e async for e in s]
        return events, s.result

    return asyncio.run(go())


def replies(result: RunResult) -> list[ModelResponse]:
    return [e.response for e in result.events if e.type == "model_responded"]


def ask(m: GeminiModel, request: ModelRequest, *, streamed: bool) -> tuple[ModelResponse, list[StreamDelta]]:
    async def go() -> tuple[ModelResponse, list[StreamDelta]]:
        try:
            if not streamed:
                return await m.complete(request), []
            deltas: list[StreamDelta] = []
            final = None
            async for item in m.stream(request):
                if isinstance(item, ModelResponse):
                    final = item
                else:
                    deltas.append(item)
            assert final is not None
            return final, deltas
        finally:
            await m.aclose()

    return asyncio.run(go())


def camel(value: Any) -> Any:
    """JSON with every key in lowerCamelCase (the API takes both spellings; the SDK mixes them)."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def user(value: str) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", parts=(TextPart(text=value),))])


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_round_trip_through_a_runner(fake: FakeGemini, streamed: bool) -> None:
    fake.script += [
        reply(text("Let me check."), call("weather", {"city": "Paris"}, id_="fc_1")),
        reply(text("It is sunny in Paris.")),
    ]
    a = agent(fake)
    result = stream_run(a)[1] if streamed else run(a)
    assert result.outcome == "final" and result.output == "It is sunny in Paris."
    assert fake.streamed() == [streamed, streamed]
    first, second = fake.requests
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "weather" and declaration["parameters_json_schema"]["required"] == ["city"]
    assert first["systemInstruction"]["parts"] == [{"text": "You are terse."}]
    assert second["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Let me check."},
            {
                "functionCall": {"id": "fc_1", "name": "weather", "args": {"city": "Paris"}},
                # the fake's Gemini 3 did not sign its call: it gets Google's placeholder, as the API requires
                "thoughtSignature": base64.b64encode(PLACEHOLDER).decode(),
            },
        ],
    }
    assert second["contents"][2] == {
        "role": "user",
        "parts": [{"functionResponse": {"id": "fc_1", "name": "weather", "response": {"result": "sunny in Paris"}}}],
    }
    assert [r.stop_reason for r in replies(result)] == ["tool_use", "end_turn"]


def test_calls_without_ids_get_local_ids_that_are_never_sent(fake: FakeGemini) -> None:
    fake.script += [reply(call("weather", {"city": "Paris"}), call("weather", {"city": "Rome"})), reply(text("ok"))]
    result = run(agent(fake))
    calls = replies(result)[0].tool_calls
    assert len({c.id for c in calls}) == 2
    sent = fake.requests[1]["contents"]
    assert [p["functionCall"] for p in sent[1]["parts"]] == [
        {"name": "weather", "args": {"city": "Paris"}},
        {"name": "weather", "args": {"city": "Rome"}},
    ]
    assert [p["functionResponse"]["response"]["result"] for p in sent[2]["parts"]] == [
        "sunny in Paris",
        "sunny in Rome",
    ]
    assert all("id" not in p["functionResponse"] for p in sent[2]["parts"])


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(delays=st.lists(st.sampled_from([0.0, 0.01, 0.03]), min_size=2, max_size=4))
def test_parallel_calls_are_answered_in_call_order(delays: list[float]) -> None:
    """Whatever order the tools finish in, the function responses follow the calls."""
    calls = [call("slow_weather", {"city": f"c{n}", "delay": d}, id_=f"fc_{n}") for n, d in enumerate(delays)]
    with FakeGemini(script=[reply(*calls), reply(text("done"))]) as fake:
        result = run(agent(fake, tools=(slow_weather,)))
    assert result.outcome == "final"
    answers = GeminiHarness.tool_results(fake.requests[1])
    assert [a[0] for a in answers] == [f"fc_{n}" for n in range(len(delays))]
    assert [a[1] for a in answers] == [{"result": f"sunny in c{n}"} for n in range(len(delays))]


def test_a_tool_error_goes_back_as_an_error_response(fake: FakeGemini) -> None:
    @tool
    def broken(city: str) -> str:
        """Always fails."""
        raise LookupError("no such city")

    fake.script += [reply(call("broken", {"city": "Atlantis"}, id_="fc_1")), reply(text("sorry"))]
    run(agent(fake, tools=(broken,)))
    response = fake.requests[1]["contents"][2]["parts"][0]["functionResponse"]["response"]
    assert list(response) == ["error"] and "no such city" in json.dumps(response)


# ---------------------------------------------------------------- streaming


SCRIPTS = [
    reply(text("thinking about the weather", thought=True), text("It is sunny in Paris, all week long.")),
    reply(text("plan", thought=True, signature=b"\x01\x02sig"), call("weather", {"city": "Paris"}, id_="a")),
    reply(call("weather", {"city": "Paris"}, signature=b"sig-on-call"), call("weather", {"city": "Rome"})),
    reply(text("Answer with its signature at the end.", signature=b"\xfa\xfb\xfc")),
    reply(text("Cut off in the mid"), finish="MAX_TOKENS", usage={"thoughtsTokenCount": 7}),
]


@pytest.mark.parametrize("apart", [False, True], ids=["signature-on-last-piece", "signature-in-own-chunk"])
@pytest.mark.parametrize("script", SCRIPTS, ids=[f"reply{n}" for n in range(len(SCRIPTS))])
def test_streaming_equals_non_streaming(fake: FakeGemini, script: dict[str, Any], apart: bool) -> None:
    fake.signature_apart = apart
    fake.script += [script, script]
    m = model(fake)
    plain, _ = ask(m, user("hi"), streamed=False)
    streamed, deltas = ask(m, user("hi"), streamed=True)
    assert fake.streamed() == [False, True]
    assert streamed.model_dump(exclude={"parts"}) == plain.model_dump(exclude={"parts"})
    ids = itertools.count()
    # local ids differ between the two calls; everything else is equal
    norm = [
        p.model_copy(update={"id": next(ids)}) if p.type == "tool_call" and p.id.startswith("gemini_local_") else p
        for p in streamed.parts
    ]
    ids = itertools.count()
    norm_plain = [
        p.model_copy(update={"id": next(ids)}) if p.type == "tool_call" and p.id.startswith("gemini_local_") else p
        for p in plain.parts
    ]
    assert norm == norm_plain
    assert "".join(d.text for d in deltas if not d.thought) == plain.text
    assert "".join(d.text for d in deltas if d.thought) == "".join(t.text for t in plain.thoughts)


def test_a_streamed_run_yields_text_deltas(fake: FakeGemini) -> None:
    fake.script += [reply(text("thinking", thought=True), text("It is sunny in Paris."))]
    events, result = stream_run(agent(fake))
    deltas = [e for e in events if e.type == "text_delta"]
    assert "".join(e.text for e in deltas if not e.thought) == "It is sunny in Paris." == result.output
    assert "".join(e.text for e in deltas if e.thought) == "thinking"


# ---------------------------------------------------------------- thought signatures


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    signatures=st.lists(st.binary(min_size=1, max_size=64), min_size=3, max_size=3),
    streamed=st.booleans(),
    apart=st.booleans(),
)
def test_thought_signatures_go_back_byte_for_byte(signatures: list[bytes], streamed: bool, apart: bool) -> None:
    """Signed thoughts, signed calls and signed text: every later request carries every
    signature, on the same part, with the same bytes."""
    thought_sig, call_sig, text_sig = signatures
    with FakeGemini(signature_apart=apart) as fake:
        fake.script += [
            reply(
                text("I should look it up", thought=True, signature=thought_sig),
                call("weather", {"city": "Paris"}, id_="fc_1", signature=call_sig),
            ),
            reply(text("Sunny. And Rome?", signature=text_sig), call("weather", {"city": "Rome"}, id_="fc_2")),
            reply(text("Bye.")),
        ]
        a = agent(fake)
        result = stream_run(a)[1] if streamed else run(a)
    assert result.outcome == "final"
    model_turns = [c for c in fake.requests[2]["contents"] if c["role"] == "model"]
    sent = [
        (p.get("text"), p.get("functionCall", {}).get("name"), base64.urlsafe_b64decode(p["thoughtSignature"]))
        for turn in model_turns
        for p in turn["parts"]
        if "thoughtSignature" in p
    ]
    assert sent == [
        ("I should look it up", None, thought_sig),
        (None, "weather", call_sig),
        ("Sunny. And Rome?", None, text_sig),
        (None, "weather", PLACEHOLDER),  # the scripted call the model left unsigned (Gemini 3 always signs)
    ]
    assert model_turns[0]["parts"][0]["thought"] is True
    assert fake.requests[1]["contents"][1] == model_turns[0]  # the same bytes in every later request


@pytest.mark.parametrize("streamed", [False, True])
def test_thought_signatures_go_back_byte_for_byte_one_example(streamed: bool) -> None:
    """The fast tier's copy of the property above: bytes that base64 spells with + and /."""
    test_thought_signatures_go_back_byte_for_byte.hypothesis.inner_test(  # type: ignore[attr-defined]
        signatures=[b"\xfb\xff\x00", b"\xff\xfe+/", b"\x00" * 33], streamed=streamed, apart=streamed
    )


def test_a_signature_alone_on_an_empty_part_goes_back_alone(fake: FakeGemini) -> None:
    fake.script += [
        reply(text("Sunny."), text("", signature=b"trailing"), call("weather", {"city": "P"}, id_="c")),
        reply(text("ok")),
    ]
    run(agent(fake))
    parts = fake.requests[1]["contents"][1]["parts"]
    assert parts[:2] == [
        {"text": "Sunny."},
        {"text": "", "thoughtSignature": base64.urlsafe_b64encode(b"trailing").decode()},
    ]


def test_claude_thinking_in_the_history_is_not_sent_to_gemini(fake: FakeGemini) -> None:
    from loopwright import ThoughtPart

    history = [
        Message(role="user", parts=(TextPart(text="hi"),)),
        Message(role="assistant", parts=(ThoughtPart(text="claude's", signature="EqQB"), TextPart(text="hello"))),
        Message(role="user", parts=(TextPart(text="again"),)),
    ]
    fake.script += [reply(text("ok"))]
    ask(model(fake), ModelRequest(messages=history), streamed=False)
    assert fake.requests[0]["contents"][1] == {"role": "model", "parts": [{"text": "hello"}]}


# ---------------------------------------------------------------- cut replies


def test_a_cut_reply_is_continued_in_a_user_turn(fake: FakeGemini) -> None:
    fake.script += [
        reply(text("The forecast for Paris is "), finish="MAX_TOKENS"),
        reply(text("sunny all week.")),
    ]
    result = run(agent(fake, tools=()))
    assert result.outcome == "final" and result.output == "The forecast for Paris is sunny all week."
    assert [r.stop_reason for r in replies(result)] == ["max_tokens", "end_turn"]
    first, second = fake.requests
    assert second["contents"] == [
        *first["contents"],
        {"role": "model", "parts": [{"text": "The forecast for Paris is "}]},
        {"role": "user", "parts": [{"text": CONTINUE}]},
    ]


def test_a_reply_cut_twice_keeps_each_request_a_prefix_of_the_next(fake: FakeGemini) -> None:
    fake.script += [
        reply(text("One, "), finish="MAX_TOKENS"),
        reply(text("two, "), finish="MAX_TOKENS"),
        reply(text("three.")),
    ]
    result = run(agent(fake, tools=()))
    assert result.output == "One, two, three."
    for before, after in itertools.pairwise(fake.requests):
        assert after["contents"][: len(before["contents"])] == before["contents"]
    assert [c["role"] for c in fake.requests[2]["contents"]] == ["user", "model", "user", "model", "user"]


def test_a_cut_that_left_only_thinking_is_retried_once_with_twice_the_budget(fake: FakeGemini) -> None:
    fake.script += [
        reply(text("long thinking", thought=True), finish="MAX_TOKENS"),
        reply(text("Sunny.")),
    ]
    result = run(agent(fake, options={"max_output_tokens": 100}))
    assert result.output == "Sunny."
    assert [r["generationConfig"]["maxOutputTokens"] for r in fake.requests] == [100, 200]


@pytest.mark.parametrize("budget", [None, 100])
def test_a_cut_empty_twice_fails_saying_what_to_raise(fake: FakeGemini, budget: int | None) -> None:
    fake.script += [reply(text("thinking", thought=True), finish="MAX_TOKENS")] * 2
    options = {"max_output_tokens": budget} if budget else {}
    result = run(agent(fake, options=options))
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "raise max_output_tokens" in result.error.message
    assert len(fake.requests) == (2 if budget else 1)


# ---------------------------------------------------------------- usage


def test_usage_is_mapped_and_summed(fake: FakeGemini) -> None:
    fake.script += [
        reply(
            call("weather", {"city": "Paris"}, id_="a"),
            usage={
                "promptTokenCount": 100,
                "cachedContentTokenCount": 40,
                "candidatesTokenCount": 10,
                "thoughtsTokenCount": 5,
            },
        ),
        reply(text("Sunny."), usage={"promptTokenCount": 130, "candidatesTokenCount": 3}),
    ]
    result = run(agent(fake))
    first, second = (r.usage for r in replies(result))
    assert (first.input_tokens, first.cache_read_tokens, first.output_tokens) == (60, 40, 15)
    assert (second.input_tokens, second.cache_read_tokens, second.output_tokens) == (130, 0, 3)
    assert replies(result)[0].details["thoughts_tokens"] == 5
    total = result.usage
    assert (total.input_tokens, total.output_tokens, total.cache_read_tokens, total.requests) == (190, 18, 40, 2)


# ---------------------------------------------------------------- the request is never changed


@pytest.mark.parametrize("streamed", [False, True])
def test_the_request_is_never_mutated(fake: FakeGemini, streamed: bool) -> None:
    from loopwright import ThoughtPart, ToolCall, ToolResult

    messages = [
        Message(role="user", parts=(TextPart(text="hi"), ImagePart(media_type="image/png", data="iVBORw0K"))),
        Message(
            role="assistant",
            parts=(
                ThoughtPart(text="t"),
                ToolCall(id="b", name="weather", args={"city": "P"}),
                ToolCall(id="a", name="weather", args={"city": "R"}),
            ),
        ),
        Message(
            role="user",
            parts=(
                ToolResult(call_id="a", name="weather", content={"k": [1]}),
                ToolResult(call_id="b", name="weather", content="x"),
            ),
        ),
    ]
    request = ModelRequest(
        instructions=(Instruction(text="sys"),),
        messages=messages,
        tools=(ToolSpec(name="weather", description="d", input_schema={"type": "object"}),),
        settings={
            "temperature": 0.1,
            "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    )
    before = request.model_dump(mode="json")
    fake.script += [reply(text("ok")), reply(text("ok"))]
    m = model(fake, top_p=0.5)
    options = dict(m.options)
    ask(m, request, streamed=streamed)
    ask(m, request, streamed=streamed)
    assert request.model_dump(mode="json") == before and m.options == options
    assert fake.requests[0] == fake.requests[1]
    answers = fake.requests[0]["contents"][2]["parts"]
    assert [p["functionResponse"]["id"] for p in answers] == ["b", "a"]  # the order of the calls


# ---------------------------------------------------------------- structured output


class Answer(BaseModel):
    city: str
    degrees: int


def test_the_structured_output_prefix_is_the_features_own() -> None:
    assert instruction_for(Answer).text.startswith(STRUCTURED_PREFIX)


def test_output_type_is_sent_as_a_native_response_schema(fake: FakeGemini) -> None:
    fake.script += [reply(text('{"city": "Paris", "degrees": 21}'))]
    result = run(agent(fake, tools=(), output_type=Answer))
    assert result.outcome == "final" and result.output == Answer(city="Paris", degrees=21)
    config = fake.requests[0]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == Answer.model_json_schema()


@pytest.mark.parametrize(("name", "native"), [("gemini-2.5-flash", False), ("gemini-3.8-flash", True)])
def test_a_response_schema_beside_tools_only_where_the_model_takes_both(
    fake: FakeGemini, name: str, native: bool
) -> None:
    fake.script += [reply(text('{"city": "Paris", "degrees": 21}'))]
    run(agent(fake, model=model(fake, name), output_type=Answer))
    assert ("responseJsonSchema" in fake.requests[0].get("generationConfig", {})) is native


def test_a_response_schema_option_takes_a_pydantic_class(fake: FakeGemini) -> None:
    fake.script += [reply(text('{"city": "Paris", "degrees": 21}'))]
    ask(model(fake, response_schema=Answer), user("hi"), streamed=False)
    config = fake.requests[0]["generationConfig"]
    assert config["responseJsonSchema"] == Answer.model_json_schema()
    assert config["responseMimeType"] == "application/json"


# ---------------------------------------------------------------- images


def test_images_are_sent_inline_or_by_uri(fake: FakeGemini) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    prompt = (
        TextPart(text="What is this?"),
        ImagePart.from_bytes(png),
        ImagePart(url="gs://bucket/chart.jpg", media_type="image/jpeg"),
    )
    fake.script += [reply(text("A chart."))]
    result = run(agent(fake, tools=()), prompt)
    assert result.output == "A chart."
    parts = camel(fake.requests[0]["contents"][0]["parts"])  # (the SDK sends inner names in snake_case)
    assert parts[0] == {"text": "What is this?"}
    assert parts[1]["inlineData"]["mimeType"] == "image/png"
    assert base64.urlsafe_b64decode(parts[1]["inlineData"]["data"]) == png
    assert parts[2] == {"fileData": {"fileUri": "gs://bucket/chart.jpg", "mimeType": "image/jpeg"}}


# ---------------------------------------------------------------- blocked replies


def test_a_reply_withheld_for_safety_fails_naming_the_reason(fake: FakeGemini) -> None:
    rating = {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
    fake.script += [reply(finish="SAFETY", safety=[rating])]
    result = run(agent(fake))
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "SAFETY" in result.error.message and "HARM_CATEGORY_DANGEROUS_CONTENT" in result.error.message
    assert len(fake.requests) == 1


def test_a_blocked_prompt_fails_naming_the_block_reason(fake: FakeGemini) -> None:
    fake.script += [reply(prompt_blocked="PROHIBITED_CONTENT")]
    result = run(agent(fake))
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "blocked the prompt" in result.error.message and "PROHIBITED_CONTENT" in result.error.message


def test_a_withheld_reply_that_holds_text_is_a_refusal(fake: FakeGemini) -> None:
    fake.script += [reply(text("I can't help with that."), finish="SAFETY")]
    result = run(agent(fake))
    assert replies(result)[0].stop_reason == "refusal" and result.output == "I can't help with that."


def test_a_malformed_function_call_is_retried(fake: FakeGemini) -> None:
    fake.script += [reply(finish="MALFORMED_FUNCTION_CALL"), reply(text("ok"))]
    result = run(agent(fake, max_model_retries=1))
    assert result.outcome == "final" and len(fake.requests) == 2
