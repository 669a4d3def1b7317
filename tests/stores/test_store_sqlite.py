"""SQLiteStore: a checkpoint at every transition (append-only, flat), resume after a crash from
the store, tool results kept as calls complete, suspensions resumed once, two resumers."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    ResumeError,
    Runner,
    RunState,
    ScriptedModel,
    ToolCall,
    approve,
    tool,
)
from loopwright.data.errors import RunBusy
from loopwright.durable.checkpoint import rebuild
from loopwright.models.scripted import to_response
from loopwright.stores import Checkpoint, SQLiteStore, open_store
from loopwright.stores.base import DELTA, FULL_HEAD_EVERY
from tests.store_app import CRASH_AFTER, EXECUTED, Crash, labels, make_agent, steps_script, tree_agent
from tests.store_fakes import CrashingStore, drive

PAY_SCRIPT = [
    [
        ToolCall(id="c-pay", name="pay", args={"amount": 500, "seconds": 0.2}),
        ToolCall(id="c-note", name="work", args={"label": "note"}),
    ],
    "paid and noted",
]


@pytest.fixture(autouse=True)
def _clean() -> None:
    EXECUTED.clear()
    CRASH_AFTER.clear()


class Counting(CrashingStore):
    """Counts the tool results kept too."""

    results = 0

    async def save_result(self, run_id: str, call_id: str, seq: int, body: bytes) -> None:
        self.results += 1
        await self.inner.save_result(run_id, call_id, seq, body)


def body(cp: Checkpoint) -> dict[str, Any]:
    """A checkpoint's body: new messages ``m``, trace entries ``t`` and events ``e``."""
    return json.loads(cp.body)  # type: ignore[no-any-return]


def test_every_transition_is_checkpointed_and_the_store_holds_the_whole_run(tmp_path: Path) -> None:
    """Every transition is kept; a checkpoint is written as the run enters a stage with side
    effects (reason, act) or stops, holding the transitions since the previous one."""
    store = CrashingStore(SQLiteStore(tmp_path / "runs.db"))
    result = asyncio.run(Runner(make_agent(steps_script(3, calls=2)), store=store).run("go", run_id="r1"))
    assert result.outcome == "final"
    assert [cp.stage for cp in store.checkpoints] == ["reason", "act", "act", "act", "done"]
    assert [s for cp in store.checkpoints for s in body(cp)["t"]] == result.trace
    saved = asyncio.run(store.load("r1"))
    assert saved is not None and saved.stage == "done" and saved.outcome == "final"
    again = rebuild(saved)
    assert again.trace == result.trace
    assert again.messages == result.messages
    assert again.to_json() == result.run_state.to_json()
    assert [json.loads(e) for e in asyncio.run(store.events("r1"))] == [
        json.loads(e.model_dump_json()) for e in result.events
    ]


def test_a_tool_step_costs_one_checkpoint_and_one_result_per_call(tmp_path: Path) -> None:
    """One checkpoint before the tool calls (the reply is in it), each result as its call
    completes, and nothing more: the model call after them replays from the store."""
    store = Counting(SQLiteStore(tmp_path / "runs.db"))
    result = asyncio.run(Runner(make_agent(steps_script(10, calls=2)), store=store).run("go", run_id="r1"))
    assert result.outcome == "final" and len(result.trace) == 1 + 5 * 10 + 5
    assert store.saves == 1 + 10 + 1 and store.results == 2 * 10  # the first model call, each act, the stop


def test_each_write_is_in_the_store_before_the_side_effect_it_protects(tmp_path: Path) -> None:
    """Read from a second connection while the model is called and while each tool runs: the
    store already holds every tool result the model is shown (in the history, or kept as its
    call completed), and the reply whose call runs."""
    db = tmp_path / "runs.db"
    seen: list[tuple[str, bool]] = []
    reader = ThreadPoolExecutor(1)

    def stored() -> tuple[list[Any], set[str]]:
        async def load() -> tuple[Any, dict[str, bytes]]:
            store = SQLiteStore(db)
            try:
                saved = await store.load("r1")
                assert saved is not None
                return rebuild(saved), await store.results("r1", rebuild(saved).seq)
            finally:
                await store.close()

        state, kept = reader.submit(asyncio.run, load()).result()
        return state.messages, set(kept)

    def results(messages: Any) -> set[str]:
        return {p.call_id for m in messages for p in m.parts if getattr(p, "type", "") == "tool_result"}

    replies = [to_response(item, i) for i, item in enumerate(steps_script(3, calls=2))]

    def model(request: ModelRequest) -> ModelResponse:
        history, kept = stored()
        shown = list(request.messages)
        covered = history == shown[: len(history)] and results(shown) <= results(history) | kept
        seen.append(("model", covered and all(m.role == "user" for m in shown[len(history) :])))
        reply = replies[sum(1 for m in request.messages if m.role == "assistant")]
        assert isinstance(reply, ModelResponse)
        return reply

    @tool
    async def work(label: str, seconds: float = 0.0) -> str:
        """Work."""
        last = stored()[0][-1]
        seen.append((label, last.role == "assistant" and label in [getattr(p, "id", None) for p in last.parts]))
        return label

    agent = Agent(name="durable", model=ScriptedModel(model), tools=[work], limits=Limits(retry_backoff_s=0))
    result = asyncio.run(Runner(agent, store=SQLiteStore(db)).run("go", run_id="r1"))
    reader.shutdown()
    assert result.outcome == "final", result.error
    assert [what for what, _ in seen].count("model") == 4 and len(seen) == 4 + 6
    assert all(kept for _, kept in seen), seen


def test_checkpoints_append_and_never_rewrite_the_history(tmp_path: Path) -> None:
    """Each checkpoint carries only what is new: at most one step's messages and transitions,
    and a head of the fields that changed; the whole head, written every FULL_HEAD_EVERY
    checkpoints, does not grow with the run (iteration 2 and 70 cost the same)."""
    store = CrashingStore(SQLiteStore(tmp_path / "runs.db"))
    result = asyncio.run(Runner(make_agent(steps_script(70), max_iterations=80), store=store).run("go", run_id="r1"))
    assert result.outcome == "final" and len(result.messages) == 142
    later = [body(cp) for cp in store.checkpoints[1:]]
    assert all(len(b["m"]) <= 2 and 1 <= len(b["t"]) <= 6 for b in later)  # one step: its results and reply
    assert sum(len(body(cp)["m"]) for cp in store.checkpoints) == len(result.messages)
    whole = [len(cp.head) for cp in store.checkpoints if not cp.head.startswith(DELTA)]
    assert len(whole) == -(-len(store.checkpoints) // FULL_HEAD_EVERY) >= 3
    assert max(whole[1:]) - min(whole[1:]) < 16  # a few digits of counters, not the history
    changes = [len(cp.head) for cp in store.checkpoints if cp.head.startswith(DELTA)]
    assert max(changes) < min(whole[1:]) * 0.75
    saved = asyncio.run(store.load("r1"))
    assert saved is not None and rebuild(saved).to_json() == result.run_state.to_json()


def test_a_run_id_already_in_the_store_is_refused(tmp_path: Path) -> None:
    runner = Runner(make_agent(steps_script(1)), store=SQLiteStore(tmp_path / "runs.db"))
    asyncio.run(runner.run("go", run_id="r1"))
    with pytest.raises(ConfigurationError, match="run id 'r1' is already in the store"):
        asyncio.run(runner.run("go", run_id="r1"))


def test_resume_after_a_crash_at_every_checkpoint(tmp_path: Path) -> None:
    """Crash the run at each checkpoint k in turn (it is lost) and resume it with a new runner
    on a new connection: the same outcome, history and trace, every tool once."""
    script = steps_script(3, calls=2)
    counting = CrashingStore(SQLiteStore(tmp_path / "plain.db"))
    plain = asyncio.run(Runner(make_agent(script), store=counting).run("go", run_id="r1"))
    expected = labels()
    assert sum(expected.values()) == 6 and counting.saves == 5
    for k in range(1, counting.saves + 1):
        EXECUTED.clear()
        path = tmp_path / f"k{k}.db"
        result, crashes = asyncio.run(drive(lambda: make_agent(script), path, crash_at=k))
        assert crashes == 1, k
        assert result.outcome == "final" and result.output == plain.output, k
        assert result.trace == plain.trace, k
        assert result.messages == plain.messages, k
        assert labels() == expected, (k, EXECUTED)


def test_a_checkpoint_every_iteration_resumes_after_a_crash_at_each(tmp_path: Path) -> None:
    """``durability="iteration"``: a checkpoint as each iteration begins and at the stop; a
    crash at any of them repeats the iteration's stages, never a call whose result was kept."""
    script = steps_script(3, calls=2)
    counting = CrashingStore(SQLiteStore(tmp_path / "plain.db"))
    plain = asyncio.run(Runner(make_agent(script), store=counting, durability="iteration").run("go", run_id="r1"))
    expected = labels()
    assert [cp.stage for cp in counting.checkpoints] == ["preprocess"] * 4 + ["done"]
    for k in range(1, counting.saves + 1):
        EXECUTED.clear()
        result, crashes = asyncio.run(
            drive(lambda: make_agent(script), tmp_path / f"k{k}.db", crash_at=k, durability="iteration")
        )
        assert crashes == 1 and result.trace == plain.trace and result.messages == plain.messages, k
        assert labels() == expected, (k, EXECUTED)


def test_a_resumed_step_reruns_only_the_calls_that_did_not_finish(tmp_path: Path) -> None:
    """The process dies while one call of a step is in flight (it did its work, its result was
    not kept): the call that finished is answered from the store, the one in flight runs again
    with the same idempotency key."""
    script = [
        [
            ToolCall(id="fast", name="work", args={"label": "fast"}),
            ToolCall(id="slow", name="work", args={"label": "slow", "seconds": 0.05}),
        ],
        "done",
    ]
    CRASH_AFTER.add("slow")
    db = tmp_path / "runs.db"
    with pytest.raises(BaseException) as crashed:
        asyncio.run(Runner(make_agent(script), store=SQLiteStore(db)).run("go", run_id="r1"))
    assert crashed.group_contains(Crash) if isinstance(crashed.value, BaseExceptionGroup) else crashed.type is Crash
    assert labels() == Counter({"fast": 1, "slow": 1})
    result = asyncio.run(Runner(make_agent(script), store=SQLiteStore(db)).resume("r1"))
    assert result.outcome == "final"
    assert labels() == Counter({"fast": 1, "slow": 2})  # only the call in flight ran again
    keys = [key for label, key in EXECUTED if label == "slow"]
    assert keys == ["r1:slow", "r1:slow"]  # stable across the crash: the payment API dedupes it
    answers = [p for m in result.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
    assert [(a.call_id, a.content) for a in answers] == [("fast", "did fast"), ("slow", "did slow")]


def test_tools_get_the_call_id_and_an_idempotency_key(tmp_path: Path) -> None:
    asyncio.run(Runner(make_agent(steps_script(1, calls=2))).run("go", run_id="abc"))
    assert sorted(EXECUTED) == [("s0c0", "abc:s0c0"), ("s0c1", "abc:s0c1")]


# ------------------------------------------------------------------ suspensions, once


def test_a_suspended_run_resumes_by_id_in_a_new_runner_and_only_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))
    assert first.outcome == "suspended" and labels() == Counter({"note": 1})
    done = asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).resume("r1", {"c-pay": approve()}))
    assert done.outcome == "final" and done.output == "paid and noted"
    assert labels() == Counter({"note": 1, "pay 500": 1})
    with pytest.raises(ResumeError, match="run 'r1' has ended"):
        asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).resume("r1", {"c-pay": approve()}))
    assert labels()["pay 500"] == 1


def test_a_copied_saved_state_cannot_be_resumed_twice(tmp_path: Path) -> None:
    """Two processes holding one JSON: the second resume is refused before any call runs."""
    db = tmp_path / "runs.db"
    first = asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))
    copy = first.run_state.to_json()
    done = asyncio.run(
        Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).resume(RunState.from_json(copy), {"c-pay": approve()})
    )
    assert done.outcome == "final"
    other = Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db))
    with pytest.raises(ResumeError, match="already resumed"):
        asyncio.run(other.resume(RunState.from_json(copy), {"c-pay": approve()}))
    assert labels()["pay 500"] == 1 and other.active_runs == []


def test_two_processes_resuming_one_copied_state_at_once_pay_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))
    copy = first.run_state.to_json()

    async def both() -> list[Any]:
        workers = [Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)) for _ in range(2)]
        resumes = (w.resume(RunState.from_json(copy), {"c-pay": approve()}) for w in workers)
        return await asyncio.gather(*resumes, return_exceptions=True)

    outcomes = asyncio.run(both())
    refused = [o for o in outcomes if isinstance(o, ResumeError)]
    assert len(refused) == 1 and "was already resumed (a copy of the same saved state)" in str(refused[0])
    assert [getattr(o, "outcome", None) for o in outcomes].count("final") == 1
    assert labels()["pay 500"] == 1


def test_two_workers_resuming_one_run_exactly_one_proceeds(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))

    async def both() -> list[Any]:
        workers = [Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)) for _ in range(2)]
        return await asyncio.gather(*(w.resume("r1", {"c-pay": approve()}) for w in workers), return_exceptions=True)

    outcomes = asyncio.run(both())
    busy = [o for o in outcomes if isinstance(o, RunBusy)]
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(busy) == 1 and len(done) == 1 and done[0].outcome == "final", outcomes
    assert "being resumed by another worker" in str(busy[0])
    assert labels()["pay 500"] == 1


@pytest.mark.slow
def test_a_running_run_is_not_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    script = steps_script(2, seconds=0.2)

    async def race() -> tuple[Any, Any]:
        runner = Runner(make_agent(script), store=SQLiteStore(db))
        task = asyncio.create_task(runner.run("go", run_id="r1"))
        await asyncio.sleep(0.1)  # the first step's tool is running
        other = Runner(make_agent(script), store=SQLiteStore(db))
        with pytest.raises(RunBusy, match="run 'r1' is running"):
            await other.resume("r1")
        return await task, other

    result, other = asyncio.run(race())
    assert result.outcome == "final" and other.active_runs == []


def test_a_crash_while_resuming_a_suspension_carries_on_with_its_decisions(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).run("pay", run_id="r1"))
    crashing = CrashingStore(SQLiteStore(db), at=1)
    with pytest.raises(Crash):  # the approved payment ran; the worker died before the next checkpoint
        asyncio.run(Runner(make_agent(PAY_SCRIPT), store=crashing).resume("r1", {"c-pay": approve()}))
    assert labels()["pay 500"] == 1
    result = asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(db)).resume("r1"))
    assert result.outcome == "final" and labels()["pay 500"] == 1  # its result was kept: not paid again


def test_resume_by_id_needs_a_store_and_a_known_run(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match="needs a store"):
        asyncio.run(Runner(make_agent(PAY_SCRIPT)).resume("r1"))
    with pytest.raises(ResumeError, match="no run 'nope' in sqlite:///"):
        asyncio.run(Runner(make_agent(PAY_SCRIPT), store=SQLiteStore(tmp_path / "x.db")).resume("nope"))


def test_store_urls_and_schema_versions(tmp_path: Path) -> None:
    store = asyncio.run(open_store(f"sqlite:///{tmp_path}/a.db"))
    assert isinstance(store, SQLiteStore) and store.path == f"{tmp_path}/a.db"
    asyncio.run(store.close())
    with pytest.raises(ConfigurationError, match="unknown store URL 'redis://x'"):
        asyncio.run(open_store("redis://x"))
    import sqlite3

    db = sqlite3.connect(tmp_path / "a.db")
    db.execute("UPDATE lw_meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    with pytest.raises(ConfigurationError, match="schema version 99, newer than this loopwright's 5"):
        SQLiteStore(tmp_path / "a.db")


def test_the_store_can_write_off_the_event_loop(tmp_path: Path) -> None:
    """``thread=True``: every statement runs on the store's worker thread; same results."""

    async def go() -> tuple[Any, Any]:
        store = SQLiteStore(tmp_path / "runs.db", thread=True)
        result = await Runner(make_agent(steps_script(2, calls=2)), store=store).run("go", run_id="r1")
        saved = await store.load("r1")
        await store.close()
        return result, saved

    result, saved = asyncio.run(go())
    assert result.outcome == "final" and saved is not None and rebuild(saved).messages == result.messages


def test_resume_after_a_crash_at_every_checkpoint_of_a_run_with_transfers(tmp_path: Path) -> None:
    """A transfer call answered before the crash is answered again by its feature (not from the
    store), so the transfer still happens after the resume."""

    def go(target: str, i: int) -> list[ToolCall]:
        return [ToolCall(id=f"t{i}", name="transfer_to_agent", args={"agent_name": target, "task": "on"})]

    script = [go("helper", 0), [ToolCall(id="w", name="work", args={"label": "w"})], go("root", 1), "all done"]
    counting = CrashingStore(SQLiteStore(tmp_path / "plain.db"))
    plain = asyncio.run(Runner(tree_agent(script), store=counting).run("go", run_id="r1"))
    assert plain.trace.count("transfer") == 2
    EXECUTED.clear()
    for k in range(1, counting.saves + 1):
        EXECUTED.clear()
        result, crashes = asyncio.run(drive(lambda: tree_agent(script), tmp_path / f"k{k}.db", crash_at=k))
        assert crashes == 1 and result.trace == plain.trace and result.messages == plain.messages, k
        assert labels() == Counter({"w": 1}), k


def test_streamed_and_hand_driven_runs_are_checkpointed_too(tmp_path: Path) -> None:
    async def go() -> tuple[Any, Any, Any, list[Any]]:
        store = SQLiteStore(tmp_path / "runs.db")
        runner = Runner(make_agent(steps_script(1)), store=store)
        stream = runner.stream("go", run_id="streamed")
        async for _event in stream:
            pass
        run = Runner(make_agent(steps_script(1)), store=store).start("go", run_id="stepped")
        await run.step()
        await run.step()
        events = [json.loads(e) for e in await store.events("streamed")]
        return stream.result, await store.load("streamed"), await store.load("stepped"), events

    result, streamed, stepped, events = asyncio.run(go())
    assert streamed is not None and streamed.outcome == "final" and streamed.trace == result.trace
    assert stepped is not None and stepped.trace == ["start", "preprocess", "reason"]
    assert events == [json.loads(e.model_dump_json()) for e in result.events]  # built as they streamed


def test_a_paused_run_is_written_and_resumes_with_its_store(tmp_path: Path) -> None:
    """``runner.pause``: the store holds the run as it stopped; ``resume`` in the same process
    carries on its log (it used to start a second log for the same run id and fail)."""

    async def go() -> tuple[Any, Any, Any, Any]:
        store = SQLiteStore(tmp_path / "runs.db")
        runner = Runner(make_agent(steps_script(3, seconds=0.05)), store=store)
        task = asyncio.create_task(runner.run("go", run_id="r1"))
        await asyncio.sleep(0.02)  # the first tool call is running
        assert runner.pause("r1")
        paused = await task
        at_pause = await store.load("r1")
        done = await runner.resume("r1")
        return paused, at_pause, done, await store.load("r1")

    paused, at_pause, done, saved = asyncio.run(go())
    assert paused.outcome == "paused" and at_pause is not None
    assert rebuild(at_pause).messages == paused.messages and at_pause.trace == paused.trace
    assert done.outcome == "final" and labels() == Counter({"s0c0": 1, "s1c0": 1, "s2c0": 1})
    assert saved is not None and saved.outcome == "final"
    assert rebuild(saved).messages == done.messages and saved.trace == done.trace


def test_the_store_keeps_every_event_of_a_run_with_transfers_and_a_suspension(tmp_path: Path) -> None:
    """Events are kept as lists read straight from the run's compact log: they load back equal
    to the run's own events, across agents (transfers), a suspension and its resume."""

    def go(target: str, i: int) -> list[ToolCall]:
        return [ToolCall(id=f"t{i}", name="transfer_to_agent", args={"agent_name": target, "task": "on"})]

    pay = [ToolCall(id="p", name="pay", args={"amount": 500}), ToolCall(id="w", name="work", args={"label": "w"})]
    script = [go("helper", 0), pay, go("root", 1), "all done"]
    db = tmp_path / "runs.db"
    first = asyncio.run(Runner(tree_agent(script), store=SQLiteStore(db)).run("go", run_id="r1"))
    assert first.outcome == "suspended"
    done = asyncio.run(Runner(tree_agent(script), store=SQLiteStore(db)).resume("r1", {"p": approve()}))
    assert done.outcome == "final" and done.trace.count("transfer") == 2
    kept = [json.loads(e) for e in asyncio.run(SQLiteStore(db).events("r1"))]
    assert kept == [json.loads(e.model_dump_json()) for e in done.events]  # the resumed result's: every leg
    assert kept[: len(first.events)] == [json.loads(e.model_dump_json()) for e in first.events]


def test_a_model_call_retried_after_a_step_resumes_after_a_crash_at_each_checkpoint(tmp_path: Path) -> None:
    """The model call after a step of tools writes nothing, but its retry does (the step's
    replay covers one model call, not two): a crash at any checkpoint of a run whose second
    model call fails once resumes to the same end, each tool once."""
    from loopwright.data.errors import ModelError

    failed: list[int] = []

    def flaky(script: list[Any]) -> Agent:
        replies = [to_response(item, i) for i, item in enumerate(script)]

        def reply(request: ModelRequest) -> ModelResponse:
            done = sum(1 for m in request.messages if m.role == "assistant")
            if done == 1 and not failed:
                failed.append(1)
                raise ModelError("overloaded", status=529)
            answer = replies[done]
            assert isinstance(answer, ModelResponse)
            return answer

        from tests.store_app import pay, work

        return Agent(name="durable", model=ScriptedModel(reply), tools=[work, pay], limits=Limits(retry_backoff_s=0))

    script = steps_script(2)
    counting = CrashingStore(SQLiteStore(tmp_path / "plain.db"))
    plain = asyncio.run(Runner(flaky(script), store=counting).run("go", run_id="r1"))
    assert plain.outcome == "final" and ("reason", "reason") in pairwise(plain.trace)
    stages = [cp.stage for cp in counting.checkpoints]
    assert stages == ["reason", "act", "reason", "act", "done"]  # the retry's entry into reason is written
    expected = labels()
    for k in range(1, counting.saves + 1):
        EXECUTED.clear()
        failed.clear()
        result, crashes = asyncio.run(drive(lambda: flaky(script), tmp_path / f"k{k}.db", crash_at=k))
        assert crashes == 1 and result.outcome == "final" and result.messages == plain.messages, k
        assert labels() == expected, (k, EXECUTED)
