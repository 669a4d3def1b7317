"""Fallback models: a call that failed for good takes the bounded fallback row to the agent's next model."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelError,
    ModelRequest,
    ModelResponse,
    ResumeError,
    Runner,
    RunResult,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    approve,
    diagram,
    tool,
    verify,
)
from loopwright.data.events import ModelResponded, ModelSwitched, StateEntered
from loopwright.features import BUILT_IN_MACHINES, machine_for
from loopwright.stores import SQLiteStore
from loopwright.table.machine import CORE
from tests.helpers import add

FALLBACK_ROW = "reason -> reason (has_failed_model & fallback_left) [bounded: max_fallbacks]"


class Down:
    """A model that always fails: a 503 (retryable) or a 404 (not)."""

    def __init__(self, name: str, status: int = 503) -> None:
        self.name, self.status, self.calls = name, status, 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise ModelError(f"{self.name} is down", status=self.status, retryable=self.status >= 500)


def agent(model: Any, *fallbacks: Any, **limits: Any) -> Agent:
    limits.setdefault("retry_backoff_s", 0)
    return Agent(name="a", model=model, fallback_models=list(fallbacks), limits=Limits(**limits))


def run(a: Agent, text: str = "hi") -> RunResult:
    return asyncio.run(asyncio.wait_for(Runner(a).run(text), 20))


def rows_taken(result: RunResult) -> list[str]:
    return [f"{e.source} -> {e.state} ({e.guard})" for e in result.events if isinstance(e, StateEntered)]


def test_the_first_model_fails_for_good_and_the_second_answers() -> None:
    first, second = Down("primary"), ScriptedModel(["hello from backup"], name="backup")
    result = run(agent(first, second, max_model_retries=2))
    assert result.outcome == "final", result.error
    assert result.output == "hello from backup"
    assert first.calls == 3  # its retries spent first
    assert "reason -> reason (has_failed_model & fallback_left)" in rows_taken(result)
    assert result.models_used == ["primary", "backup"]
    switched = [e for e in result.events if isinstance(e, ModelSwitched)]
    assert [(e.from_model, e.to_model) for e in switched] == [("primary", "backup")]
    assert "primary is down" in switched[0].error.message
    answered = [e.response.model for e in result.events if isinstance(e, ModelResponded)]
    assert answered == ["backup"]  # the event log names the model that answered the step
    assert result.iterations == 1  # a switch is not a new step


def test_with_max_fallbacks_0_the_run_fails_as_before() -> None:
    first, second = Down("primary"), ScriptedModel(["never"], name="backup")
    result = run(agent(first, second, max_model_retries=1, max_fallbacks=0))
    assert result.outcome == "failed"
    assert result.error is not None and "primary is down" in result.error.message
    assert second.remaining == 1
    assert result.models_used == ["primary"]
    assert not any("fallback_left" in r for r in rows_taken(result))


def test_without_fallback_models_a_failed_call_fails_the_run_as_before() -> None:
    result = run(Agent(name="a", model=Down("primary"), limits=Limits(retry_backoff_s=0, max_model_retries=1)))
    assert result.outcome == "failed"
    assert result.trace[-2:] == ["reason", "failed"]
    assert result.models_used == ["primary"]


def test_a_non_retryable_error_falls_back_only_when_fallback_on_lists_it() -> None:
    backup = ScriptedModel(["ok"], name="backup")
    plain = run(agent(Down("primary", status=404), backup))
    assert plain.outcome == "failed"  # a 404 is the caller's mistake: not a reason to switch, unless asked
    listed = Agent(name="a", model=Down("primary", status=404), fallback_models=[backup], fallback_on=[404])
    result = run(listed)
    assert result.outcome == "final" and result.output == "ok"
    by_type = Agent(
        name="a",
        model=Down("primary", status=404),
        fallback_models=[ScriptedModel(["ok"], name="b2")],
        fallback_on=[ModelError],
    )
    assert run(by_type).outcome == "final"


def test_each_model_gets_its_own_retries_and_the_chain_goes_in_order() -> None:
    one, two, three = Down("one"), Down("two"), ScriptedModel(["third"], name="three")
    result = run(agent(one, two, three, max_model_retries=1))
    assert result.outcome == "final" and result.output == "third"
    assert (one.calls, two.calls) == (2, 2)
    assert result.models_used == ["one", "two", "three"]
    assert result.run_state.charges["max_fallbacks"] == 2


def test_after_a_switch_the_run_stays_on_the_fallback_model() -> None:
    calls: list[str] = []

    def primary(request: ModelRequest) -> ModelResponse:
        calls.append("primary")
        if len(calls) > 1:
            raise ModelError("overloaded", status=529, retryable=True)
        return ModelResponse(parts=(ToolCall(name="add", args={"a": 1, "b": 2}),), model="primary-1")

    def backup(request: ModelRequest) -> ModelResponse:
        calls.append("backup")
        if len(request.messages) < 4:
            return ModelResponse(parts=(ToolCall(name="add", args={"a": 2, "b": 2}),))
        return ModelResponse(parts=(TextPart(text="7"),))

    a = Agent(
        name="a",
        model=ScriptedModel(primary, name="primary"),
        fallback_models=[ScriptedModel(backup, name="backup")],
        tools=[add],
        limits=Limits(retry_backoff_s=0, max_model_retries=0),
    )
    result = run(a)
    assert result.outcome == "final", result.error
    assert calls == ["primary", "primary", "backup", "backup"]
    assert result.models_used == ["primary", "backup"]
    answered = [e.response.model for e in result.events if isinstance(e, ModelResponded)]
    assert answered == ["primary-1", "backup", "backup"]


def test_the_row_is_in_the_table_drawn_and_verified() -> None:
    assert FALLBACK_ROW in [str(r) for r in CORE.rows]
    for machine in BUILT_IN_MACHINES.values():
        assert verify(machine).ok, verify(machine)
    assert "has_failed_model & fallback_left [bounded: max_fallbacks]" in diagram(CORE)


def test_an_agent_without_fallback_models_runs_on_the_same_machine() -> None:
    plain = Agent(name="a", model=ScriptedModel(["x"]))
    with_fallback = Agent(name="a", model=ScriptedModel(["x"]), fallback_models=[ScriptedModel(["y"])])
    assert machine_for(plain) is machine_for(with_fallback)


@pytest.mark.parametrize(
    ("options", "wrong"),
    [
        ({"fallback_models": ["gpt"]}, "fallback_models"),
        ({"fallback_on": ["404"]}, "fallback_on"),
        ({"fallback_on": [404.0]}, "fallback_on"),
        ({"fallback_on": [ValueError]}, None),
    ],
)
def test_bad_fallback_options_are_refused_with_one_line(options: dict[str, Any], wrong: str | None) -> None:
    if wrong is None:
        Agent(name="a", model=ScriptedModel(["x"]), **options)
        return
    with pytest.raises(ConfigurationError, match=wrong) as caught:
        Agent(name="a", model=ScriptedModel(["x"]), **options)
    assert "\n" not in str(caught.value)


def test_a_saved_run_resumes_on_the_model_it_was_on() -> None:
    rs = RunState(run_id="r", agent="a", input="hi")
    rs.fallbacks = {"a": 1}
    rs.models_used = ["primary", "backup"]
    loaded = RunState.from_json(rs.to_json())
    assert loaded.fallbacks == {"a": 1}
    assert loaded.models_used == ["primary", "backup"]


def test_replace_keeps_the_fallback_options() -> None:
    a = Agent(name="a", model=ScriptedModel(["x"]), fallback_models=[ScriptedModel(["y"])], fallback_on=[404])
    b = a.replace(name="b")
    assert len(b.fallback_models) == 1 and b.fallback_on == (404,)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failing=st.integers(1, 4), max_fallbacks=st.integers(0, 5), retries=st.integers(0, 2), answers=st.booleans())
def test_n_failing_models_end_within_bounds(failing: int, max_fallbacks: int, retries: int, answers: bool) -> None:
    """With N failing models (and perhaps one that answers last), any max_fallbacks: the run ends,
    takes at most max_fallbacks fallback rows, calls each model at most 1 + retries times."""
    downs = [Down(f"m{i}") for i in range(failing)]
    last = [ScriptedModel(["ok"], name="last")] if answers else []
    models: list[Any] = [*downs, *last]
    a = agent(models[0], *models[1:], max_model_retries=retries, max_fallbacks=max_fallbacks)
    result = run(a)
    switches = sum(1 for r in rows_taken(result) if "fallback_left" in r)
    assert switches <= max_fallbacks
    assert switches == min(max_fallbacks, len(models) - 1)
    assert all(d.calls <= 1 + retries for d in downs)
    reached = 1 + switches
    assert result.models_used == [getattr(m, "name", "") for m in models[:reached]]
    if answers and max_fallbacks >= failing:
        assert result.outcome == "final"
    else:
        assert result.outcome == "failed"


@tool(requires_confirmation=True)
def pay(amount: int) -> str:
    """Pay an amount (asks a person first)."""
    return f"paid {amount}"


def _paying_backup() -> ScriptedModel:
    def answer(request: ModelRequest) -> ModelResponse:
        if len(request.messages) < 3:
            return ModelResponse(parts=(ToolCall(name="pay", args={"amount": 5}),))
        return ModelResponse(parts=(TextPart(text="paid"),))

    return ScriptedModel(answer, name="backup")


def test_a_durable_run_resumes_on_the_model_it_was_on(tmp_path: Path) -> None:
    """Saved in SQLite while waiting on the fallback model; resumed by id in a fresh Runner (a
    fresh agent, as a new process has): the primary model is not called again."""
    db = tmp_path / "runs.db"

    def make(primary: Down) -> Agent:
        return Agent(
            name="a",
            model=primary,
            fallback_models=[_paying_backup()],
            tools=[pay],
            limits=Limits(retry_backoff_s=0, max_model_retries=0),
        )

    first = asyncio.run(Runner(make(Down("primary")), store=SQLiteStore(db)).run("go", run_id="r1"))
    assert first.outcome == "suspended", first.error
    assert first.models_used == ["primary", "backup"]
    again = Down("primary")
    decisions = {first.pending[0].call_id: approve()}
    result = asyncio.run(Runner(make(again), store=SQLiteStore(db)).resume("r1", decisions))
    assert result.outcome == "final" and result.output == "paid"
    assert again.calls == 0  # it resumed on the fallback model
    assert result.models_used == ["primary", "backup"]
    assert result.run_state.fallbacks == {"a": 1}


def test_a_saved_run_on_a_fallback_the_agent_no_longer_has_fails_with_the_reason() -> None:
    rs = RunState(run_id="r", agent="a", input="hi")
    rs.fallbacks = {"a": 2}
    loaded = RunState.from_json(rs.to_json())
    a = Agent(name="a", model=ScriptedModel(["x"]), fallback_models=[ScriptedModel(["y"])])
    from loopwright.runtime.model_call import current_model

    class Ctx:
        agent = a

    with pytest.raises(ResumeError, match="fallback model 2 of agent 'a'"):
        current_model(loaded, Ctx())  # type: ignore[arg-type]


# ---------------------------------------------------------------- across providers, over HTTP


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _gemini(fake: Any, name: str) -> Any:
    import warnings

    from loopwright.models.gemini import GeminiModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GeminiModel(name, api_key="test-key", base_url=fake.base_url)


def test_claude_falls_back_into_gemini_3_in_the_middle_of_a_tool_loop() -> None:
    """The issue's acceptance: Claude calls a tool (with signed thinking), then fails for good;
    Gemini 3 takes the current turn, whose call it did not make. The Gemini fake refuses unsigned
    calls as the API does (400 "Function call is missing a thought_signature"): the call goes
    with Google's placeholder signature and Claude's thinking stays with Claude."""
    import anthropic

    from loopwright.models.anthropic import AnthropicModel
    from tests.fake_claude import Error, FakeClaude, message, thinking, tool_use
    from tests.fake_gemini import PLACEHOLDER, FakeGemini, reply, text

    with FakeClaude() as claude, FakeGemini() as gemini:
        claude.script += [
            message(
                thinking("I should look x up.", "c2lnLWNsYXVkZQ=="),
                tool_use("toolu_1", "lookup", {"q": "x"}),
                stop_reason="tool_use",
            ),
            Error(529, "overloaded_error", "Overloaded"),
        ]
        gemini.script += [reply(text("It is x."))]
        first = AnthropicModel(
            "claude-sonnet-5-5", client=anthropic.AsyncAnthropic(base_url=claude.base_url, api_key="k")
        )
        a = Agent(
            name="a",
            model=first,
            fallback_models=[_gemini(gemini, "gemini-3-flash-preview")],
            tools=[lookup],
            limits=Limits(max_model_retries=0, retry_backoff_s=0),
        )
        result = run(a, "Find x.")
    assert result.outcome == "final", result.error
    assert result.output == "It is x."
    (sent,) = gemini.requests
    model_turn = sent["contents"][1]
    assert model_turn["role"] == "model"
    (call_part,) = [p for p in model_turn["parts"] if "functionCall" in p]
    assert call_part["functionCall"]["name"] == "lookup"
    assert base64.b64decode(call_part["thoughtSignature"]).decode() == PLACEHOLDER
    assert "I should look x up." not in str(sent)  # Claude's thinking is not Gemini's


def test_gemini_falls_back_to_another_gemini_model_without_its_signatures() -> None:
    """A signature one Gemini model made is refused by another ("Corrupted thought signature."):
    it is dropped, and the call gets the placeholder on Gemini 3."""
    from tests.fake_gemini import Error, FakeGemini, call, reply, text

    with FakeGemini() as fake:
        fake.script += [
            reply(text("Thinking", thought=True, signature=b"pro-1"), call("lookup", {"q": "y"}, signature=b"pro-2")),
            Error(503, "overloaded"),
            reply(text("It is y.")),
        ]
        a = Agent(
            name="a",
            model=_gemini(fake, "gemini-3-pro-preview"),
            fallback_models=[_gemini(fake, "gemini-3-flash-preview")],
            tools=[lookup],
            limits=Limits(max_model_retries=0, retry_backoff_s=0),
        )
        result = run(a, "Find y.")
    assert result.outcome == "final", result.error
    last = fake.requests[-1]
    sent = str(last)
    assert "cHJvLTE=" not in sent and "cHJvLTI=" not in sent  # base64 of pro-1, pro-2: the other model's
    assert fake.paths[-1].endswith("gemini-3-flash-preview:generateContent")


def test_gemini_falls_back_into_claude_with_thinking_in_the_middle_of_a_tool_loop() -> None:
    """Claude with thinking on refuses a last tool turn that does not start with its thinking
    (the Claude fake says so as the API does): the request after another provider's tool turn
    goes without ``thinking``; Gemini's thoughts and signatures are not sent to Claude."""
    import anthropic

    from loopwright.models.anthropic import AnthropicModel
    from tests.fake_claude import FakeClaude, message
    from tests.fake_claude import text as claude_text
    from tests.fake_gemini import Error, FakeGemini, call, reply, text

    with FakeClaude() as claude, FakeGemini() as gemini:
        gemini.script += [
            reply(text("Gemini ponders.", thought=True), call("lookup", {"q": "z"}, signature=b"gem-sig")),
            Error(503, "overloaded"),
        ]
        claude.script += [message(claude_text("It is z."))]
        client = anthropic.AsyncAnthropic(base_url=claude.base_url, api_key="k")
        thinking = {"type": "enabled", "budget_tokens": 2048}
        a = Agent(
            name="a",
            model=_gemini(gemini, "gemini-3-flash-preview"),
            fallback_models=[AnthropicModel("claude-sonnet-4-5", client=client, max_tokens=8192, thinking=thinking)],
            tools=[lookup],
            limits=Limits(max_model_retries=0, retry_backoff_s=0),
        )
        result = run(a, "Find z.")
    assert result.outcome == "final", result.error
    assert result.output == "It is z."
    (sent,) = claude.requests
    assert "thinking" not in sent
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]
    assert "Gemini ponders" not in str(sent) and base64.b64encode(b"gem-sig").decode() not in str(sent)
