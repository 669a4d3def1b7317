"""GeminiModel's failures over real HTTP: every error class mapped (retryable or not, Retry-After
honoured, one retry budget), a full context window, an unreachable server, torn and foreign
bodies, and bad input at construction (unknown model, unknown options, a missing key)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types as genai_types

from loopwright import Agent, ConfigurationError, Limits, ModelError, Runner, RunResult
from loopwright.data.errors import ContextWindowError
from loopwright.models.gemini import KNOWN, GeminiModel
from tests import ROOT
from tests.fake_gemini import MODEL, Cut, Error, FakeGemini, Raw, call, reply, text
from tests.models.gemini.test_gemini_model import agent, ask, model, run, user


def error_of(fake: FakeGemini, item: Any, *, streamed: bool = False) -> ModelError:
    fake.script.append(item)
    with pytest.raises(ModelError) as caught:
        ask(model(fake), user("hi"), streamed=streamed)
    return caught.value


# ---------------------------------------------------------------- every error class


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (403, False), (404, False), (408, True), (429, True), (500, True), (503, True), (504, True)],
)
def test_every_status_is_mapped(fake: FakeGemini, status: int, retryable: bool, streamed: bool) -> None:
    error = error_of(fake, Error(status, "scripted failure"), streamed=streamed)
    assert type(error) is ModelError and error.status == status and error.retryable is retryable
    assert f"Gemini API error {status}" in error.message and "scripted failure" in error.message


@pytest.mark.parametrize(
    ("item", "wait"),
    [
        (Error(429, "Resource exhausted", retry_after="7"), 7.0),
        (Error(429, "Quota exceeded", retry_delay="12s"), 12.0),
        (Error(503, "overloaded", retry_after="1.5"), 1.5),
        (Error(429, "no wait said"), None),
    ],
)
def test_the_wait_the_api_asked_for_is_kept(fake: FakeGemini, item: Error, wait: float | None) -> None:
    error = error_of(fake, item)
    assert error.retryable and error.retry_after == wait


def test_one_retry_budget_on_the_engine_edge_honouring_retry_after(fake: FakeGemini) -> None:
    fake.script += [Error(429, "slow down", retry_after="0.3"), reply(text("after the wait"))]
    started = time.monotonic()
    result = run(agent(fake, max_model_retries=1))
    assert result.outcome == "final" and result.output == "after the wait"
    assert time.monotonic() - started >= 0.3  # the engine's backoff is 0 here: Retry-After set the wait
    assert len(fake.requests) == 2


def test_a_given_client_with_sdk_retries_still_sends_once_per_attempt(fake: FakeGemini) -> None:
    """The SDK's own retries are off for every request, whatever the client says."""
    retrying = genai_types.HttpRetryOptions(attempts=5, initial_delay=0.01, max_delay=0.01)
    client = genai.Client(
        api_key="test-key", http_options=genai_types.HttpOptions(base_url=fake.base_url, retry_options=retrying)
    )
    fake.script += [Error(503, "overloaded"), Error(503, "overloaded"), reply(text("late"))]
    result = run(agent(fake, model=GeminiModel(MODEL, client=client), max_model_retries=0))
    assert result.outcome == "failed" and result.error is not None and result.error.status == 503
    assert len(fake.requests) == 1


def test_retries_spent_fail_with_the_last_error(fake: FakeGemini) -> None:
    fake.script += [Error(500, "boom")] * 3
    result = run(agent(fake, max_model_retries=2))
    assert result.outcome == "failed" and result.error is not None and "boom" in result.error.message
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    "message",
    [
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        "Request payload size exceeds the limit: too many tokens in the context window",
    ],
)
def test_a_full_context_window_takes_the_token_budget_edge(fake: FakeGemini, message: str) -> None:
    error = error_of(fake, Error(400, message))
    assert isinstance(error, ContextWindowError) and error.status == 400 and not error.retryable
    fake.script.append(Error(400, message))
    result = run(agent(fake, limits={"salvage": False}))
    assert result.outcome == "limit"


def test_a_bad_key_names_the_environment_variable(fake: FakeGemini) -> None:
    bad = Error(400, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID")
    error = error_of(fake, bad)
    assert not error.retryable and "GEMINI_API_KEY" in error.message and "API key not valid" in error.message


def test_an_html_page_is_named_as_such(fake: FakeGemini) -> None:
    page = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    error = error_of(fake, Raw(502, page))
    assert error.retryable and error.status == 502
    assert "HTML page (502 Bad Gateway)" in error.message and "<body>" not in error.message


@pytest.mark.parametrize("streamed", [False, True])
def test_a_body_that_is_not_a_gemini_reply_is_retryable(fake: FakeGemini, streamed: bool) -> None:
    error = error_of(fake, Raw(200, "{not json", content_type="application/json"), streamed=streamed)
    assert error.retryable


def test_a_stream_that_breaks_off_is_retryable_and_nothing_of_it_is_kept(fake: FakeGemini) -> None:
    body = reply(text("A long answer that never ends properly."))
    fake.script += [Cut(body, chunks=2), reply(text("whole"))]
    a = agent(fake, max_model_retries=1)

    async def go() -> RunResult:
        s = Runner(a).stream("hi")
        async for _ in s:
            pass
        return s.result

    result = asyncio.run(go())
    assert result.outcome == "final" and result.output == "whole" and len(fake.requests) == 2
    errors = [e.error for e in result.events if e.type == "error_occurred"]
    assert errors and errors[0].retryable


def test_an_unreachable_server_is_retryable_then_fails_naming_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GeminiModel(MODEL, api_key="k", base_url=url)
    result = Runner(Agent(name="g", model=m, limits=Limits(max_model_retries=1, retry_backoff_s=0))).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None
    assert f"could not reach {url}" in result.error.message and result.error.retryable
    assert "Traceback" not in result.error.message
    errors = [e.error for e in result.events if e.type == "error_occurred"]
    assert len(errors) == 2 and all(e.retryable for e in errors)


def test_a_missing_key_is_one_line_naming_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = Runner(Agent(name="g", model=GeminiModel(MODEL))).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None and not result.error.retryable
    assert "GEMINI_API_KEY" in result.error.message and "GOOGLE_API_KEY" in result.error.message
    assert "\n" not in result.error.message


# ---------------------------------------------------------------- bad input at construction


def test_an_unknown_model_warns_naming_the_known_ones_and_is_used() -> None:
    with pytest.warns(UserWarning, match="not a Gemini model loopwright knows") as caught:
        m = GeminiModel("gemini-9-ultra", api_key="k")
    assert all(name in str(caught[0].message) for name in KNOWN)
    assert m.model == "gemini-9-ultra"


def test_a_known_model_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GeminiModel(MODEL, api_key="k")
        GeminiModel(f"models/{MODEL}", api_key="k")


def test_an_unknown_option_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option.*'temprature'.*valid options:.*temperature"):
        GeminiModel(MODEL, api_key="k", temprature=0.2)
    with pytest.raises(ConfigurationError, match=r"loopwright sets itself.*'tool_config'"):
        GeminiModel(MODEL, api_key="k", tool_config={})
    with pytest.raises(ConfigurationError, match=r"candidate_count.*one candidate"):
        GeminiModel(MODEL, api_key="k", candidate_count=2)


def test_unknown_model_settings_are_refused_when_the_request_is_made(fake: FakeGemini) -> None:
    a = Agent(name="g", model=model(fake), model_settings={"max_tokens": 5})
    result = Runner(a).run_sync("hi")
    assert result.outcome == "failed" and result.error is not None
    assert "the agent's model_settings got unknown option(s) 'max_tokens'" in result.error.message
    assert not fake.requests


def test_parallel_tool_calls_false_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match="no switch for parallel function calls"):
        GeminiModel(MODEL, api_key="k", parallel_tool_calls=False)
    GeminiModel(MODEL, api_key="k", parallel_tool_calls=True)  # what the API does anyway


def test_client_and_key_together_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"client= and api_key="):
        GeminiModel(MODEL, client=genai.Client(api_key="k"), api_key="k")
    with pytest.raises(ConfigurationError, match=r"client must be a google\.genai Client"):
        GeminiModel(MODEL, client="a client")  # type: ignore[arg-type]


# ---------------------------------------------------------------- clients and event loops


def test_one_model_serves_many_event_loops_and_closes_its_clients(fake: FakeGemini) -> None:
    fake.script += [reply(text("one")), reply(text("two"))]
    a = agent(fake)
    assert [Runner(a).run_sync("hi").output for _ in range(2)] == ["one", "two"]
    assert isinstance(a.model, GeminiModel) and not a.model._own  # both loops closed their client


def test_a_given_client_in_a_second_event_loop_is_a_clear_error(fake: FakeGemini) -> None:
    client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=fake.base_url))
    fake.script += [reply(text("one"))]
    a = agent(fake, model=GeminiModel(MODEL, client=client))
    assert Runner(a).run_sync("hi").output == "one"
    second = Runner(a).run_sync("hi")
    assert second.outcome == "failed" and second.error is not None and "another event loop" in second.error.message


def test_a_client_factory_is_called_once_per_loop(fake: FakeGemini) -> None:
    made: list[Any] = []

    def factory() -> genai.Client:
        made.append(genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=fake.base_url)))
        return made[-1]

    fake.script += [call_reply(), reply(text("done"))]
    result = run(agent(fake, model=GeminiModel(MODEL, client=factory)))
    assert result.output == "done" and len(made) == 1


def call_reply() -> dict[str, Any]:
    return reply(call("weather", {"city": "Paris"}, id_="a"))


# ---------------------------------------------------------------- imports


@pytest.mark.slow
def test_importing_loopwright_does_not_import_the_sdk() -> None:
    code = "import loopwright, sys; from loopwright import Agent; assert 'google.genai' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.slow
def test_a_missing_sdk_is_one_line_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['google.genai'] = None\n"
        "try:\n    from loopwright.models.gemini import GeminiModel\n"
        "except ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "pip install 'loopwright[gemini]'" in done.stdout and done.stdout.count("\n") == 1


@pytest.mark.slow
def test_a_first_gemini_program_reads_the_key_and_url_from_the_environment(fake: FakeGemini, tmp_path: Path) -> None:
    """A user's script in a fresh interpreter: GeminiModel() with GEMINI_API_KEY and
    GOOGLE_GEMINI_BASE_URL set, a tool round trip over HTTP; without the key, one line."""
    from tests.user_path.test_user_path import run_script

    script = """
    from loopwright import Agent, Runner, tool
    from loopwright.models.gemini import GeminiModel

    @tool
    def weather(city: str) -> str:
        \"\"\"Weather in a city.\"\"\"
        return f"sunny in {city}"

    result = Runner(Agent(name="g", model=GeminiModel(), tools=[weather])).run_sync("Weather in Paris?")
    print(result.outcome, "|", result.output or result.error.message)
    """
    fake.script += [reply(call("weather", {"city": "Paris"}, id_="fc_1")), reply(text("Sunny in Paris."))]
    env = {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url, "GOOGLE_API_KEY": ""}
    done = run_script(script, tmp_path, env=env)
    assert done.stdout == "final | Sunny in Paris.\n" and len(fake.requests) == 2
    assert fake.headers[0]["x-goog-api-key"] == "test-key"
    unset = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "app.py")], env=unset, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("failed | GEMINI_API_KEY is not set")
    assert done.stdout.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_request_over_what_is_left_of_the_token_budget_is_not_sent(fake: FakeGemini) -> None:
    from loopwright import Message, ModelRequest, TextPart, TokenBudgetError

    request = ModelRequest(messages=[Message(role="user", parts=(TextPart(text="word " * 400),))], tokens_left=50)
    with pytest.raises(TokenBudgetError, match="it was not sent"):
        ask(model(fake), request, streamed=False)
    assert not fake.requests
    fake.script.append(reply(text("fits")))
    assert ask(model(fake), request.model_copy(update={"tokens_left": 5000}), streamed=False)[0].text == "fits"
