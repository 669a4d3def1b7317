"""Issue 42, N2: a run that cannot be kept as it is ends with its outcome in the store, and a
resume calls no model again (a lone surrogate in streamed model text; a live object in state)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, ResumeError, Runner, ToolCall, tool
from loopwright.data.events import ModelRequest, ModelResponse, TextPart
from loopwright.models.base import StreamDelta
from loopwright.runtime.context import RunContext
from loopwright.stores import RunStore, SQLiteStore

PG = pytest.param("postgres", marks=pytest.mark.postgres)
STORES = ["sqlite", PG]


class Counting:
    """A model that counts its calls: it streams a delta holding a lone surrogate, then replies
    with ``script``'s next reply (text or tool calls)."""

    name = "counting"

    def __init__(self, *script: Any) -> None:
        self.calls = 0
        self.script = list(script)

    def _next(self) -> ModelResponse:
        self.calls += 1
        item = self.script.pop(0) if self.script else "done"
        if isinstance(item, str):
            return ModelResponse(parts=(TextPart(text=item),))
        return ModelResponse(parts=tuple(item))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self._next()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        yield StreamDelta(text="bad \ud800 ")
        yield self._next()


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> RunStore:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "runs.db")
    from loopwright.stores.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_url"))


async def streamed(runner: Runner, text: str) -> Any:
    stream = runner.stream(text)
    async for _ in stream:
        pass
    return stream.result


@pytest.mark.parametrize("kind", STORES)
def test_a_lone_surrogate_in_streamed_text_is_kept_and_a_resume_calls_no_model(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def main() -> None:
        store = make_store(kind, tmp_path, request)
        model = Counting("bad \ud800 text")
        runner = Runner(Agent(name="a", model=model), store=store)
        result = await streamed(runner, "hi")
        saved = await store.load(result.run_id)
        assert saved is not None
        assert (saved.outcome, saved.stage) == (result.outcome, result.run_state.stage)
        assert result.outcome == "final" and model.calls == 1
        for _ in range(2):
            with pytest.raises(ResumeError, match="has ended"):
                await runner.resume(result.run_id)
        assert model.calls == 1
        events = await store.events(result.run_id)
        assert any(b"bad \\ufffd" in e or "bad \ufffd".encode() in e for e in events)
        await store.close()

    asyncio.run(main())


class Client:
    """A live object (no JSON value)."""


@tool
def stash(ctx: RunContext) -> str:
    """Keep a client in the state (which cannot be saved)."""
    ctx.state["client"] = Client()
    return "kept"


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("streaming", [False, True])
def test_a_run_whose_state_cannot_be_saved_is_stored_failed_and_not_run_again(
    kind: str, streaming: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def main() -> None:
        store = make_store(kind, tmp_path, request)
        model = Counting([ToolCall(id="c1", name="stash", args={})], "done")
        runner = Runner(Agent(name="a", model=model, tools=[stash]), store=store)
        result = await (streamed(runner, "go") if streaming else runner.run("go"))
        assert result.outcome == "failed" and result.error is not None
        assert "session state key 'client'" in result.error.message and "deps=" in result.error.message
        calls = model.calls
        saved = await store.load(result.run_id)
        assert saved is not None and saved.outcome == "failed"
        assert b"Client: not saved" in saved.head
        for _ in range(2):
            with pytest.raises(ResumeError, match="has ended"):
                await runner.resume(result.run_id)
        assert model.calls == calls
        await store.close()

    asyncio.run(main())
