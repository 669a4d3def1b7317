"""Hardening: known secrets (the model's API key, credentials supplied on resume) never leave
the engine: not in results, events, saved states, reprs or tool results."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import Agent, CredentialRequired, ModelError, Runner, ScriptedModel, ToolCall, tool

KEY = "sk-test-0123456789abcdefSECRET"
PLAIN_KEY = "plainkey-without-a-pattern-42"


class Echoing:
    """A model whose error echoes its key (as some HTTP errors do)."""

    def __init__(self, key: str) -> None:
        self.api_key = key

    async def complete(self, request: Any) -> Any:
        raise ModelError(f"401 unauthorized: invalid x-api-key {self.api_key}", status=401, retryable=False)


def _everything(result: Any) -> str:
    return "\n".join(
        [repr(result), result.model_dump_json(), result.run_state.to_json().decode()]
        + [e.model_dump_json() for e in result.events]
    )


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY])
def test_a_model_error_echoing_the_key_is_redacted_everywhere(key: str) -> None:
    result = Runner(Agent(name="m", model=Echoing(key), instruction="M.")).run_sync("go")
    assert result.outcome == "failed" and result.error is not None
    assert "invalid x-api-key [redacted]" in result.error.message
    assert key not in _everything(result)


def test_the_environment_key_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLAIN_KEY)

    class Leaky:
        async def complete(self, request: Any) -> Any:
            raise RuntimeError(f"auth failed for {PLAIN_KEY}")

    result = Runner(Agent(name="m", model=Leaky(), instruction="M.")).run_sync("go")
    assert result.outcome == "failed" and PLAIN_KEY not in _everything(result)


def test_a_credential_echoed_by_a_tool_error_is_redacted() -> None:
    @tool(credentials=True)
    def fetch(x: int, ctx: Any) -> str:
        """Fetches."""
        token = ctx.credentials.get("svc")
        if token is None:
            raise CredentialRequired("svc")
        raise RuntimeError(f"service refused token {token}")

    agent = Agent(
        name="c", model=ScriptedModel([[ToolCall(name="fetch", args={"x": 1})], "done"]), instruction="C.",
        tools=[fetch],
    )  # fmt: skip
    runner = Runner(agent)
    waiting = runner.run_sync("go")
    secret = "credential-value-987654321"
    result = runner.resume_sync(waiting, {waiting.pending[0].call_id: secret})
    assert result.outcome == "final"
    assert secret not in _everything(result)
    assert "service refused token [redacted]" in _everything(result)
