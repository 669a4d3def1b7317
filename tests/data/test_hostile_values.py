"""Hostile values (issue 24): lone surrogates in tool results and model text are replaced, ints too long and
values nested too deep are error results, the same with and without a store, so what is saved can be read back."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from loopwright import Agent, ResumeError, Runner, RunState, ScriptedModel, ToolCall, tool
from loopwright.cli.trace_page import write_trace_page
from loopwright.data.events import ModelRequest, ModelResponse, TextPart, ThoughtPart, ToolResult
from loopwright.data.values import MAX_DEPTH, MAX_INT_DIGITS
from loopwright.durable.checkpoint import rebuild
from loopwright.models.scripted import to_response
from loopwright.runtime.tools import to_json_value
from loopwright.stores import RunStore, SQLiteStore
from loopwright.testing import assert_run_invariants

CHARGED: list[int] = []
# the store is made in the test (request.getfixturevalue), so conftest cannot mark it by its fixtures
PG = pytest.param("postgres", marks=pytest.mark.postgres)
STORES = ["none", "sqlite", "sqlite-thread", PG]


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> RunStore | None:
    if kind == "none":
        return None
    if kind == "postgres":
        from loopwright.stores.postgres import PostgresStore

        return PostgresStore(request.getfixturevalue("pg_url"))
    return SQLiteStore(tmp_path / "runs.db", thread=kind == "sqlite-thread")


def _charging(value: Any) -> Agent:
    @tool
    def charge(amount: int) -> Any:
        """Charge the card."""
        CHARGED.append(amount)
        return value() if isinstance(value, type) else value

    script = [[ToolCall(id="c1", name="charge", args={"amount": 5})], "charged"]
    return Agent(name="shop", model=ScriptedModel(script), instruction="Shop.", tools=[charge])


def _result(run: Any) -> ToolResult:
    (answer,) = [p for m in run.messages for p in m.parts if isinstance(p, ToolResult)]
    return answer


def _ran_once(value: Any, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ToolResult:
    """Run the charging agent on ``kind`` of store: it ends, the tool ran once, what was saved
    loads back as it was, and a resume says the run has ended (the tool does not run again)."""
    CHARGED.clear()
    store = _store(kind, tmp_path, request)
    agent = _charging(value)

    async def go() -> ToolResult:
        runner = Runner(agent, store=store)
        run = await runner.run("charge it", run_id="r1")
        assert run.outcome == "final", run.error
        assert_run_invariants(run, agent)
        answer = _result(run)
        if store is not None:
            saved = await store.load("r1")
            assert saved is not None
            assert _result(rebuild(saved)) == answer
            with pytest.raises(ResumeError, match="has ended"):
                await runner.resume("r1")
            await store.close()
        assert RunState.from_json(run.run_state.to_json()).messages == run.messages
        return answer

    answer = asyncio.run(go())
    assert CHARGED == [5]
    return answer


@pytest.mark.parametrize("kind", STORES)
def test_a_lone_surrogate_in_a_tool_result_is_replaced_the_same_with_and_without_a_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    answer = _ran_once("a\ud800b", kind, tmp_path, request)
    assert answer.content == "a\ufffdb" and not answer.is_error


class Refused(Exception):
    """A tool's error whose message echoes bad input (a file name decoded with surrogateescape)."""


@pytest.mark.parametrize("kind", ["none", "sqlite"])
def test_a_lone_surrogate_in_a_tool_error_is_replaced(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    class Raises:
        def __init__(self) -> None:
            raise Refused("no file 'r\udcffport.csv'")

    answer = _ran_once(Raises, kind, tmp_path, request)  # the "tool" raises as it builds its value
    assert answer.is_error and answer.content.endswith("no file 'r\ufffdport.csv'")


@dataclass
class Card:
    holder: str
    tags: dict[str, str]


@pytest.mark.parametrize("kind", ["none", "sqlite"])
def test_surrogates_deep_in_a_result_are_replaced_and_a_pair_is_joined(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    value = {"k\udc80": ["x\udfff", Card("\ud83d\ude00 ok", {"\ud800": "y"})]}
    answer = _ran_once(value, kind, tmp_path, request)
    assert answer.content == {"k\ufffd": ["x\ufffd", {"holder": "\U0001f600 ok", "tags": {"\ufffd": "y"}}]}


@pytest.mark.parametrize("kind", ["none", "sqlite", PG])
def test_an_int_longer_than_the_limit_is_an_error_result_and_the_run_loads_back(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    answer = _ran_once(-(10**5000), kind, tmp_path, request)
    assert answer.is_error
    assert f"more than {MAX_INT_DIGITS} digits" in answer.content and "return a str" in answer.content


@pytest.mark.parametrize("kind", ["none", "sqlite"])
def test_an_int_at_the_limit_is_kept_and_loads_back(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    big = 10**MAX_INT_DIGITS - 1
    answer = _ran_once([big], kind, tmp_path, request)
    assert answer.content == [big] and not answer.is_error


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("kind", ["none", "sqlite", PG])
def test_a_value_nested_too_deep_is_an_error_result_and_the_run_loads_back(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    answer = _ran_once(_nested(200), kind, tmp_path, request)
    assert answer.is_error and f"nested more than {MAX_DEPTH} levels deep" in answer.content


@pytest.mark.parametrize("kind", ["none", "sqlite"])
def test_a_value_nested_to_the_limit_is_kept_and_loads_back(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    answer = _ran_once(_nested(MAX_DEPTH), kind, tmp_path, request)
    assert answer.content == _nested(MAX_DEPTH) and not answer.is_error


def _text_with_surrogates() -> st.SearchStrategy[str]:
    return st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=12).map("".join)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text_with_surrogates(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text_with_surrogates(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_every_converted_value_encodes_and_reads_back_as_itself(value: Any) -> None:
    converted = to_json_value(value)
    assert json.loads(to_json(converted)) == converted
    assert to_json_value(converted) == converted  # once clean, it stays as it is


def _reply_with_surrogates(request: ModelRequest) -> ModelResponse:
    if not any(isinstance(p, ToolResult) for m in request.messages for p in m.parts):
        reply = to_response([ToolCall(id="c1", name="echo", args={"text": "n\udc80o"})])
        return reply.model_copy(update={"parts": (ThoughtPart(text="hm\ud800"), *reply.parts)})
    return to_response("caf\udce9 \ud83d\ude00")


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@pytest.mark.parametrize("kind", ["none", "sqlite", PG])
def test_lone_surrogates_in_model_text_are_replaced_the_same_with_and_without_a_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _store(kind, tmp_path, request)
    agent = Agent(name="echoer", model=ScriptedModel(_reply_with_surrogates), instruction="Echo.", tools=[echo])

    async def go() -> Any:
        run = await Runner(agent, store=store).run("hi", run_id="r1")
        if store is not None:
            saved = await store.load("r1")
            assert saved is not None and rebuild(saved).messages == run.messages
            await store.close()
        return run

    run = asyncio.run(go())
    assert run.outcome == "final", run.error
    assert run.output == "caf\ufffd \U0001f600"
    thought, call = run.messages[1].parts
    assert thought == ThoughtPart(text="hm\ufffd") and call.args == {"text": "n\ufffdo"}
    assert _result(run).content == "n\ufffdo"
    assert isinstance(run.messages[-1].parts[0], TextPart)
    page = write_trace_page(run, tmp_path / "trace.html", machine=agent)
    assert "caf\ufffd" in page.read_text(encoding="utf-8")


CLI_APP = """
from loopwright import Agent
from loopwright.data.events import ModelRequest, ModelResponse
from loopwright.models.scripted import ScriptedModel, to_response


def reply(request: ModelRequest) -> ModelResponse:
    return to_response("caf\\udce9 ok")


agent = Agent(name="s", model=ScriptedModel(reply))
"""


@pytest.mark.slow
def test_the_cli_prints_every_event_of_a_reply_with_a_lone_surrogate(tmp_path: Path) -> None:
    (tmp_path / "surr.py").write_text(CLI_APP)
    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "run", "surr:agent", "hi", "--json"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "run_finished" and events[-1]["outcome"] == "final", done.stdout
    assert events[-1]["output"] == "caf\ufffd ok"
    assert "removed" not in done.stderr
