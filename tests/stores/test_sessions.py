"""Sessions: a conversation and its scoped state (app:, user:, temp:, the session's own) kept across runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Runner, ScriptedModel, tool
from loopwright.data.errors import ConfigurationError
from loopwright.data.events import ModelRequest, ModelResponse, TextPart
from loopwright.loop.sessions import scope_of, split_end
from loopwright.runtime.tool_context import ToolContext
from loopwright.stores.sessions import DELETED, SessionBusy, SQLiteSessions

APP = "shop"


def echo_model() -> ScriptedModel:
    """Answers with the number of messages it sees and its instruction."""

    def reply(request: ModelRequest) -> ModelResponse:
        text = " | ".join(i.text for i in request.instructions)
        return ModelResponse(parts=(TextPart(text=f"{len(request.messages)} :: {text}"),))

    return ScriptedModel(reply)


@tool
def remember(ctx: ToolContext, key: str, value: str) -> str:
    """Write a state key (the value twice: what is saved is not the call's argument, which the
    conversation keeps)."""
    ctx.state[key] = value * 2
    return "ok"


def writer(writes: dict[str, Any]) -> ScriptedModel:
    """Calls `remember` for each write, then answers."""
    from loopwright.data.events import ToolCall

    calls = [
        [ToolCall(id=f"c{i}", name="remember", args={"key": k, "value": v})] for i, (k, v) in enumerate(writes.items())
    ]
    return ScriptedModel([*calls, "done"])


def test_scopes_two_users_one_app(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    sessions = SQLiteSessions(db)

    async def main() -> None:
        writes = {"app:greeting": "hello all", "user:name": "Ada", "temp:scratch": "TEMPVALUE-123", "topic": "cats"}
        agent = Agent(name="a", model=writer(writes), tools=[remember])
        await Runner(agent, sessions=sessions).run("hi", session=(APP, "u1", "s1"))
        # u1's second session sees app: and user: but not s1's own keys
        r = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "again", session=(APP, "u1", "s2")
        )
        assert r.state["app:greeting"] == "hello allhello all" and r.state["user:name"] == "AdaAda"
        assert "topic" not in r.state and "temp:scratch" not in r.state
        # another user sees app: only
        r = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "hi", session=(APP, "u2", "s1")
        )
        assert r.state["app:greeting"] == "hello allhello all" and "user:name" not in r.state
        # the same session of u1 again: its own key too
        r = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "back", session=(APP, "u1", "s1")
        )
        assert r.state["topic"] == "catscats" and r.state["user:name"] == "AdaAda"
        assert "temp:session" not in r.state  # (which session a run holds is kept beside it: session_of)
        # another app sees nothing of this one
        r = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "hi", session=("other", "u1", "s1")
        )
        assert not any(k.startswith(("app:", "user:")) for k in r.state)
        await sessions.close()

    asyncio.run(main())
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"AdaAda" in raw and b"TEMPVALUE-123TEMPVALUE-123" not in raw


def test_conversation_continues_and_placeholders(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")
    agent = Agent(name="a", model=echo_model(), instruction="You talk to {user:name?}.")
    runner = Runner(agent, sessions=sessions)

    async def main() -> None:
        first = await runner.run("one", session=(APP, "u1", "s1"), state={"user:name": "Ada"})
        assert first.output.startswith("1 ::") and "You talk to Ada." in first.output
        second = await runner.run("two", session=(APP, "u1", "s1"))
        assert second.output.startswith("3 ::") and "Ada" in second.output  # one, reply, two
        other = await runner.run("x", session=(APP, "u1", "s2"))
        assert other.output.startswith("1 ::") and "Ada" in other.output  # user: follows the user
        stranger = await runner.run("x", session=(APP, "u2", "s1"))
        assert stranger.output == "1 :: You talk to ."

    asyncio.run(main())


@pytest.mark.slow
def test_session_busy_on_concurrent_run(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")

    async def slow_reply(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.2)
        return ModelResponse(parts=(TextPart(text="slow"),))

    runner = Runner(Agent(name="a", model=ScriptedModel(slow_reply)), sessions=sessions)

    async def main() -> None:
        first = asyncio.ensure_future(runner.run("one", session=(APP, "u1", "s1")))
        await asyncio.sleep(0.05)
        with pytest.raises(SessionBusy, match="is held by run"):
            await runner.run("two", session=(APP, "u1", "s1"))
        await runner.run("other session is free", session=(APP, "u1", "s2"))
        assert (await first).output == "slow"
        again = await runner.run("three", session=(APP, "u1", "s1"))  # free once the first ended
        assert again.outcome == "final"

    asyncio.run(main())


def test_failed_run_frees_the_session_and_saves_nothing(tmp_path: Path) -> None:
    sessions = SQLiteSessions(tmp_path / "s.db")

    def broken(request: ModelRequest) -> ModelResponse:
        raise KeyboardInterrupt

    async def main() -> None:
        with pytest.raises(KeyboardInterrupt):
            await Runner(Agent(name="a", model=ScriptedModel(broken)), sessions=sessions).run(
                "x", session=(APP, "u1", "s1"), state={"user:k": "v"}
            )
        saved = await sessions.load((APP, "u1", "s1"))
        assert saved is not None and saved.messages == [] and saved.scopes == {}
        r = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "y", session=(APP, "u1", "s1")
        )
        assert r.outcome == "final"

    asyncio.run(main())


def test_bad_session_options(tmp_path: Path) -> None:
    runner = Runner(Agent(name="a", model=ScriptedModel(["ok"])))
    with pytest.raises(ConfigurationError, match="needs a session store"):
        runner.run_sync("x", session=(APP, "u", "s"))
    runner = Runner(Agent(name="a", model=ScriptedModel(["ok", "ok"])), sessions=SQLiteSessions(":memory:"))
    with pytest.raises(ConfigurationError, match="three non-empty strings"):
        runner.run_sync("x", session=(APP, "u"))  # type: ignore[typeddict-item]
    with pytest.raises(ConfigurationError, match="option of run"):
        runner.new_run("x", session=(APP, "u", "s"))
    done = runner.run_sync("x")
    with pytest.raises(ConfigurationError, match="not both"):
        runner.run_sync("x", session=(APP, "u", "s"), after=done)


def test_suspended_run_holds_session_until_resumed(tmp_path: Path) -> None:
    from loopwright import approve
    from loopwright.data.events import ToolCall

    @tool(requires_confirmation=True)
    def pay(ctx: ToolContext, amount: int) -> str:
        """Pay."""
        ctx.state["user:paid"] = amount
        return "paid"

    sessions = SQLiteSessions(tmp_path / "s.db")
    model = ScriptedModel([[ToolCall(id="c1", name="pay", args={"amount": 5})], "done"])
    runner = Runner(Agent(name="a", model=model, tools=[pay]), sessions=sessions)

    async def main() -> None:
        waiting = await runner.run("pay", session=(APP, "u1", "s1"))
        assert waiting.outcome == "suspended"
        with pytest.raises(SessionBusy, match=waiting.run_id):
            await runner.run("again", session=(APP, "u1", "s1"))
        done = await runner.resume(waiting, {"c1": approve()})
        assert done.outcome == "final"
        saved = await sessions.load((APP, "u1", "s1"))
        assert saved is not None and saved.scopes == {"user:paid": 5} and len(saved.messages) == len(done.messages)

    asyncio.run(main())


def test_split_end_keeps_changed_shared_keys_only() -> None:
    started = {"app:a": 1, "user:b": 2, "user:gone": 3}
    own, changed = split_end({"app:a": 1, "user:b": 5, "temp:t": 0, "x": 1, "other:y": 2}, started)
    assert own == {"x": 1, "other:y": 2}
    assert changed == {"user:b": 5, "user:gone": DELETED}
    assert [scope_of(k) for k in ("app:x", "user:x", "temp:x", "x", "misc:x")] == [
        "app",
        "user",
        "temp",
        "session",
        "session",
    ]


keys = st.text("abc", min_size=1, max_size=3)
values = st.integers(0, 9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from(["u1", "u2", "u3"]),
            st.sampled_from(["s1", "s2"]),
            st.dictionaries(keys, values, max_size=3),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_user_scope_never_leaks(tmp_path: Path, runs: list[tuple[str, str, dict[str, int]]]) -> None:
    """Each run writes user:<key>=<user><value>; no run ever sees another user's user: values."""
    sessions = SQLiteSessions(":memory:")

    async def main() -> None:
        for user, sid, writes in runs:
            tagged = {f"user:{k}": f"{user}-{v}" for k, v in writes.items()}
            agent = Agent(name="a", model=writer(tagged), tools=[remember])
            result = await Runner(agent, sessions=sessions).run("go", session=(APP, user, sid))
            for key, value in result.state.items():
                if key.startswith("user:"):
                    assert str(value).startswith(f"{user}-"), (user, key, value)

    asyncio.run(main())


@pytest.mark.slow
def test_session_continues_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    script = textwrap.dedent(
        f"""
        from loopwright import Agent, Runner, ScriptedModel
        from loopwright.data.events import ModelResponse, TextPart
        from loopwright.stores.sessions import SQLiteSessions

        def reply(request):
            return ModelResponse(parts=(TextPart(text=f"seen {{len(request.messages)}}"),))

        runner = Runner(Agent(name="a", model=ScriptedModel(reply)), sessions=SQLiteSessions({str(db)!r}))
        result = runner.run_sync("hello", session=("shop", "u1", "s1"), state={{"user:n": 1}})
        print(result.output, result.state.get("user:n"))
        """
    )
    outs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]  # fmt: skip
    assert outs == ["seen 1 1\n", "seen 3 1\n"]


def test_stored_run_resumed_by_id_by_another_runner_saves_the_session(tmp_path: Path) -> None:
    from loopwright import approve
    from loopwright.data.events import ToolCall
    from loopwright.stores import SQLiteStore

    @tool(requires_confirmation=True)
    def pay(ctx: ToolContext, amount: int) -> str:
        """Pay."""
        ctx.state["user:paid"] = amount
        return "paid"

    def runner(*script: Any) -> Runner:
        model = ScriptedModel(list(script))
        return Runner(
            Agent(name="a", model=model, tools=[pay]),
            store=SQLiteStore(tmp_path / "runs.db"),
            sessions=SQLiteSessions(tmp_path / "runs.db"),
        )

    async def main() -> None:
        waiting = await runner([ToolCall(id="c1", name="pay", args={"amount": 7})]).run(
            "pay", session=(APP, "u1", "s1")
        )
        assert waiting.outcome == "suspended"
        later = runner("done")  # as another process would: the run's id, the same files
        done = await later.resume(waiting.run_id, {"c1": approve()})
        assert done.outcome == "final"
        saved = await later.sessions.load((APP, "u1", "s1"))
        assert saved is not None and saved.scopes == {"user:paid": 7} and saved.messages == done.messages

    asyncio.run(main())


def test_a_run_appends_only_its_new_messages(tmp_path: Path) -> None:
    """Saving a run's end writes its new messages only; a rewritten history is written again."""
    import sqlite3

    from loopwright.data.events import Message
    from loopwright.loop.sessions import kept_of

    db = tmp_path / "s.db"
    sessions = SQLiteSessions(db)
    runner = Runner(Agent(name="a", model=echo_model()), sessions=sessions)

    def rows() -> list[tuple[int, str]]:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT n, body FROM lw_session_messages ORDER BY n").fetchall()

    async def main() -> None:
        await runner.run("one", session=(APP, "u1", "s1"))
        before = rows()
        await runner.run("two", session=(APP, "u1", "s1"))
        after = rows()
        assert [n for n, _ in after] == [0, 1, 2, 3] and after[:2] == before
        saved = await sessions.begin((APP, "u1", "s1"), "hand")
        summary = Message(role="user", parts=(TextPart(text="summary"),))
        await sessions.commit(saved.key, "hand", [summary], {}, {}, "a", kept=kept_of([summary], saved.messages))
        assert [m.text for m in (await sessions.load(saved.key)).messages] == ["summary"]  # type: ignore[union-attr]

    asyncio.run(main())
    assert kept_of([1, 2, 3], [1, 2]) == 2 and kept_of([9, 2], [1, 2]) == 0


KILLED_WORKER = """
import asyncio, sys, time
from pathlib import Path
from loopwright import Agent, Runner, ScriptedModel, tool
from loopwright.data.events import ModelResponse, TextPart, ToolCall
from loopwright.stores import SQLiteStore
from loopwright.stores.sessions import SessionBusy, SQLiteSessions

db, mode, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])

@tool
def work(ctx) -> str:
    "Do the work."
    ctx.state["user:worked"] = mode
    marker.write_text("in the tool")
    if mode == "first":
        time.sleep(60)  # killed here
    return "worked"

def reply(request):
    if any(p.type == "tool_result" for m in request.messages for p in m.parts):
        return ModelResponse(parts=(TextPart(text="done"),))
    return ModelResponse(parts=(ToolCall(id="c1", name="work", args={}),))

async def main():
    sessions = SQLiteSessions(db)
    runner = Runner(Agent(name="a", model=ScriptedModel(reply), tools=[work]), store=SQLiteStore(db), sessions=sessions)
    if mode == "first":
        await runner.run("go", session=("shop", "u1", "s1"), run_id="r1")
        return
    try:
        await runner.run("again", session=("shop", "u1", "s1"))
    except SessionBusy as exc:
        print("busy:", "r1" in str(exc))
    result = await runner.resume("r1")
    saved = await sessions.load(("shop", "u1", "s1"))
    print(result.outcome, saved.scopes, len(saved.messages))

asyncio.run(main())
"""


@pytest.mark.slow
def test_a_killed_session_run_resumed_by_id_saves_the_session(tmp_path: Path) -> None:
    """kill -9 inside a tool of a run in a session: the session stays held by that run (a new
    run is refused), and resuming the run by id in a new process finishes it and saves the session."""
    script, db, marker = tmp_path / "worker.py", tmp_path / "app.db", tmp_path / "marker"
    script.write_text(KILLED_WORKER)
    worker = subprocess.Popen([sys.executable, str(script), str(db), "first", str(marker)])
    deadline = time.monotonic() + 60
    while not marker.exists() and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.poll() is None, "the worker ended before it was killed"
    worker.kill()
    worker.wait()
    done = subprocess.run([sys.executable, str(script), str(db), "second", str(marker)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["busy: True", "final {'user:worked': 'second'} 4"]


def test_a_workflow_runs_in_a_session(tmp_path: Path) -> None:
    """A workflow agent is an agent: its children's outputs (session state) and the user's scope
    are kept by the session, and the next run of the session starts from them."""
    from loopwright.workflows import SequentialAgent, Step

    sessions = SQLiteSessions(tmp_path / "s.db")

    def pipeline(first: str) -> SequentialAgent:
        research = Agent(name="research", model=ScriptedModel([first]))
        write = Agent(name="write", model=echo_model(), instruction="Notes: {user:notes}")
        return SequentialAgent("pipeline", [Step(research, output_key="user:notes"), write])

    async def main() -> None:
        one = await Runner(pipeline("tea is green"), sessions=sessions).run("go", session=(APP, "u1", "s1"))
        assert one.state["user:notes"] == "tea is green" and "write" in one.state
        saved = await sessions.load((APP, "u1", "s1"))
        assert saved is not None and saved.scopes == {"user:notes": "tea is green"} and "write" in saved.state
        other = await Runner(Agent(name="a", model=ScriptedModel(["ok"])), sessions=sessions).run(
            "x", session=(APP, "u1", "s2")
        )
        assert other.state["user:notes"] == "tea is green"

    asyncio.run(main())
