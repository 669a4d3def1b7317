"""Runs on DBOS: each run is a DBOS workflow, each stage a DBOS step (``pip install 'loopwright[dbos]'``).

::

    workflow "loopwright.run" (run id = workflow id)        one process at a time runs it
      while the run is not terminal:
        waiting?  status event "suspended", decisions = recv("decisions")   (durable wait)
        out = step "loopwright.stage"(run_id, stage, decisions)
              │  the stage's handler does the work (model call, tool calls);
              │  its recorded output is what it added: the state's head (no history),
              │  the new messages, its events (the state = the fold of the outputs)
        row = machine.choose(stage, recorded state)      guards read only recorded outputs
        take(row)                                        the same transition on every replay
      status event "finished"; return the RunResult as JSON

A worker that dies mid-run loses only the step in flight: DBOS recovers the workflow on another
worker (or the same one restarted), recorded steps return their outputs without running again,
and the step in flight runs again (its tool calls get the same ``ctx.idempotency_key``,
``run_id:call_id``, the run id being the workflow id). Replaying recorded steps must give the same
transitions: when it does not (a guard that reads the clock, say), the workflow stops with
:class:`ReplayDivergence`; :func:`replay` checks a finished run the same way.

Setup, in every process that runs workflows (a worker) — or use ``loopwright worker``::

    register(my_agent)                        # the agents this process can run, by name
    launch("postgresql://...", queues={"loopwright": 8})

Apps that only enqueue and read results use :class:`Client` (no DBOS launch needed)::

    client = Client("postgresql://...")
    client.enqueue("support", "hello", run_id="r1")
    result = client.result("r1")              # a RunResult, from any process
    client.decide("r1", {"call-1": approve()})  # a suspended run resumes on whichever worker has it

In a launched process, ``await run(agent_name, text)`` runs one to its end and ``start`` /
``result`` start one and wait for it separately.

The parts: :mod:`~loopwright.integrations.dbos.registry` (names, this process's agents and runs),
:mod:`~loopwright.integrations.dbos.step` (a stage as a step, its record and fold),
:mod:`~loopwright.integrations.dbos.workflow` (the workflow, a launched process),
:mod:`~loopwright.integrations.dbos.children` (a workflow agent's children, checkpointed within its steps),
:mod:`~loopwright.integrations.dbos.client` (any process; replay),
:mod:`~loopwright.integrations.dbos.cli` (``loopwright worker``); what a step records is encoded by
:mod:`loopwright.durable.codec`. This module gathers their public names.
"""

from __future__ import annotations

from ...durable.codec import decisions_from_message as decode_decisions
from ...durable.codec import decisions_message as encode_decisions
from ...durable.codec import run_result_from_json as result_from_json
from .cli import worker_main, worker_parser
from .client import Client, replay
from .registry import (
    APP,
    CANCEL,
    QUEUE,
    RESULT,
    STATUS,
    STEP,
    TOPIC,
    WORKFLOW,
    ReplayDivergence,
    register,
    runner_for,
)
from .step import stage_step
from .workflow import launch, recover_dead, result, run, run_workflow, start, write_ahead

__all__ = [
    "APP",
    "CANCEL",
    "QUEUE",
    "RESULT",
    "STATUS",
    "STEP",
    "TOPIC",
    "WORKFLOW",
    "Client",
    "ReplayDivergence",
    "decode_decisions",
    "encode_decisions",
    "launch",
    "recover_dead",
    "register",
    "replay",
    "result",
    "result_from_json",
    "run",
    "run_workflow",
    "runner_for",
    "stage_step",
    "start",
    "worker_main",
    "worker_parser",
    "write_ahead",
]
