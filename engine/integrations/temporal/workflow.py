"""A run as a Temporal workflow: the agent's machine is the workflow's own deterministic code.

::

    workflow "loopwright:run" (run id = workflow id)
      while the run is not terminal:
        waiting?  stopped; decisions = update "loopwright:decide"  (waits in the workflow)
        out = activity "loopwright:<stage>"(state, decisions)        a stage's work: I/O here only
        state = fold(state, out)                                     what the stage added
        row = machine.choose(stage, state)                           guards read the recorded state
        take(row)                                                    the same transition on every replay

Everything the workflow decides comes from its input and the activities' recorded outputs: the
clock it reads is Temporal's (``workflow.time()``: the run's deadline), the run id is the
workflow id. Each activity runs once (a retry policy of one attempt: the machine's own retry
rows retry); a stage whose worker was lost (no heartbeat) is scheduled again, its completed
calls' results handed in.
"""

from __future__ import annotations

import asyncio
import builtins
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from ...durable.codec import run_result_json
    from ...loop.run import Run
    from ..recorded import row_after
    from .activities import adopt
    from .host import Host
    from .legs import LegStart, leg_start, trace_leg
    from .names import DECIDE, PAUSE, RESULT, STATE, WAIT, WORKFLOW, activity_name, host_for

ONCE = RetryPolicy(maximum_attempts=1)


@workflow.defn(name=WORKFLOW)
class RunWorkflow:
    """One run, start to end (suspensions included); returns the RunResult as JSON."""

    def __init__(self) -> None:
        self.run: Run | None = None
        self.decisions: dict[str, Any] | None = None
        self.stopped = False
        """The run waits (suspended or paused) or has ended: ``loopwright:wait`` returns."""
        self.stops = 0
        """How many times the run stopped or had decisions refused (a decide waits for the next)."""
        self.rejected: str | None = None
        self.pausing = False
        self.paused = False
        self.cancel = False
        self.leg: LegStart | None = None
        """The start of the run's leg in progress, when its runs are traced (:mod:`.legs`)."""

    @workflow.run
    async def main(self, args: dict[str, Any]) -> str:
        host = host_for(workflow.info().task_queue, args["agent"])
        runner = host.runner
        rs = runner.new_run(args["input"], run_id=workflow.info().workflow_id, state=args.get("state"))
        limits = rs.limits
        if limits.timeout_s is not None:  # Temporal's clock, never the worker's
            rs.deadline = workflow.time() + limits.timeout_s - limits.salvage_reserve
        run = self.run = runner.attach(rs)
        self.leg = leg_start(run, mark=0)
        decisions: dict[str, Any] | None = None
        while True:
            stage = run.state.stage
            if stage in run.machine.terminals:
                break
            if stage in run.machine.waiting and decisions is None:
                decisions = await self._wait()
                continue
            out = await self._stage(host, run, stage, decisions)
            decisions = None
            if self.leg is not None and out.get("ran"):
                self.leg.ran.update(out["ran"])
            if out.get("rejected") is not None:
                self.rejected = out["rejected"]
                continue
            self.rejected = None
            if "head" in out:
                run = self.run = adopt(runner, run, out)
            run.take(row_after(run, stage, out))
            if self.pausing and not run.done and not run.waiting:
                await self._pause()
        self._stop()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return run_result_json(run.result)

    def _stop(self) -> None:
        """The run stops (ended, suspended, paused): its leg's spans, once."""
        assert self.run is not None
        trace_leg(self.leg, self.run)
        self.leg = None
        self.stopped = True
        self.stops += 1

    async def _wait(self) -> dict[str, Any]:
        """A suspended run waits here for ``loopwright:decide`` (or a cancel); past the agent's
        ``wait_timeout_s`` it goes on without decisions (its calls are denied, timed out)."""
        assert self.run is not None
        self._stop()
        timeout = self.run.state.limits.wait_timeout_s
        try:
            await workflow.wait_condition(lambda: self.decisions is not None or self.cancel, timeout=timeout)
        except builtins.TimeoutError:
            pass
        except asyncio.CancelledError:
            self.cancel = True
        self.stopped = False
        self.leg = leg_start(self.run)
        decisions, self.decisions = self.decisions or {}, None
        return decisions

    async def _pause(self) -> None:
        """``loopwright:pause``: stop between two stages until a decide without decisions."""
        assert self.run is not None
        rs = self.run.state
        self.pausing, self.paused = False, True
        rs.outcome = "paused"
        self._stop()
        try:
            await workflow.wait_condition(lambda: not self.paused or self.cancel)
        except asyncio.CancelledError:
            self.cancel = True
        self.paused = self.stopped = False
        rs.outcome = None
        self.leg = leg_start(self.run)

    async def _stage(self, host: Host, run: Run, stage: str, decisions: dict[str, Any] | None) -> dict[str, Any]:
        """The stage's activity; again when its worker was lost (with the results its calls kept)."""
        rs = run.state
        timeout = host.activity_timeout_s
        if rs.deadline is not None:
            timeout = max(1.0, rs.deadline - workflow.time() + rs.limits.salvage_reserve + host.heartbeat_s)
        kept: dict[str, str] = {}
        attempt = 0
        while True:
            attempt += 1
            args = {
                "agent": rs.agent,
                "state": rs.to_json().decode(),
                "stage": stage,
                "decisions": decisions,
                "cancel": self.cancel,
                "kept": kept,
            }
            activity_id = f"{len(rs.trace)}.{stage}" + (f".{attempt}" if attempt > 1 else "")
            try:
                out: dict[str, Any]
                if stage in host.local:
                    out = await workflow.execute_local_activity(
                        activity_name(stage),
                        args,
                        activity_id=activity_id,
                        start_to_close_timeout=timedelta(seconds=timeout),
                        retry_policy=ONCE,
                    )
                else:
                    out = await workflow.execute_activity(
                        activity_name(stage),
                        args,
                        activity_id=activity_id,
                        start_to_close_timeout=timedelta(seconds=timeout),
                        heartbeat_timeout=timedelta(seconds=host.heartbeat_s),
                        retry_policy=ONCE,
                    )
                return out
            except asyncio.CancelledError:
                self.cancel = True  # the stage in progress was cut short: it runs again, cancelled
            except ActivityError as exc:
                cause = exc.cause
                if isinstance(cause, CancelledError):  # (Temporal's cancel reached the activity first)
                    self.cancel = True
                    continue
                if isinstance(cause, TimeoutError) and cause.type == TimeoutType.HEARTBEAT:
                    details = cause.last_heartbeat_details
                    if details:
                        kept = dict(details[0])
                    continue  # its worker is gone: again, on any worker
                return {"stage": stage, "raised": f"{type(cause or exc).__name__}: {cause or exc}"}

    # ------------------------------------------------------------------ people and programs outside

    @workflow.query(name=STATE)
    def state(self) -> dict[str, Any]:
        """The run's state and its place in the machine."""
        run = self.run
        if run is None:
            return {"stage": None, "outcome": None, "trace": [], "pending": [], "stopped": False}
        rs = run.state
        return {
            "run_id": rs.run_id,
            "agent": rs.agent,
            "stage": rs.stage,
            "outcome": rs.outcome,
            "trace": list(rs.trace),
            "pending": [p.model_dump(mode="json") for p in run.result.pending] if self.stopped else [],
            "stopped": self.stopped,
            "paused": self.paused,
        }

    @workflow.query(name=RESULT)
    def result_so_far(self) -> str:
        """The run's RunResult as it stands, its events so far (JSON): what its trace page draws."""
        if self.run is None:
            raise ApplicationError(f"run {workflow.info().workflow_id!r} has not started yet", type="ResumeError")
        return run_result_json(self.run.result)

    @workflow.update(name=WAIT, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def wait(self) -> str:
        """The run's result once it stops: suspended, paused or ended."""
        await workflow.wait_condition(lambda: self.stopped)
        assert self.run is not None
        return run_result_json(self.run.result)

    @workflow.update(name=DECIDE)
    async def decide(self, decisions: dict[str, Any]) -> str:
        """Hand a suspended run its decisions (a paused run: none, it goes on); the result at its next stop."""
        seen = self.stops
        if self.paused:
            self.paused = False
        else:
            self.decisions = decisions
        await workflow.wait_condition(lambda: self.stops > seen)
        if self.rejected is not None:
            raise ApplicationError(self.rejected, type="ResumeError", non_retryable=True)
        assert self.run is not None
        return run_result_json(self.run.result)

    @decide.validator
    def _check_decide(self, decisions: dict[str, Any]) -> None:
        run = self.run
        if run is None or not self.stopped or self.decisions is not None or not (run.waiting or self.paused):
            stage = run.state.stage if run is not None else "start"
            raise ApplicationError(
                f"run {workflow.info().workflow_id!r} is not waiting (it is in state {stage!r}"
                f"{', being resumed already' if self.decisions is not None else ''}); a suspension is resumed once",
                type="ResumeError",
            )
        if self.paused and decisions:
            raise ApplicationError("the run was paused, not suspended: it waits for no decision", type="ResumeError")

    @workflow.signal(name=PAUSE)
    def pause(self) -> None:
        """Pause the run at its next transition (a decide without decisions resumes it)."""
        if self.run is not None and not self.run.done:
            self.pausing = True
