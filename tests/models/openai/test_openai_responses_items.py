"""OpenAIModel (Responses API) against tests/fake_openai.py over real HTTP: reasoning recognised by
what the API returns (not the model's name), client-executed built-in tools refused by name,
usage details read, ``phase``/``namespace``/``status`` kept on replay, server-side conversation
options refused, the token budget checked before sending."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    Message,
    ModelRequest,
    Runner,
    TextPart,
    TokenBudgetError,
    tool,
)
from loopwright.models.openai import OpenAIModel
from tests.fake_openai import FakeOpenAI, function_call, reasoning, response, text
from tests.helpers import one_tool_agent, openai_on


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def model(fake: FakeOpenAI, name: str = "my-azure-deployment", **kw: Any) -> OpenAIModel:
    return openai_on(fake, name, base_url=fake.base_url, **kw)


def run(m: OpenAIModel, **limits: Any) -> Any:
    return asyncio.run(Runner(one_tool_agent(m, weather, **limits)).run("Weather in Paris?"))


def ask(text_: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", parts=(TextPart(text=text_),))])


@pytest.mark.parametrize("name", ["my-azure-deployment", "gpt-oss-120b"])
def test_a_reasoning_model_is_known_by_its_replies_not_its_name(name: str) -> None:
    script = [
        response(reasoning("Think first."), function_call("call_1", "weather", {"city": "Paris"})),
        response(reasoning("Then again."), function_call("call_2", "weather", {"city": "Lyon"})),
        response(text("Sunny in both.")),
    ]
    with FakeOpenAI(script=script) as fake:
        result = run(model(fake, name))
    assert result.outcome == "final", result.error  # the API answers 404 to an rs_ item it cannot find
    first, second, third = fake.requests
    assert "include" not in first  # nothing said it reasons yet
    assert second["include"] == ["reasoning.encrypted_content"]  # its reply did
    assert not [i for i in second["input"] if i.get("type") == "reasoning"]  # no content: it cannot go back
    kept = [i for i in third["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in kept] == ["enc=="]


def test_the_reasoning_option_asks_for_the_encrypted_content_from_the_first_call() -> None:
    with FakeOpenAI(script=[response(text("hi"))]) as fake:
        asyncio.run(model(fake, reasoning={"effort": "low"}).complete(ask()))
    assert fake.requests[0]["include"] == ["reasoning.encrypted_content"]


@pytest.mark.parametrize(
    ("item", "named"),
    [
        (
            {
                "type": "computer_call",
                "id": "cu_1",
                "call_id": "c1",
                "action": {"type": "click", "x": 1, "y": 2},
                "pending_safety_checks": [],
                "status": "completed",
            },
            "computer_call",
        ),
        (
            {
                "type": "shell_call",
                "id": "sh_1",
                "call_id": "c2",
                "action": {"commands": ["ls"]},
                "status": "completed",
            },
            "shell_call",
        ),
        (
            {
                "type": "apply_patch_call",
                "id": "ap_1",
                "call_id": "c3",
                "operation": {"type": "create_file", "path": "a.py", "diff": "+x"},
                "status": "completed",
            },
            "apply_patch_call",
        ),
        (
            {"type": "custom_tool_call", "id": "ct_1", "call_id": "c4", "name": "grammar_tool", "input": "x"},
            "custom_tool_call) 'grammar_tool'",
        ),
        (
            {
                "type": "mcp_approval_request",
                "id": "mr_1",
                "name": "delete",
                "server_label": "deepwiki",
                "arguments": "{}",
            },
            "mcp_approval_request) 'delete'",
        ),
    ],
)
def test_a_client_executed_built_in_tool_ends_the_run_naming_it(item: dict[str, Any], named: str) -> None:
    with FakeOpenAI(script=[response(item)]) as fake:
        result = run(model(fake))
    assert result.outcome == "failed"
    assert named in str(result.error) and "built-in tool the client executes" in str(result.error)
    assert "the agent has no tool defined as it" in str(result.error)


def test_usage_details_are_read() -> None:
    reply = response(text("hi"), usage={"input_tokens": 100, "cached_tokens": 30, "output_tokens": 20})
    reply["usage"]["input_tokens_details"]["cache_write_tokens"] = 50
    reply["usage"]["output_tokens_details"]["reasoning_tokens"] = 12
    with FakeOpenAI(script=[reply]) as fake:
        got = asyncio.run(model(fake).complete(ask()))
    assert (got.usage.input_tokens, got.usage.cache_read_tokens, got.usage.cache_creation_tokens) == (20, 30, 50)
    assert got.usage.output_tokens == 20 and got.details["reasoning_tokens"] == 12


def test_phase_namespace_and_hosted_status_go_back_as_they_came() -> None:
    said = {**text("Checking the weather."), "phase": "commentary"}
    call = {**function_call("call_1", "weather", {"city": "Paris"}), "namespace": "tools"}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "paris weather"}}  # fmt: skip
    script = [response(said, search, call), response({**text("Sunny."), "phase": "final_answer"})]
    with FakeOpenAI(script=script) as fake:
        result = run(model(fake, "gpt-5.5"))
    assert result.outcome == "final", result.error
    sent = fake.requests[1]["input"]
    message = next(i for i in sent if i.get("role") == "assistant")
    assert message == {"role": "assistant", "content": "Checking the weather.", "phase": "commentary"}
    assert next(i for i in sent if i.get("type") == "function_call")["namespace"] == "tools"
    assert next(i for i in sent if i.get("type") == "web_search_call")["status"] == "completed"
    assert not [i for i in sent if i.get("type") in ("phase", "namespace")]  # marks are never items


@pytest.mark.parametrize("option", ["previous_response_id", "conversation"])
def test_server_side_conversation_options_are_refused_saying_why(option: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{option}: loopwright sends the whole conversation"):
        OpenAIModel("gpt-5.5", **{option: "resp_1"})


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_request_over_the_token_budget_is_refused_before_it_is_sent(api: str) -> None:
    with FakeOpenAI(script=[response(text("never"))]) as fake:
        m = model(fake, api=api)
        request = ModelRequest(messages=[Message(role="user", parts=(TextPart(text="x" * 4000),))], tokens_left=100)
        with pytest.raises(TokenBudgetError, match="left of max_total_tokens; it was not sent"):
            asyncio.run(m.complete(request))
    assert fake.requests == []


def test_a_run_over_its_token_budget_ends_on_it_without_sending() -> None:
    with FakeOpenAI(script=[response(text("never"))]) as fake:
        a = Agent(name="a", model=model(fake), limits=Limits(max_total_tokens=50, salvage=False))
        result = asyncio.run(Runner(a).run("x" * 2000))
    assert (result.outcome, result.limit) == ("limit", "max_total_tokens")
    assert fake.requests == []


def test_foreign_thoughts_and_items_are_never_sent_to_the_responses_api() -> None:
    """Claude's signed thinking, Gemini's thoughts and signatures, a Chat server's reasoning."""
    from loopwright import ProviderPart, ThoughtPart, ToolCall, ToolResult

    history = [
        Message(role="user", parts=(TextPart(text="Weather in Paris?"),)),
        Message(
            role="assistant",
            parts=(
                ThoughtPart(text="claude thinks", signature="sig-claude"),
                ThoughtPart(text="gemini thinks"),
                ProviderPart(provider="gemini", kind="thought_signature", block={"signature": "c2ln"}),
                ProviderPart(provider="openai_chat", kind="reasoning", block={"reasoning_content": "chat thinks"}),
                ToolCall(id="toolu_1", name="weather", args={"city": "Paris"}),
            ),
        ),
        Message(role="user", parts=(ToolResult(call_id="toolu_1", name="weather", content="sunny"),)),
    ]
    with FakeOpenAI(script=[response(text("Sunny."))]) as fake:
        asyncio.run(model(fake, "gpt-5.5").complete(ModelRequest(messages=history)))
    sent = fake.requests[0]["input"]
    assert [i.get("type") or i.get("role") for i in sent] == ["user", "function_call", "function_call_output"]
    assert "thinks" not in str(sent) and "c2ln" not in str(sent)


@tool(provider={"openai": {"type": "custom"}})
def run_sql(input: str) -> str:
    """Run one SQL statement."""
    return f"ran {input}"


def test_a_custom_tool_runs_through_the_agent_s_tool_and_goes_back_as_custom_items() -> None:
    call = {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_c1", "name": "run_sql",
            "input": "SELECT 1"}  # fmt: skip
    with FakeOpenAI(script=[response(call), response(text("One row."))]) as fake:
        a = Agent(name="a", model=model(fake, "gpt-5.5"), tools=[run_sql], limits=Limits(max_model_retries=0))
        result = asyncio.run(Runner(a).run("Count."))
    assert result.outcome == "final", result.error
    assert fake.requests[0]["tools"] == [{"name": "run_sql", "description": "Run one SQL statement.", "type": "custom"}]
    sent = fake.requests[1]["input"]
    assert call in sent  # the call's item goes back as it came
    assert {"type": "custom_tool_call_output", "call_id": "call_c1", "output": "ran SELECT 1"} in sent
    assert not [i for i in sent if i.get("type") in ("function_call", "function_call_output", "client_call")]


@tool(provider={"openai": {"type": "shell"}})
def shell(action: dict[str, Any]) -> str:
    """Run shell commands."""
    return f"ran {' && '.join(action['commands'])}"


@tool(provider={"openai": {"type": "apply_patch"}})
def apply_patch(operation: dict[str, Any]) -> str:
    """Apply a patch."""
    raise ValueError(f"cannot write {operation['path']}")


@tool(provider={"openai": {"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
                           "environment": "browser"}})  # fmt: skip
def computer(action: dict[str, Any], pending_safety_checks: list[Any] | None = None) -> Any:
    """Use the computer."""
    from loopwright import ImagePart

    return ImagePart(media_type="image/png", data="iVBORw0KGgo=") if action["type"] == "screenshot" else "no image"


SHELL = {"type": "shell_call", "id": "sh_1", "call_id": "call_s1", "action": {"commands": ["ls", "pwd"]},
         "status": "completed"}  # fmt: skip
PATCH = {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_p1", "status": "completed",
         "operation": {"type": "create_file", "path": "a.py", "diff": "+x"}}  # fmt: skip
LOOK = {"type": "computer_call", "id": "cu_1", "call_id": "call_k1", "action": {"type": "screenshot"},
        "pending_safety_checks": [], "status": "completed"}  # fmt: skip


def test_client_executed_tools_run_through_the_agent_s_tools_defined_as_them() -> None:
    script = [response(SHELL, PATCH, LOOK), response(text("Done."))]
    with FakeOpenAI(script=script) as fake:
        a = Agent(name="a", model=model(fake, "gpt-5.5"), tools=[shell, apply_patch, computer],
                  limits=Limits(max_model_retries=0))  # fmt: skip
        result = asyncio.run(Runner(a).run("Go."))
    assert result.outcome == "final", result.error
    assert fake.requests[0]["tools"] == [
        {"type": "shell"},
        {"type": "apply_patch"},
        {"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "browser"},
    ]
    sent = fake.requests[1]["input"]
    assert SHELL in sent and PATCH in sent and LOOK in sent
    outputs = {i["type"]: i for i in sent if i.get("type", "").endswith("_output")}
    assert outputs["shell_call_output"] == {"type": "shell_call_output", "call_id": "call_s1", "output": [
        {"stdout": "ran ls && pwd", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}  # fmt: skip
    patched = outputs["apply_patch_call_output"]
    assert patched["status"] == "failed" and "cannot write a.py" in patched["output"]
    assert outputs["computer_call_output"]["output"] == {
        "type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}  # fmt: skip


def test_a_computer_tool_that_returns_no_screenshot_is_named() -> None:
    click = {**LOOK, "action": {"type": "click", "x": 1, "y": 2}}
    with FakeOpenAI(script=[response(click), response(text("never"))]) as fake:
        a = Agent(name="a", model=model(fake, "gpt-5.5"), tools=[computer], limits=Limits(max_model_retries=0))
        result = asyncio.run(Runner(a).run("Click."))
    assert result.outcome == "failed"
    assert "without a screenshot: return an ImagePart" in str(result.error)
