"""OpenAIModel against a real HTTP server speaking the Responses and Chat Completions APIs
(tests/fake_openai.py), through the real openai SDK and the real Runner: reasoning items sent
back, options, structured output, images, refusals, cut replies, errors and bad input."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from loopwright import (
    Agent,
    ConfigurationError,
    ContextWindowError,
    ImagePart,
    Limits,
    Message,
    ModelError,
    ModelRequest,
    Runner,
    TextPart,
    tool,
)
from loopwright.features.structured_output import instruction_for
from loopwright.models.openai import CURRENT, KNOWN_MODELS, OpenAIModel
from loopwright.models.openai.mapping import CONTINUE, SCHEMA_MARKER
from tests.fake_openai import (
    Cut,
    Error,
    FakeOpenAI,
    Raw,
    StreamFail,
    completion,
    function_call,
    reasoning,
    refusal,
    response,
    text,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def model(fake: FakeOpenAI, api: str = "responses", name: str = "gpt-5.5", **kw: Any) -> OpenAIModel:
    url = fake.base_url
    return OpenAIModel(name, api=api, client=lambda: openai.AsyncOpenAI(base_url=url, api_key="k"), **kw)  # type: ignore[arg-type]


def agent(m: OpenAIModel, **kw: Any) -> Agent:
    return Agent(name="a", model=m, tools=[weather], limits=Limits(max_model_retries=0, retry_backoff_s=0), **kw)


def run(a: Agent, text_: str | list[Any] = "Weather in Paris?") -> Any:
    return asyncio.run(Runner(a).run(text_))


def ask(text_: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", parts=(TextPart(text=text_),))])


# ---------------------------------------------------------------- Responses API


def test_reasoning_items_go_back_in_place_with_their_encrypted_content(fake: FakeOpenAI) -> None:
    thought = reasoning("I should look it up.", encrypted="gAAAA-secret")
    fake.script += [response(thought, function_call("c1", "weather", {"city": "Paris"})), response(text("Sunny."))]
    result = run(agent(model(fake)))
    assert result.outcome == "final" and result.output == "Sunny."
    first, second = fake.requests
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    kinds = [item.get("type", item.get("role")) for item in second["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    assert second["input"][1]["encrypted_content"] == "gAAAA-secret" and second["input"][1]["id"] == thought["id"]
    assert second["input"][3] == {"type": "function_call_output", "call_id": "c1", "output": "sunny in Paris"}


def test_streamed_reasoning_summaries_are_thought_deltas(fake: FakeOpenAI) -> None:
    fake.script.append(response(reasoning("Thinking hard."), text("Done.")))

    async def go() -> list[Any]:
        return [item async for item in model(fake).stream(ask())]

    items = asyncio.run(go())
    assert "".join(i.text for i in items[:-1] if i.thought) == "Thinking hard."
    assert "".join(i.text for i in items[:-1] if not i.thought) == "Done."


def test_parallel_tool_calls_false_is_sent_with_the_tools(fake: FakeOpenAI) -> None:
    for api in ("responses", "chat"):
        fake.script.append(response(text("ok")))
        run(agent(model(fake, api, parallel_tool_calls=False)))
        assert fake.requests[-1]["parallel_tool_calls"] is False


def test_structured_output_is_asked_for_with_the_native_json_schema(fake: FakeOpenAI) -> None:
    class Answer(BaseModel):
        city: str
        degrees: int

    for api, where in (("responses", ("text", "format")), ("chat", ("response_format", "json_schema"))):
        fake.script.append(response(text('{"city": "Paris", "degrees": 21}')))
        result = run(agent(model(fake, api), output_type=Answer))
        assert result.output == Answer(city="Paris", degrees=21)
        outer, inner = where
        assert fake.requests[-1][outer][inner]["schema"] == Answer.model_json_schema()


def test_the_structured_output_instruction_still_carries_the_schema_marker() -> None:
    class Answer(BaseModel):
        x: int

    assert SCHEMA_MARKER in instruction_for(Answer).text  # openai_mapping.output_schema finds the schema by it


def test_images_go_in_as_input_images(fake: FakeOpenAI) -> None:
    image = ImagePart.from_bytes(PNG)
    for api in ("responses", "chat"):
        fake.script.append(response(text("A black square.")))
        run(agent(model(fake, api)), [TextPart(text="What is this?"), image])
    responses_body, chat_body = fake.requests
    assert responses_body["input"][0]["content"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{image.data}",
        "detail": "auto",
    }
    assert chat_body["messages"][-1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{image.data}"},
    }


def test_a_refusal_is_kept_as_text_with_stop_reason_refusal(fake: FakeOpenAI) -> None:
    for api in ("responses", "chat"):
        fake.script.append(response(refusal("I can't help with that.")))
        reply = asyncio.run(model(fake, api).complete(ask()))
        assert reply.stop_reason == "refusal" and reply.text == "I can't help with that."


def test_a_cut_reply_goes_round_and_is_continued_in_a_user_turn(fake: FakeOpenAI) -> None:
    for api in ("responses", "chat"):
        fake.requests.clear()
        fake.script += [
            response(text("Half"), status="incomplete", reason="max_output_tokens"),
            response(text(" done.")),
        ]
        result = run(agent(model(fake, api)))
        assert result.outcome == "final" and result.output == "Half done."  # the partial text is kept
        second = fake.requests[1]
        last = second["input"][-1] if api == "responses" else second["messages"][-1]
        assert CONTINUE in json.dumps(last)


def test_a_tool_call_cut_mid_arguments_is_dropped(fake: FakeOpenAI) -> None:
    cut = response(
        text("Let me"), function_call("c1", "weather", '{"city": "Par'), status="incomplete", reason="max_output_tokens"
    )
    for api in ("responses", "chat"):
        fake.script.append(cut)
        reply = asyncio.run(model(fake, api).complete(ask()))
        assert reply.stop_reason == "max_tokens" and reply.tool_calls == [] and reply.text == "Let me"


def test_a_cut_with_nothing_usable_is_retried_once_with_twice_the_budget(fake: FakeOpenAI) -> None:
    empty = response(reasoning("..."), status="incomplete", reason="max_output_tokens")
    fake.script += [empty, response(text("fits now"))]
    reply = asyncio.run(model(fake, max_tokens=100).complete(ask()))
    assert reply.text == "fits now"
    assert [r["max_output_tokens"] for r in fake.requests] == [100, 200]
    fake.script += [empty, empty]
    with pytest.raises(ModelError, match=r"cut by max_tokens=200 before it produced anything usable") as info:
        asyncio.run(model(fake, max_tokens=100).complete(ask()))
    assert not info.value.retryable


def test_max_tokens_is_sent_under_each_api_s_name(fake: FakeOpenAI) -> None:
    fake.script += [response(text("a")), response(text("b"))]
    asyncio.run(model(fake, max_tokens=64).complete(ask()))
    asyncio.run(OpenAIModel("llama3", api="chat", base_url=fake.base_url, max_tokens=64).complete(ask()))
    assert fake.requests[0]["max_output_tokens"] == 64 and fake.requests[1]["max_tokens"] == 64


# ---------------------------------------------------------------- errors


def test_a_stream_that_breaks_off_is_a_retryable_error(fake: FakeOpenAI) -> None:
    for api in ("responses", "chat"):
        fake.script.append(Cut(response(text("a long answer here")), events=4))

        async def go(a: str = api) -> None:
            async for _ in model(fake, a).stream(ask()):
                pass

        with pytest.raises(ModelError) as info:
            asyncio.run(go())
        assert info.value.retryable


def test_an_error_inside_a_200_stream_is_mapped(fake: FakeOpenAI) -> None:
    for api in ("responses", "chat"):
        fake.script.append(StreamFail(response(text("partial answer")), events=4))
        fake.script.append(
            StreamFail(response(text("x")), events=2, code="context_length_exceeded", message="too long")
        )

        async def go(a: str = api) -> None:
            async for _ in model(fake, a).stream(ask()):
                pass

        with pytest.raises(ModelError, match=r"server_error|had an error") as info:
            asyncio.run(go())
        assert info.value.retryable and not isinstance(info.value, ContextWindowError)
        with pytest.raises(ContextWindowError):
            asyncio.run(go())


def test_an_html_page_from_a_proxy_is_named(fake: FakeOpenAI) -> None:
    fake.script.append(Raw(502, "<html><head><title>502 Bad Gateway</title></head></html>"))
    with pytest.raises(ModelError, match=r"502.*HTML page \(502 Bad Gateway\)") as info:
        asyncio.run(model(fake).complete(ask()))
    assert info.value.retryable


def test_a_bad_key_names_openai_api_key(fake: FakeOpenAI) -> None:
    fake.script.append(Error(401, "Incorrect API key provided: sk-abc***", code="invalid_api_key"))
    with pytest.raises(ModelError, match="set OPENAI_API_KEY to a valid key") as info:
        asyncio.run(model(fake).complete(ask()))
    assert not info.value.retryable


def test_a_full_context_window_ends_the_run_on_the_token_budget_edge(fake: FakeOpenAI) -> None:
    fake.script.append(
        Error(400, "Your input exceeds the context window of this model.", code="context_length_exceeded")
    )
    result = run(agent(model(fake)))
    assert result.outcome == "limit", result.error


def test_a_missing_key_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = run(agent(OpenAIModel(CURRENT)))
    assert result.outcome == "failed"
    assert result.error.message.startswith("OPENAI_API_KEY is not set") and "\n" not in result.error.message


def test_a_local_server_needs_no_key(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake.script.append(completion("hello from llama"))
    reply = asyncio.run(OpenAIModel("llama3.2", api="chat", base_url=fake.base_url).complete(ask()))
    assert reply.text == "hello from llama"


# ---------------------------------------------------------------- bad input at construction


def test_an_unknown_model_id_warns_naming_known_ones() -> None:
    with pytest.warns(UserWarning, match=r"'gpt-9-turbo' is not a model id openai .* knows.*Known ids include gpt-"):
        OpenAIModel("gpt-9-turbo")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OpenAIModel(CURRENT)
        OpenAIModel("llama3.2", api="chat", base_url="http://127.0.0.1:11434/v1")  # a local server's ids are its own


def test_the_current_model_is_in_the_sdk_s_list() -> None:
    assert CURRENT in KNOWN_MODELS


def test_sampling_options_on_a_reasoning_model_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(
        ConfigurationError, match=r"gpt-5.5 is a reasoning model and refuses temperature.*valid options: .*reasoning"
    ):
        OpenAIModel("gpt-5.5", temperature=0.2)
    OpenAIModel("gpt-4.1", temperature=0.2)  # not a reasoning model: fine


def test_unknown_and_owned_options_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) 'temprature'.*valid options: .*temperature"):
        OpenAIModel("gpt-4.1", temprature=0.2)
    with pytest.raises(ConfigurationError, match=r"'messages'.*set by loopwright itself"):
        OpenAIModel("gpt-4.1", api="chat", messages=[])
    with pytest.raises(ConfigurationError, match="api must be 'responses' or 'chat'"):
        OpenAIModel("gpt-4.1", api="completions")  # type: ignore[arg-type]


def test_a_given_client_used_from_a_second_event_loop_is_a_clear_error(fake: FakeOpenAI) -> None:
    m = OpenAIModel("gpt-5.5", client=openai.AsyncOpenAI(base_url=fake.base_url, api_key="k"))
    fake.script.append(response(text("one")))
    assert asyncio.run(m.complete(ask())).text == "one"
    with pytest.raises(ModelError, match="first used in another event loop"):
        asyncio.run(m.complete(ask()))


def test_a_factory_s_client_is_made_once_per_loop_and_closed_with_it(fake: FakeOpenAI) -> None:
    made: list[openai.AsyncOpenAI] = []

    def factory() -> openai.AsyncOpenAI:
        made.append(openai.AsyncOpenAI(base_url=fake.base_url, api_key="k"))
        return made[-1]

    m = OpenAIModel("gpt-5.5", client=factory)
    fake.script += [response(text("a")), response(text("b")), response(text("c"))]

    async def twice() -> None:
        await m.complete(ask())
        await m.complete(ask())

    asyncio.run(twice())
    asyncio.run(m.complete(ask()))
    assert len(made) == 2 and not m._own


def test_importing_loopwright_does_not_import_openai() -> None:
    code = "import sys, loopwright; from loopwright.models import spec; print('openai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
