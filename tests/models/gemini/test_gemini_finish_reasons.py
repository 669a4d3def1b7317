"""Every ``FinishReason`` of the installed google-genai SDK ends a Gemini reply as a clear error, a
retry or a cut, never as an empty final answer (over HTTP, through the real SDK)."""

from __future__ import annotations

import pytest
from google.genai import types as genai_types

from loopwright import ModelError
from loopwright.models.gemini.replies import BLOCKED, CUT, ENDED, FAILED, FINISH_REASONS, RETRIED
from tests.fake_gemini import FakeGemini, reply, text
from tests.models.gemini.test_gemini_model import agent, ask, model, run, user

SDK_REASONS = [reason.name for reason in genai_types.FinishReason]


def test_every_finish_reason_of_the_sdk_is_known() -> None:
    """A reason a new SDK adds fails here until it is put in one of the tables."""
    unknown = sorted(set(SDK_REASONS) - FINISH_REASONS)
    assert not unknown, f"finish reasons loopwright does not map: {unknown}; add them to a table in replies.py"
    tables = [ENDED, CUT, BLOCKED, set(RETRIED), set(FAILED)]
    assert sum(len(t) for t in tables) == len(FINISH_REASONS)  # each in one table only


@pytest.mark.parametrize("reason", SDK_REASONS)
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("said", ["", "Part of an answer."])
def test_no_finish_reason_ends_with_an_empty_answer(fake: FakeGemini, reason: str, streamed: bool, said: str) -> None:
    fake.script += [reply(*([text(said)] if said else []), finish=reason)]
    try:
        response, _ = ask(model(fake), user("hi"), streamed=streamed)
    except ModelError as exc:
        assert reason in exc.message or "cut" in exc.message, exc.message  # the error names the reason
        assert exc.retryable == (reason in RETRIED or reason in ENDED)  # (an empty cut says what to raise)
        return
    assert response.text == said != ""  # only a reply with something in it comes back
    expected = "max_tokens" if reason in CUT else "refusal" if reason in BLOCKED else "end_turn"
    assert response.stop_reason == expected


def test_a_malformed_response_is_retried_and_the_run_ends_with_the_answer(fake: FakeGemini) -> None:
    fake.script += [reply(finish="MALFORMED_RESPONSE"), reply(text("Sunny."))]
    result = run(agent(fake, max_model_retries=1))
    assert result.outcome == "final" and result.output == "Sunny."
    assert len(fake.requests) == 2


def test_an_empty_stop_is_retried_not_a_final_answer(fake: FakeGemini) -> None:
    fake.script += [reply(finish="STOP"), reply(text("Sunny."))]
    result = run(agent(fake, max_model_retries=1))
    assert result.outcome == "final" and result.output == "Sunny."


def test_a_continuation_is_a_cut_the_model_is_asked_to_continue(fake: FakeGemini) -> None:
    fake.script += [reply(text("Sunny"), finish="CONTINUATION"), reply(text(" and warm."))]
    result = run(agent(fake))
    assert result.outcome == "final" and result.output.endswith("and warm.")
    assert len(fake.requests) == 2
