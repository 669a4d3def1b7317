"""Budgets: every run is bounded, and each bound has a name the loop can report."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class Limits(BaseModel):
    """The budgets of one run. Defaults are finite: no run is ever unbounded.

    The root agent's limits bound the whole run. A sub-agent's own ``limits=`` bound its turn
    while it is the active agent: ``max_iterations``, ``max_tool_calls`` and
    ``max_total_tokens`` count from the moment it took over, and its ``tool_timeout_s``,
    ``max_model_retries``, ``retry_backoff_s`` and ``salvage`` apply to its own calls. The
    others (``timeout_s``, ``max_transfers``, ``max_ping_pong``, ``max_suspensions``,
    ``wait_timeout_s``) are the run's, and only the root's count.

    - ``max_iterations``: passes through ``reason`` (the salvage call is not counted).
    - ``max_tool_calls``: tool calls executed; the step that crosses it still completes.
    - ``max_total_tokens``: input + output + cache tokens reported by the model.
    - ``timeout_s``: wall-clock seconds for the whole run; a stage still running at the
      deadline is cut short, and the run ends with outcome ``"limit"`` (no salvage call,
      since there is no time left for one).
    - ``tool_timeout_s``: seconds for one tool call (a tool's own ``timeout_s`` wins).
    - ``max_model_retries``: retries of a failed model call before the run fails.
    - ``retry_backoff_s``: first retry delay; doubles each retry, at most 30 s.
    - ``salvage``: when a budget is spent, make one last tool-less call for the best answer.
    - ``max_transfers``: transfers between agents in one run.
    - ``max_ping_pong``: consecutive transfers back and forth between the same two agents
      (A->B->A->B is 3); the one past it is refused and the run goes to salvage.
    - ``max_suspensions``: times a run may wait for confirmations, credentials or results;
      past it, a call that would wait is answered with an error instead.
    - ``wait_timeout_s``: how long a suspended run's requests stay open; resuming later treats
      them as denied (timed out). ``timeout_s`` does not run while a run waits.
    - ``max_repeated_calls``: the same tool call (same name, same arguments) this many times in
      a row is not run: its result is a nudge telling the model so; one more and the run goes
      to salvage (``RunResult.limit == "max_repeated_calls"``). None turns loop detection off.
    - ``max_parse_retries``: replies whose final answer does not validate against the agent's
      ``output_type`` (or that break Plan-ReAct's tag format) sent back to the model with the
      error; past it the run fails with the error named.
    - ``max_observations``: observer calls in one run (``Agent(observer=Observer(...))``).
    - ``max_compactions``: history compactions in one run (``Agent(compaction=Compaction(...))``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_iterations: PositiveInt = 10
    max_tool_calls: PositiveInt | None = None
    max_total_tokens: PositiveInt | None = None
    timeout_s: PositiveFloat | None = None
    tool_timeout_s: PositiveFloat | None = None
    max_model_retries: int = Field(default=2, ge=0)
    retry_backoff_s: float = Field(default=0.5, ge=0)
    salvage: bool = True
    max_transfers: int = Field(default=5, ge=0)
    max_ping_pong: int = Field(default=3, ge=1)
    max_suspensions: int = Field(default=10, ge=0)
    wait_timeout_s: PositiveFloat | None = None
    max_repeated_calls: int | None = Field(default=3, ge=2)
    max_parse_retries: int = Field(default=3, ge=0)
    max_observations: int = Field(default=5, ge=0)
    max_compactions: int = Field(default=3, ge=0)

    def retry_delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.retry_backoff_s * (2 ** (attempt - 1)), 30.0))
