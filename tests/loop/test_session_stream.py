"""Sessions with stream() and start(): held at the first step, saved at the end, kept when suspended, freed on error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Runner, ScriptedModel, approve, tool
from loopwright.data.events import ModelRequest, ModelResponse, TextPart, ToolCall
from loopwright.runtime.tool_context import ToolContext
from loopwright.stores.sessions import SessionBusy, SQLiteSessions

KEY = ("chat", "ada", "s1")


def counting() -> ScriptedModel:
    """Answers with the number of messages it sees."""

    def reply(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=f"seen {len(request.messages)}"),))

    return ScriptedModel(reply)


@tool
def note(ctx: ToolContext, value: str) -> str:
    """Keep a value for the user."""
    ctx.state["user:note"] = value
    return "kept"


async def streamed(runner: Runner, text: str, **options: Any) -> tuple[list[str], Any]:
    stream = runner.stream(text, **options)
    kinds = [event.type async for event in stream]
    return kinds, stream.result


def test_stream_in_a_session_continues_the_conversation(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")
    runner = Runner(Agent(name="a", model=counting()), sessions=sessions)

    async def main() -> None:
        kinds, first = await streamed(runner, "hello", session=KEY, state={"user:name": "Ada"})
        assert first.output == "seen 1" and kinds[0] == "run_started" and kinds[-1] == "run_finished"
        kinds, second = await streamed(runner, "again", session=KEY)
        assert second.output == "seen 3" and second.state["user:name"] == "Ada"
        saved = await sessions.load(KEY)
        assert saved is not None and len(saved.messages) == 4 and saved.scopes == {"user:name": "Ada"}

    asyncio.run(main())


@pytest.mark.slow
def test_stream_on_a_held_session_raises_busy_and_changes_nothing(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")

    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.2)
        return ModelResponse(parts=(TextPart(text="slow"),))

    runner = Runner(Agent(name="a", model=ScriptedModel(slow)), sessions=sessions)

    async def main() -> None:
        first = asyncio.ensure_future(runner.run("one", session=KEY))
        await asyncio.sleep(0.05)
        with pytest.raises(SessionBusy, match="is held by run"):
            await streamed(runner, "two", session=KEY)
        assert len(runner.active_runs) == 1  # the refused run is not left registered
        assert (await first).output == "slow"
        _, again = await streamed(runner, "three", session=KEY)
        assert again.outcome == "final"

    asyncio.run(main())


def test_a_stream_left_early_ends_cancelled_and_frees_the_session(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")

    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(5)
        return ModelResponse(parts=(TextPart(text="late"),))

    runner = Runner(Agent(name="a", model=ScriptedModel(slow)), sessions=sessions)

    async def main() -> None:
        events = runner.stream("one", session=KEY).__aiter__()
        async for event in events:
            if event.type == "state_entered" and event.state == "reason":
                break
        await events.aclose()  # (what leaving an `async with aclosing(...)` block does)
        assert runner.active_runs == []
        saved = await sessions.load(KEY)
        assert saved is not None and [m.role for m in saved.messages] == ["user"]  # cancelled: saved
        again = await Runner(Agent(name="a", model=counting()), sessions=sessions).run("two", session=KEY)
        assert again.outcome == "final"

    asyncio.run(main())


def test_a_failed_stream_saves_nothing_and_frees_the_session(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")

    def broken(request: ModelRequest) -> ModelResponse:
        raise RuntimeError("the model is down")

    model = ScriptedModel([[ToolCall(id="c1", name="note", args={"value": "v"})]])
    runner = Runner(Agent(name="a", model=model, tools=[note]), sessions=sessions)

    async def main() -> None:
        _, done = await streamed(
            Runner(Agent(name="a", model=ScriptedModel(broken)), sessions=sessions), "x", session=KEY
        )
        assert done.outcome == "failed"
        saved = await sessions.load(KEY)
        assert saved is not None and saved.messages == [] and saved.scopes == {}
        # a run that failed after a tool changed user: state saves none of it either
        done = await runner.run("y", session=KEY)
        assert done.outcome == "failed" and done.state["user:note"] == "v"
        saved = await sessions.load(KEY)
        assert saved is not None and saved.messages == [] and saved.scopes == {}
        _, ok = await streamed(Runner(Agent(name="a", model=counting()), sessions=sessions), "z", session=KEY)
        assert ok.output == "seen 1"

    asyncio.run(main())


def test_a_suspended_stream_keeps_the_session_held_until_resumed(tmp_path: Path) -> None:
    @tool(requires_confirmation=True)
    def pay(ctx: ToolContext, amount: int) -> str:
        """Pay."""
        ctx.state["user:paid"] = amount
        return "paid"

    sessions = SQLiteSessions(tmp_path / "s.db")
    model = ScriptedModel([[ToolCall(id="c1", name="pay", args={"amount": 5})], "done"])
    runner = Runner(Agent(name="a", model=model, tools=[pay]), sessions=sessions)

    async def main() -> None:
        _, waiting = await streamed(runner, "pay", session=KEY)
        assert waiting.outcome == "suspended"
        with pytest.raises(SessionBusy, match=waiting.run_id):
            await streamed(runner, "again", session=KEY)
        done = await runner.resume(waiting, {"c1": approve()})
        assert done.outcome == "final"
        saved = await sessions.load(KEY)
        assert saved is not None and saved.scopes == {"user:paid": 5} and len(saved.messages) == len(done.messages)

    asyncio.run(main())


def test_start_in_a_session_driven_by_hand(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")
    runner = Runner(Agent(name="a", model=counting()), sessions=sessions)

    async def main() -> None:
        await runner.run("hello", session=KEY)
        run = runner.start("again", session=KEY)
        await run.step()  # the first step holds the session and starts the run from it
        assert len(run.state.messages) >= 2
        with pytest.raises(SessionBusy):
            await runner.run("meanwhile", session=KEY)
        while not run.done:
            await run.step()
        assert run.result.output == "seen 3"
        saved = await sessions.load(KEY)
        assert saved is not None and len(saved.messages) == 4
        late = runner.start("third", session=KEY)
        result = await late.run_to_end()
        assert result.output == "seen 5"

    asyncio.run(main())


def test_start_in_a_held_session_refuses_at_its_first_step(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")
    runner = Runner(Agent(name="a", model=counting()), sessions=sessions)

    async def main() -> None:
        first = runner.start("one", session=KEY)
        await first.step()
        second = runner.start("two", session=KEY)
        with pytest.raises(SessionBusy):
            await second.step()
        assert runner.active_runs == [first.run_id]
        assert (await first.run_to_end()).outcome == "final"

    asyncio.run(main())
