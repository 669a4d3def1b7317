"""What a checkpoint writes, made cheaply: the heads of changes rebuild the whole head at every
version, the fast JSON of parts, replies and messages is their serializers', a store that
writes on the caller's thread writes what an awaited one writes, and a finished run is freed
without the cyclic garbage collector."""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, Limits, RunContext, Runner, ScriptedModel, ToolCall, tool
from loopwright.data.events import (
    DocumentPart,
    ImagePart,
    Message,
    ModelResponse,
    ProviderPart,
    TextPart,
    ThoughtPart,
    ToolResult,
    Usage,
)
from loopwright.durable import checkpoint as durable_module
from loopwright.durable.codec import _FLAT, head_json, plain_message, plain_response
from loopwright.stores import Checkpoint, SQLiteStore, StoreWrapper
from loopwright.stores.base import DELTA, FULL_HEAD_EVERY, merge_heads
from tests.store_app import make_agent, steps_script

PARTS: list[Any] = [
    TextPart(text='hé \u2028 "quoted"'),
    ThoughtPart(text="think", signature="sig", redacted=False, data=None),
    ToolCall(id="c1", name="pay", args={"amount": 5, "nested": {"list": [1, 2.5, None, True]}}),
    ToolResult(call_id="c1", name="pay", content={"paid": [1, "two"]}, is_error=False),
    ToolResult(call_id="c2", name="pay", content="boom", is_error=True),
    ProviderPart(provider="anthropic", kind="web_search_result", block={"a": [1, {"b": None}]}, text="t"),
    ImagePart(media_type="image/png", data="aGk="),
    DocumentPart(url="https://example.com/a.pdf", title="a"),
]


def test_the_fast_json_of_parts_replies_and_messages_is_their_serializers() -> None:
    for part in PARTS:
        message = Message(role="user", parts=(part,), agent="a")
        assert json.loads(durable_module.to_json(plain_message(message))) == json.loads(message.model_dump_json())
    reply = ModelResponse(
        parts=(PARTS[0], PARTS[1], PARTS[2], PARTS[5]),
        usage=Usage(input_tokens=3, output_tokens=4, requests=1),
        stop_reason="tool_use",
        model="m",
        details={"id": "msg_1", "n": [1, 2]},
    )
    assert json.loads(durable_module.to_json(plain_response(reply))) == json.loads(reply.model_dump_json())
    assert json.loads(durable_module.to_json(plain_message(Message(role="assistant", parts=reply.parts)))) == (
        json.loads(Message(role="assistant", parts=reply.parts).model_dump_json())
    )
    for cls in _FLAT:  # a dict is the model's JSON only while the model has no fields of its own kind
        for name, info in cls.model_fields.items():
            assert info.alias is None and info.serialization_alias is None, (cls, name)
        assert not cls.__pydantic_decorators__.field_serializers and not cls.__pydantic_decorators__.model_serializers
        assert not cls.model_computed_fields, cls


class Recording(StoreWrapper):
    """Keeps every checkpoint it is handed (an awaited store: the checkpointer cannot skip it)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.checkpoints: list[Checkpoint] = []

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        self.checkpoints.append(checkpoint)
        return await self.inner.save(checkpoint, version, owner)


@tool
async def note(key: str, ctx: RunContext) -> str:
    """Write a key of the session state, or clear it with key ''."""
    if key:
        ctx.state[key] = len(ctx.state)
    else:
        ctx.state.clear()
    return "ok"


def test_the_heads_of_changes_rebuild_the_whole_head_at_every_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every version's merged heads equal the whole head of the run state as it was written:
    across FULL_HEAD_EVERY, a session state filled and emptied, a limit that ends the run."""
    wholes: list[bytes] = []
    checkpoint = durable_module.Checkpointer._checkpoint

    def recording(self: Any) -> Checkpoint:
        wholes.append(head_json(self.run.state))
        return checkpoint(self)  # type: ignore[no-any-return]

    monkeypatch.setattr(durable_module.Checkpointer, "_checkpoint", recording)
    keys = ["a", "b", "", "c", ""] * 9
    script: list[Any] = [[ToolCall(id=f"n{i}", name="note", args={"key": key})] for i, key in enumerate(keys)]
    agent = Agent(
        name="notes", tools=[note], model=ScriptedModel(script), limits=Limits(max_iterations=FULL_HEAD_EVERY + 8)
    )
    store = Recording(SQLiteStore(tmp_path / "runs.db"))
    result = asyncio.run(Runner(agent, store=store).run("go", run_id="r1"))
    assert result.outcome == "salvaged"  # the budget ran out: the rarely changed fields changed (limit, outcome...)
    heads = [cp.head for cp in store.checkpoints]
    assert b'"outcome":"salvaged"' in heads[-1] and heads[-1].startswith(DELTA)  # a cold field, changed
    assert len(heads) > FULL_HEAD_EVERY + 2 and sum(not h.startswith(DELTA) for h in heads) == 2
    assert len(wholes) == len(heads)
    for version in range(1, len(heads) + 1):
        assert json.loads(merge_heads(heads[:version])) == json.loads(wholes[version - 1]), version


def _rows(path: Path) -> list[tuple[Any, ...]]:
    """The log's rows without what differs from one run to the next (times, owners)."""
    db = sqlite3.connect(path)
    rows = []
    for stage, outcome, seq, head, body in db.execute("SELECT stage, outcome, seq, head, body FROM lw_log ORDER BY id"):
        parsed = json.loads(body) if body else {}
        for event in parsed.get("e", ()):
            if type(event) is list and event and event[0] is not None:
                event[1 if type(event[0]) is str else 0] = 0.0  # the event's time
                if event[0] == "tool_answered":
                    event[-1] = 0.0  # its duration
        head = json.loads(head)
        head.pop("deadline", None)
        rows.append((stage, outcome, seq, head, parsed))
    results = db.execute("SELECT call_id, seq, body FROM lw_results ORDER BY call_id").fetchall()
    db.close()
    return [*rows, results]


def test_a_store_written_on_the_callers_thread_writes_what_an_awaited_one_writes(tmp_path: Path) -> None:
    inline, awaited = SQLiteStore(tmp_path / "inline.db"), SQLiteStore(tmp_path / "awaited.db")
    assert durable_module._inline(inline) is inline
    wrapped = Recording(awaited)
    assert durable_module._inline(wrapped) is None  # a wrapper's save is awaited: it sees every checkpoint
    for store in (inline, wrapped):
        result = asyncio.run(Runner(make_agent(steps_script(3, calls=2)), store=store).run("go", run_id="r1"))
        assert result.outcome == "final"
    assert len(wrapped.checkpoints) == 5
    assert _rows(tmp_path / "inline.db") == _rows(tmp_path / "awaited.db")

    class Counting(SQLiteStore):
        saves = 0

        async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
            Counting.saves += 1
            return await super().save(checkpoint, version, owner)

    counting = Counting(tmp_path / "counting.db")
    assert durable_module._inline(counting) is None  # its own save is awaited, not skipped
    asyncio.run(Runner(make_agent(steps_script(3)), store=counting).run("go", run_id="r1"))
    assert Counting.saves == 5


@pytest.mark.slow
def test_a_finished_run_is_freed_without_the_cycle_collector(tmp_path: Path) -> None:
    """The run holds its checkpointer; the checkpointer lets go of the run when it stops, so a
    finished run (its whole history) is freed at once, not left to the cyclic collector."""
    store = SQLiteStore(tmp_path / "runs.db")

    async def main() -> set[str]:
        await Runner(make_agent(steps_script(2)), store=store).run("go", run_id="warm")
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            await Runner(make_agent(steps_script(2)), store=store).run("go", run_id="r1")
            gc.collect()
            return {type(o).__name__ for o in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    left = asyncio.run(main())
    assert not left & {"Checkpointer", "Run", "RunState", "RunContext"}, left
