"""Reaching DBOS runs from any process (:class:`Client`: enqueue, decide, cancel, read results
and recorded steps; no DBOS launch), and :func:`replay`, the check that a run's recorded steps
lead to the transitions it took."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...data.errors import ConfigurationError
from ...data.result import RunResult
from ...data.run_state import RunState
from ...durable.codec import decisions_message, run_result_from_json
from ...loop.runner import Runner
from ...runtime.agent import Agent
from ..recorded import row_after
from .registry import (
    APP,
    CANCEL,
    QUEUE,
    STATUS,
    STEP,
    TOPIC,
    WORKFLOW,
    DBOSClient,
    EnqueueOptions,
    ReplayDivergence,
)
from .step import fold
from .workflow import write_ahead


class Client:
    """Enqueue runs, send decisions and read results from any process (no DBOS launch)."""

    def __init__(self, db: str) -> None:
        self.db = db
        write_ahead(db)
        self._client = DBOSClient(system_database_url=db, application_name=APP)

    def enqueue(
        self, agent: str, input: str, *, run_id: str, queue: str = QUEUE, state: dict[str, Any] | None = None
    ) -> str:
        """Enqueue a run of ``agent`` (by name) on ``queue``; a worker that listens to it runs it.
        The same ``run_id`` twice attaches to the first run."""
        if not isinstance(input, str):
            raise ConfigurationError(f"the user input must be a str, got {type(input).__name__}")
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": queue, "workflow_id": run_id}
        self._client.enqueue(options, agent, input, state)
        return run_id

    def status(self, run_id: str, timeout_s: float = 0.0) -> dict[str, Any] | None:
        """The run's latest status event (suspended with its pending requests, or ended)."""
        value: dict[str, Any] | None = self._client.get_event(run_id, STATUS, timeout_seconds=timeout_s)
        return value

    def decide(self, run_id: str, decisions: Mapping[str, Any]) -> None:
        """Send decisions to a suspended run; the worker that holds it resumes it."""
        self._client.send(run_id, decisions_message(decisions), TOPIC)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run: the stage in progress is interrupted (within the worker's
        ``cancel_poll_s``), or a suspended run stops waiting; the run ends ``cancelled``, every
        call answered, its RunResult readable here as any other. False if it had already ended."""
        found = self._client.list_workflows(workflow_ids=[run_id], load_input=False, load_output=False)
        if not found:
            raise ConfigurationError(f"no run {run_id!r} in {self.db}; the run id is the id it was enqueued with")
        if str(found[0].status).rpartition(".")[2] in ("SUCCESS", "ERROR", "CANCELLED"):
            return False
        self._client.update_workflow_attributes(run_id, {CANCEL: True}, merge=True)
        self._client.send(run_id, {CANCEL: True}, TOPIC)  # a run waiting in recv takes it at once
        return True

    def result(self, run_id: str, poll_s: float = 0.1) -> RunResult:
        """The run's RunResult (waits for it to end, looking every ``poll_s`` seconds)."""
        handle: Any = self._client.retrieve_workflow(run_id)
        return run_result_from_json(handle.get_result(polling_interval_sec=poll_s))

    def state(self, run_id: str) -> str:
        """The workflow's DBOS status: ENQUEUED, PENDING, SUCCESS, ERROR, ..."""
        return str(self._client.retrieve_workflow(run_id).get_status().status)

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        """The run's recorded stage steps, in order, readable while the run goes on: ``stage``,
        ``head`` (the run state after the handler, without history and trace, JSON), ``keep``
        (messages of the history kept), ``messages`` (added, JSON), ``events`` (JSON), ``raised``
        (or ``stage`` and ``rejected``: decisions refused)."""
        steps = self._client.list_workflow_steps(run_id)
        return [dict(s["output"] or {}) for s in steps if s["function_name"] == STEP]

    def close(self) -> None:
        self._client.destroy()


# ------------------------------------------------------------------ determinism


def replay(steps: Sequence[Mapping[str, Any]], agent: Agent, trace: Sequence[str]) -> list[str]:
    """Replay a run's recorded steps (``Client.steps``) on ``agent``'s machine: each recorded
    state must lead, through the machine's guards, to the stage the next step ran (and the last
    to the run's end, ``trace[-1]``). Returns the replayed trace; ReplayDivergence if it differs."""
    runner = Runner(agent, unverified=True)  # replaying runs no stage: a recorded run of any machine replays
    replayed: list[str] = [trace[0]] if trace else []
    rs = RunState(run_id="", agent=agent.name, input="")
    for i, out in enumerate(steps):
        if "rejected" in out:
            continue
        rs = fold(rs, out)
        rs.trace = list(replayed)
        runner.adopt(rs)
        run = runner.attach(rs)
        row = row_after(run, out["stage"], out)
        replayed.append(row.dest)
        following = [s for s in steps[i + 1 :] if "rejected" not in s]
        expected = following[0]["stage"] if following else (trace[-1] if trace else row.dest)
        if row.dest != expected:
            raise ReplayDivergence(
                f"replaying step {i} ({out['stage']!r}) chose {row.dest!r} ({row}); the recorded run went to "
                f"{expected!r}: a guard is not a pure function of the recorded run state"
            )
    if list(trace) != replayed:
        raise ReplayDivergence(f"the replayed trace {replayed} differs from the run's trace {list(trace)}")
    return replayed
