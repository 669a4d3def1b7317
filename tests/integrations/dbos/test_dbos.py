"""Runs as DBOS workflows on SQLite in one process: one stage is one step, the same RunResult as
in-process, suspended runs wait durably for decisions, and replay is checked for determinism."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI the DBOS tests must run (.ci/run installs the extra)
    pytest.importorskip("dbos", reason="pip install -e '.[dbos]' to run the DBOS tests")

from dbos import DBOS

from loopwright import ConfigurationError, Runner, RunResult, approve
from loopwright.integrations import dbos as lw
from tests import dbos_app, store_app

pytestmark = pytest.mark.dbos


def _id() -> str:
    return uuid.uuid4().hex


def test_dbos_run_gives_the_same_result_as_in_process(client: lw.Client) -> None:
    run_id = _id()
    store_app.EXECUTED.clear()
    result = asyncio.run(_start_and_wait("durable", run_id))
    on_dbos = [label for label, _ in store_app.EXECUTED]
    reference = Runner(dbos_app.steps_agent()).run_sync("go", run_id=run_id)
    assert result.outcome == reference.outcome == "final"
    assert result.trace == reference.trace and result.output == reference.output
    assert result.messages == reference.messages and result.usage == reference.usage
    assert [e.type for e in result.events] == [e.type for e in reference.events]
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert on_dbos == [f"s{s}c0" for s in range(dbos_app.STEPS)]  # each tool call ran once
    # one stage = one step: every non-terminal state the run visited is one recorded step
    steps = client.steps(run_id)
    assert [s["stage"] for s in steps] == result.trace[:-1]
    # the idempotency key of each call is the workflow id and the call id
    assert {key for _, key in store_app.EXECUTED} == {f"{run_id}:s{s}c0" for s in range(dbos_app.STEPS)}
    # readable from another client
    assert client.result(run_id).trace == result.trace
    assert client.status(run_id) == {"outcome": "final", "trace": result.trace}


async def _start_and_wait(agent: str, run_id: str) -> RunResult:
    await lw.start(agent, "go", run_id=run_id)
    return await lw.result(run_id)


def test_suspended_run_waits_durably_and_resumes_on_decisions(client: lw.Client) -> None:
    run_id = _id()
    store_app.EXECUTED.clear()

    async def go() -> RunResult:
        await lw.start("payer", "pay", run_id=run_id)
        status = await asyncio.to_thread(_until_suspended, client, run_id)
        assert [p["call_id"] for p in status["pending"]] == ["p1"]
        assert client.state(run_id) == "PENDING"  # the workflow waits in recv
        client.decide(run_id, {"nope": approve()})  # refused: the run keeps waiting
        refused = await asyncio.to_thread(_until, client, run_id, lambda s: "rejected" in s)
        assert "no pending request has call id 'nope'" in refused["rejected"]
        assert store_app.EXECUTED == []
        client.decide(run_id, {"p1": approve()})
        return await lw.result(run_id)

    result = asyncio.run(go())
    assert result.outcome == "final" and result.output == "paid"
    assert [label for label, _ in store_app.EXECUTED] == ["pay 500"]
    assert "suspended" in result.trace


def _until(client: lw.Client, run_id: str, ok: object, timeout_s: float = 20.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.status(run_id)
        if status is not None and ok(status):  # type: ignore[operator]
            return status
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} never reached the status; last: {client.status(run_id)}")


def _until_suspended(client: lw.Client, run_id: str) -> dict[str, object]:
    return _until(client, run_id, lambda s: s.get("outcome") == "suspended" and "pending" in s)


def test_replay_of_recorded_steps_gives_the_same_transitions(client: lw.Client) -> None:
    run_id = _id()
    result = asyncio.run(_start_and_wait("durable", run_id))
    assert lw.replay(client.steps(run_id), dbos_app.steps_agent(), result.trace) == result.trace


def test_a_guard_reading_the_clock_makes_replay_diverge(client: lw.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = _id()
    result = asyncio.run(_start_and_wait("clocked", run_id))
    assert result.outcome == "final"
    steps = client.steps(run_id)
    assert lw.replay(steps, dbos_app.clock_agent(), result.trace) == result.trace  # same time: same choices
    monkeypatch.setattr(dbos_app, "CUTOFF", time.time())  # later: the guard now holds
    with pytest.raises(lw.ReplayDivergence, match="not a pure function of the recorded run state"):
        lw.replay(steps, dbos_app.clock_agent(), result.trace)


def test_dbos_replays_recorded_steps_and_stops_when_a_guard_reads_the_clock(
    client: lw.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DBOS re-executes the workflow over its recorded steps (a fork from past the last step):
    the same transitions give the same result; a guard that reads the clock makes it diverge."""
    run_id = _id()
    result = asyncio.run(_start_and_wait("clocked", run_id))
    recorded = len(DBOS.list_workflow_steps(run_id))

    async def fork() -> RunResult:
        handle = await DBOS.fork_workflow_async(run_id, recorded + 1)
        return lw.result_from_json(await handle.get_result(polling_interval_sec=0.05))

    replayed = asyncio.run(fork())
    assert replayed.trace == result.trace and replayed.messages == result.messages
    monkeypatch.setattr(dbos_app, "CUTOFF", time.time())  # from now on the guard holds: replay diverges
    with pytest.raises(lw.ReplayDivergence, match="the machine chose state 'decide' where the recorded run had 'act'"):
        asyncio.run(fork())


def _recorded(client: lw.Client, run_id: str) -> list[tuple[str, int]]:
    """Each stage step of ``run_id`` as DBOS stored it: (stage, bytes of its output column)."""
    path = client.db.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT length(output) FROM operation_outputs WHERE workflow_uuid = ? AND function_name = ? "
            "ORDER BY function_id",
            (run_id, lw.STEP),
        ).fetchall()
    stages = [s["stage"] for s in client.steps(run_id)]
    assert len(stages) == len(rows)
    return [(stage, size) for stage, (size,) in zip(stages, rows, strict=True)]


def test_recorded_step_outputs_stay_flat_over_a_long_run(client: lw.Client) -> None:
    """A step records what its stage added, not the run's history: the bytes DBOS stores per
    step do not grow with the run (over 40 iterations), and the run is the in-process one."""
    run_id = _id()
    result = asyncio.run(_start_and_wait("long", run_id))
    reference = Runner(dbos_app.long_agent()).run_sync("go", run_id=run_id)
    assert result.outcome == "final" and result.messages == reference.messages
    assert result.trace == reference.trace and result.run_state.iteration == dbos_app.LONG + 1
    by_stage: dict[str, list[int]] = {}
    for stage, size in _recorded(client, run_id):
        by_stage.setdefault(stage, []).append(size)
    assert set(by_stage) >= {"preprocess", "reason", "postprocess", "act", "decide"}
    for stage, sizes in by_stage.items():
        if len(sizes) < dbos_app.LONG:
            continue
        # the second visit against the last: a few digits more (seq, ids), never the history
        assert sizes[-1] <= sizes[1] + 64, (stage, sizes[1], sizes[-1])


def test_a_workflow_forked_mid_run_folds_the_recorded_steps_and_ends_the_same(client: lw.Client) -> None:
    """DBOS re-executes a workflow from the middle of its record (what recovery does): the
    recorded steps are folded into the run state, the rest runs, the result is the same."""
    run_id = _id()
    result = asyncio.run(_start_and_wait("long", run_id))
    steps = DBOS.list_workflow_steps(run_id)
    middle = next(s["function_id"] for s in steps[len(steps) // 2 :] if s["function_name"] == lw.STEP)
    store_app.EXECUTED.clear()

    async def fork() -> RunResult:
        handle = await DBOS.fork_workflow_async(run_id, middle)
        return lw.result_from_json(await handle.get_result(polling_interval_sec=0.05))

    forked = asyncio.run(fork())
    assert forked.trace == result.trace and forked.messages == result.messages and forked.output == result.output
    assert 0 < len(store_app.EXECUTED) < dbos_app.LONG  # only the calls past the fork point ran again


def _answers(result: RunResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in result.messages:
        for p in m.parts:
            if getattr(p, "type", "") == "tool_result":
                out.setdefault(p.call_id, []).append(str(p.content))  # type: ignore[union-attr]
    return out


def _until_executed(timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not store_app.EXECUTED:
        assert time.monotonic() < deadline, "no tool call started"
        time.sleep(0.02)


def test_cancel_interrupts_a_running_run_and_it_ends_cancelled(client: lw.Client) -> None:
    """``Client.cancel`` stops a run in the middle of a minute-long tool call: it ends
    ``cancelled`` at once, the call answered, the result readable by any client, replay the same."""
    run_id = _id()
    store_app.EXECUTED.clear()

    async def go() -> RunResult:
        await lw.start("stuck", "go", run_id=run_id)
        await asyncio.to_thread(_until_executed)
        assert await asyncio.to_thread(client.cancel, run_id) is True
        return await lw.result(run_id)

    started = time.monotonic()
    result = asyncio.run(go())
    assert time.monotonic() - started < 30  # the 60 s call was interrupted
    assert result.outcome == "cancelled" and result.trace[-2:] == ["act", "cancelled"]
    assert _answers(result) == {"c-stuck": ["tool 'work' did not finish: the run was cancelled"]}
    assert client.result(run_id).outcome == "cancelled"
    assert client.status(run_id) == {"outcome": "cancelled", "trace": result.trace}
    assert client.state(run_id) in ("SUCCESS", "WorkflowStatusString.SUCCESS")
    assert lw.replay(client.steps(run_id), dbos_app.stuck_agent(), result.trace) == result.trace
    assert client.cancel(run_id) is False  # it has ended


def test_cancel_ends_a_suspended_run_waiting_for_decisions(
    client: lw.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loopwright worker cancel`` (``Client.cancel``) ends a run waiting in recv for decisions:
    ``cancelled``, its pending call answered, never run."""
    from loopwright.cli import main

    run_id = _id()
    store_app.EXECUTED.clear()

    async def go() -> RunResult:
        await lw.start("payer", "pay", run_id=run_id)
        await asyncio.to_thread(_until_suspended, client, run_id)
        assert await asyncio.to_thread(main, ["worker", "cancel", "--db", client.db, run_id]) == 0
        assert f"{run_id}: cancelling" in capsys.readouterr().out
        return await lw.result(run_id)

    result = asyncio.run(go())
    assert result.outcome == "cancelled" and result.trace[-2:] == ["suspended", "cancelled"]
    assert main(["worker", "cancel", "--db", client.db, run_id]) == 0  # the command line says it has ended
    assert f"{run_id}: already ended" in capsys.readouterr().out
    assert main(["worker", "cancel", "--db", client.db, "no-such-run"]) == 2
    assert "no run 'no-such-run' in sqlite:///" in capsys.readouterr().err
    assert store_app.EXECUTED == []  # the payment never ran
    (answer,) = _answers(result)["p1"]
    assert "not run" in answer or "did not finish" in answer, answer
    assert client.result(run_id).outcome == "cancelled"


def test_a_sqlite_system_database_is_put_in_wal_mode(client: lw.Client) -> None:
    """DBOS on SQLite commits each step: in WAL mode a commit is one append (2-3x the runs/s)."""
    with sqlite3.connect(client.db.removeprefix("sqlite:///")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_worker_command_says_what_is_wrong(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from loopwright.cli import main

    db = f"sqlite:///{tmp_path / 'w.sqlite'}"
    assert main(["worker", "--db", db, "--app", "no_such_module_here"]) == 2
    assert "cannot import --app 'no_such_module_here'" in capsys.readouterr().err
    assert main(["worker", "--db", db, "--app", "tests.dbos_app", "--concurrency", "0"]) == 2
    assert "--concurrency must be 1 or more" in capsys.readouterr().err
    with pytest.raises(ConfigurationError, match="register\\(\\) takes Agents"):
        lw.register("support")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="no agent named 'nobody' is registered"):
        lw.runner_for("nobody")


def test_a_step_that_rewrites_the_history_records_the_new_history_and_folds_back() -> None:
    """A stage that replaces older turns (compaction) keeps none of the old prefix: its step
    records the new history from where it changed, and the fold gives exactly that history."""
    from loopwright import Message, RunState, TextPart
    from loopwright.durable.codec import head_json, message_json
    from loopwright.integrations.dbos.step import fold, messages_kept

    def say(role: str, text: str) -> Message:
        return Message(role=role, parts=(TextPart(text=text),))  # type: ignore[arg-type]

    old = [say("user", "hi"), say("assistant", "a"), say("user", "b"), say("assistant", "c")]
    before = RunState(run_id="r", agent="x", input="hi", messages=list(old))
    rs = RunState(run_id="r", agent="x", input="hi", messages=list(old), iteration=3)
    rs.messages[:] = [say("user", "hi [summary]"), *old[2:]]  # compaction, in place
    keep = messages_kept(old, rs.messages)
    assert keep == 0
    out = {"stage": "compact", "head": head_json(rs).decode(), "keep": keep, "events": [], "raised": None}
    out["messages"] = [message_json(m) for m in rs.messages[keep:]]
    folded = fold(before, out)
    assert folded.messages == rs.messages and folded.iteration == 3
    rs.messages.append(say("user", "d"))  # and a plain append keeps the whole prefix
    assert messages_kept(list(rs.messages[:-1]), rs.messages) == 3
    with pytest.raises(lw.ReplayDivergence, match="do not follow one another"):
        fold(RunState(run_id="r", agent="x", input="hi"), {**out, "keep": 2})
