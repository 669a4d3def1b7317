"""The compact event log: events rebuilt after the run (lazily, in one pass) are exactly the
events built as they were emitted (what a watching observer sees), whatever the run did —
transfers change the agent, retries and passes the iteration, every stage the stage."""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import to_jsonable_python

from loopwright import Runner, ToolCall
from loopwright.data.result import RunResult
from loopwright.stores.sqlite import SQLiteStore
from loopwright.testing import limits, model_behaviours, scripted
from tests.features.test_transfer import go, tree


class Keep:
    """An event observer: events are built as they are emitted while it watches."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.seen.append(event)


def _fields(events: list[Any]) -> list[dict[str, Any]]:
    return [e.model_dump(exclude={"time", "run_id", "duration_s"}) for e in events]


def _sorted(dumps: list[dict[str, Any]]) -> list[str]:
    return sorted(repr({k: v for k, v in d.items() if k != "seq"}) for d in dumps)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_events_rebuilt_from_the_compact_log_equal_those_built_as_emitted(data: st.DataObject) -> None:
    budget = data.draw(limits(tool_timeouts=False))
    root = tree().replace(limits=budget.model_copy(update={"max_transfers": 3}))
    script = data.draw(model_behaviours(root, transfer=0.4, max_replies=8))
    watched = Keep()
    eager = Runner(scripted(root, script), observers=[watched]).run_sync("go", run_id="r")
    lazy = Runner(scripted(root, script)).run_sync("go", run_id="r")
    assert lazy.trace == eager.trace
    assert _fields(watched.seen) == _fields(eager.events)
    # parallel sync tools run in threads, so their answers may come in another order run to run:
    # the same events (where in the run each was recorded included), and the same kinds in order
    assert [e.type for e in lazy.events] == [e.type for e in eager.events]
    assert _sorted(_fields(lazy.events)) == _sorted(_fields(eager.events))
    times = [e.time for e in lazy.events]
    assert times == sorted(times)
    assert {e.agent for e in lazy.events} >= {lazy.answered_by}


def test_a_transition_is_kept_as_its_row_and_an_event_without_a_dict() -> None:
    """What the log holds per transition: the row itself (16 bytes a transition, with its time)."""
    kept: list[RunResult] = []

    async def main() -> None:  # not run_sync: asyncio.run's task repr would build every event
        kept.append(await Runner(scripted(tree(), [go("a"), "done"])).run("go"))

    asyncio.run(main())
    result = kept[0]
    log = result._log
    assert sum(hasattr(e, "dest") for e in log.entries) >= 5  # most transitions: the bare row
    changed = [e[0] if type(e[0]) is tuple else e[1:] for e in log.entries if isinstance(e, tuple)]
    assert any(where[-1] == "a" for where in changed if len(where) in (2, 3))  # the agent changed, said once
    assert all(isinstance(e, (tuple, ToolCall)) or hasattr(e, "dest") for e in log.entries)  # nothing built yet
    assert any(type(e) is ToolCall for e in log.entries)  # a tool_called: the call itself (the history's)
    assert len(log.times) == len(log.entries)
    assert [e.type for e in result.events].count("state_entered") == len(result.trace) - 1


@pytest.mark.slow
def test_a_finished_runs_log_is_not_walked_by_the_garbage_collector() -> None:
    """An entry of strings and numbers is a tuple the collector stops tracking: a run's model
    requests, plain answers and the like cost a collection nothing once it has seen them (an
    entry naming its event by class, a tracked object, stayed tracked for ever)."""
    import gc

    def plain(value: Any) -> bool:
        return (
            value is None or type(value) in (str, int, float, bool) or (type(value) is tuple and all(map(plain, value)))
        )

    kept: list[RunResult] = []

    async def main() -> None:
        kept.append(await Runner(scripted(tree(), [go("a"), "done"])).run("go"))

    asyncio.run(main())
    gc.collect()  # a collection stops tracking a tuple of plain values; an entry holding a
    gc.collect()  # where-tuple, the one after
    entries = [e for e in kept[0]._log.entries if type(e) is tuple and plain(e[0]) and all(map(plain, e[1:]))]
    kinds = {e[1] if type(e[0]) in (tuple, int) else e[0] for e in entries}
    assert kinds >= {"run_started", "model_requested", "tool_answered"}, kinds
    assert [e for e in entries if gc.is_tracked(e)] == []
    # a tool_called entry is the history's own call: no tuple, nothing more for a collection to walk
    calls = [e for e in kept[0]._log.entries if type(e) is ToolCall]
    asked = [p for m in kept[0].messages for p in m.parts if type(p) is ToolCall]
    assert calls and all(any(c is a for a in asked) for c in calls)
    assert not [e for e in kept[0]._log.entries if type(e) is tuple and "tool_called" in e[:2]]


@pytest.mark.slow
def test_a_past_reply_is_kept_as_its_values_not_as_the_reply_object() -> None:
    """A finished run keeps each past reply's parts (the history's) and fields, not the reply
    object with its ``__dict__`` and empty ``details`` (~300 bytes an iteration); the events
    rebuild replies equal to those the model gave, field for field."""
    import gc
    import weakref

    from loopwright import Agent, ModelRequest, ModelResponse, ToolCall, Usage, tool

    @tool
    async def noop(i: int) -> int:
        """Return i."""
        return i

    given: list[ModelResponse] = []
    refs: list[weakref.ref[ModelResponse]] = []

    class Model:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            turn = len(request.messages) // 2
            if turn < 3:
                reply = ModelResponse(
                    parts=(ToolCall(id=f"c{turn}", name="noop", args={"i": turn}),),
                    usage=Usage(input_tokens=turn + 1),
                    stop_reason="tool_use",
                    details={"id": f"m{turn}"} if turn == 1 else {},
                )
            else:
                reply = ModelResponse.model_validate({"parts": [{"type": "text", "text": "done"}]})
            given.append(reply.model_copy())  # an equal copy, kept by the test
            refs.append(weakref.ref(reply))
            return reply

    kept: list[RunResult] = []

    async def main() -> None:
        kept.append(await Runner(Agent(name="a", model=Model(), tools=[noop])).run("go"))

    asyncio.run(main())
    gc.collect()
    result = kept[0]
    assert [r() is None for r in refs] == [True, True, True, False]  # the last is the run's response
    responded = [e.response for e in result.events if e.type == "model_responded"]
    assert [r.model_dump() for r in responded] == [r.model_dump() for r in given]
    assert responded[1].details == {"id": "m1"} and responded[0].details == {}
    assert all(m.parts is r.parts for m, r in zip(result.messages[1::2], responded, strict=True))


def test_emit_takes_fields_by_name_or_all_in_order_and_refuses_a_mix_up() -> None:
    import pytest

    from loopwright.data.events import EVENT_FIELDS, ToolCalled
    from loopwright.data.run_state import RunState
    from loopwright.runtime.context import RunContext

    root = tree()
    runner = Runner(root)
    ctx = RunContext(runner.tree, RunState(run_id="r", agent="root", input="x", active_agent="root"))
    ctx.emit(ToolCalled, "c1", "add", {"a": 1})
    ctx.emit(ToolCalled, call_id="c2", name="add", args={"a": 2})
    first, second = ctx.log.events()
    assert (first.call_id, first.args, second.call_id, second.args) == ("c1", {"a": 1}, "c2", {"a": 2})
    assert EVENT_FIELDS[ToolCalled] == ("call_id", "name", "args")
    with pytest.raises(TypeError, match=r"give all of \['call_id', 'name', 'args'\] in order"):
        ctx.emit(ToolCalled, "c3", "add")
    with pytest.raises(TypeError, match=r"ToolCalled has no field \['nmae'\]"):
        ctx.emit(ToolCalled, call_id="c4", nmae="add", args={})


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_records_read_in_pieces_equal_the_built_events(data: st.DataObject) -> None:
    """A store reads the log as it grows (``records(start, at)``, keeping ``at``): the dicts it
    gets, piece by piece, are the events' own fields."""
    root = tree().replace(limits=data.draw(limits(tool_timeouts=False)).model_copy(update={"max_transfers": 3}))
    script = data.draw(model_behaviours(root, transfer=0.4, max_replies=6))
    kept: list[RunResult] = []

    async def main() -> None:
        kept.append(await Runner(scripted(root, script)).run("go", run_id="r"))

    asyncio.run(main())
    log = kept[0]._log
    cuts = sorted(data.draw(st.lists(st.integers(0, len(log.entries)), max_size=4)))
    read: list[Any] = []
    start, at = 0, log.start
    for cut in [*cuts, len(log.entries)]:
        piece, at = log.records(start, at) if cut == len(log.entries) else _upto(log, start, at, cut)
        read.extend(piece)
        start = cut
    assert len(read) == len(log.entries)
    assert [to_jsonable_python(r) for r in read] == [e.model_dump(mode="json") for e in kept[0].events]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_stores_compact_form_reads_back_as_the_built_events(data: st.DataObject) -> None:
    """The log's third reader: what a store writes at each checkpoint (``compact_events``, over
    the event log's own walk) and reads back (``decode_bodies``) is every event, field for field,
    whatever places (stage, iteration, agent) the entries changed at."""
    root = tree().replace(limits=data.draw(limits(tool_timeouts=False)).model_copy(update={"max_transfers": 3}))
    script = data.draw(model_behaviours(root, transfer=0.4, max_replies=6))

    async def main(folder: str) -> tuple[RunResult, list[Any]]:
        store = SQLiteStore(f"{folder}/runs.db")
        try:
            result = await Runner(scripted(root, script), store=store).run("go", run_id="r")
            return result, [json.loads(e) for e in await store.events("r")]
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as folder:
        result, stored = asyncio.run(main(folder))
    assert stored == [e.model_dump(mode="json") for e in result.events]


def _upto(log: Any, start: int, at: Any, stop: int) -> tuple[list[Any], Any]:
    """``records`` of the entries before ``stop`` only (a log that had ``stop`` entries then)."""
    rest = log.entries[stop:]
    del log.entries[stop:]
    try:
        return log.records(start, at)
    finally:
        log.entries.extend(rest)


def test_an_ended_run_keeps_no_request_and_goes_on_as_a_conversation() -> None:
    """A run that ended makes no more requests: its state (kept by its result) does not hold
    the last one (~400 bytes a kept run); the conversation goes on from it as before."""
    result = Runner(scripted(tree(), [go("a"), "done"])).run_sync("go")
    assert result.outcome == "final" and result.run_state.request is None
    again = Runner(scripted(tree(), [go("a"), "done"])).run_sync("next", after=result)
    assert again.outcome == "final" and len(again.messages) > len(result.messages)
