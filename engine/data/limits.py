"""Budgets: every run is bounded, and each bound has a name the loop can report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from .errors import ConfigurationError


class Limits(BaseModel):
    """The budgets of one run. Defaults are finite: no run is ever unbounded.

    The root agent's limits bound the whole run. A sub-agent's own ``limits=`` bound its turn
    while it is the active agent: ``max_iterations``, ``max_tool_calls`` and
    ``max_total_tokens`` count from the moment it took over, and its ``tool_timeout_s``,
    ``max_model_retries``, ``retry_backoff_s`` and ``salvage`` apply to its own calls. The
    others (``timeout_s``, ``max_transfers``, ``max_ping_pong``, ``max_suspensions``,
    ``wait_timeout_s``) are the run's, and only the root's count.

    - ``max_iterations``: passes through ``reason`` (the salvage call is not counted).
    - ``max_tool_calls``: tool calls executed; a reply's calls past the room left are answered
      "not run: tool-call budget spent" without running.
    - ``max_total_tokens``: input + output + cache tokens reported by the model.
    - ``max_cost_usd``: US dollars the run's model calls may cost (each reply priced by
      :mod:`loopwright.models.prices`); the run's, and only the root's counts. A step whose cost
      is unknown (no price for its model) spends it: a budget that cannot be counted stops the run.
    - ``timeout_s``: wall-clock seconds for the whole run (default 30 minutes). With salvage
      on, the loop's deadline comes ``salvage_reserve_s`` (at most a quarter of ``timeout_s``)
      early, so the salvage call has that long; a stage still running at the deadline is cut
      short, and the run salvages (or, with salvage off, ends with outcome ``"limit"``).
    - ``tool_timeout_s``: seconds for one tool call (default 5 minutes; a tool's own
      ``timeout_s`` wins). A sync tool runs in a thread, which a timeout cannot stop: the
      model is told it timed out and may still complete, and a late result is logged.
    - ``model_timeout_s``: seconds for one model call (default 10 minutes); a call that takes
      longer is a retryable model error.

    - ``max_depth``: how deep runs started inside tools may nest (an agent used as a tool,
      :func:`loopwright.agent_tool`); 0: a tool may not start a run. Such a child run charges
      its parent's ``max_iterations``, ``max_tool_calls`` and ``max_total_tokens`` and ends by
      its deadline.

    The three wall-clock budgets are ``None`` (no bound) only when you say so.
    - ``max_tool_result_chars``: characters of one tool result the model sees (structured
      results counted as JSON text); a longer one is cut, with a note saying so.
    - ``max_model_retries``: retries of a failed model call before the run fails.
    - ``retry_backoff_s``: first retry delay; doubles each retry, at most 30 s.
    - ``salvage``: when a budget is spent, make one last tool-less call for the best answer.
    - ``max_fallbacks``: switches to the agent's next ``fallback_models`` in one run (a model
      call that failed for good); 0: none, the run fails as it would without them.
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
    - ``max_tool_retries``: retries of tool calls in one run (``@tool(retries=N)``: a tool that
      raised ``RetryTool``, arguments that did not validate, an exception of ``retry_on``); a
      retry asked past it is answered with the error and the loop stops going round
      (``RunResult.limit == "max_tool_retries"``).
    - ``max_transitions``: transitions one run may take, whatever its machine (default
      100,000: far more than any run its other budgets allow). The engine's own bound, for the
      cycles no row bounds (a machine run with ``Runner(agent, unverified=True)``): past it the
      run ends with outcome ``"limit"`` (``RunResult.limit == "max_transitions"``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_iterations: PositiveInt = 10
    max_tool_calls: PositiveInt | None = None
    max_total_tokens: PositiveInt | None = None
    max_cost_usd: PositiveFloat | None = None
    timeout_s: PositiveFloat | None = 1800.0
    tool_timeout_s: PositiveFloat | None = 300.0
    model_timeout_s: PositiveFloat | None = 600.0
    max_model_retries: int = Field(default=2, ge=0)
    retry_backoff_s: float = Field(default=0.5, ge=0)
    salvage: bool = True
    max_fallbacks: int = Field(default=3, ge=0)
    max_transfers: int = Field(default=5, ge=0)
    max_ping_pong: int = Field(default=3, ge=1)
    max_suspensions: int = Field(default=10, ge=0)
    wait_timeout_s: PositiveFloat | None = None
    max_repeated_calls: int | None = Field(default=3, ge=2)
    max_parse_retries: int = Field(default=3, ge=0)
    max_observations: int = Field(default=5, ge=0)
    max_compactions: int = Field(default=3, ge=0)
    max_tool_retries: int = Field(default=10, ge=0)
    max_tool_result_chars: PositiveInt | None = 100_000
    max_depth: int = Field(default=3, ge=0)
    salvage_reserve_s: PositiveFloat = 30.0
    max_transitions: PositiveInt = 100_000

    @property
    def salvage_reserve(self) -> float:
        """Seconds of ``timeout_s`` kept for the salvage call: ``salvage_reserve_s``, at most a
        quarter of ``timeout_s``; none when salvage is off or there is no ``timeout_s``."""
        if not self.salvage or self.timeout_s is None:
            return 0.0
        return min(self.salvage_reserve_s, self.timeout_s / 4)

    if not TYPE_CHECKING:  # type checkers see the fields' own signature (a misspelt name is an error there)

        def __init__(self, **values: Any) -> None:
            try:
                super().__init__(**values)
            except ValidationError as exc:
                raise ConfigurationError(_explain(exc)) from None

    def retry_delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.retry_backoff_s * (2 ** (attempt - 1)), 30.0))


def _explain(exc: ValidationError) -> str:
    """Which fields of Limits were wrong, what they take, and what they bound."""
    lines = []
    for err in exc.errors(include_url=False):
        name = str(err["loc"][0]) if err["loc"] else "(limits)"
        if err["type"] == "extra_forbidden":
            known = ", ".join(Limits.model_fields)
            lines.append(f"Limits has no field {name!r}; its fields are: {known}")
            continue
        lines.append(
            f"Limits({name}={err.get('input')!r}): {name} takes {_takes(name)} ({err['msg']}); "
            f"it bounds {_WHY.get(name, 'the run')}"
        )
    return "; ".join(lines)


def _takes(name: str) -> str:
    field = Limits.model_fields.get(name)
    if field is None or field.annotation is bool:
        return "True or False"
    at_least = "0" if any(getattr(m, "ge", None) == 0 for m in field.metadata) else None
    kind = (
        "a number of seconds"
        if name.endswith("_s")
        else "a number of US dollars"
        if name.endswith("_usd")
        else "a whole number"
    )
    bound = f">= {at_least}" if at_least else "> 0"
    none = " or None (no bound: only when you mean it)" if "Optional" in repr(field.annotation) else ""
    return f"{kind} {bound}{none}"


_WHY = {
    "max_iterations": "the passes through the model (the run ends, or salvages, after that many)",
    "max_tool_calls": "the tool calls a run executes",
    "max_total_tokens": "the tokens the model may use in a run",
    "max_cost_usd": "the US dollars a run's model calls may cost",
    "timeout_s": "the wall-clock seconds of a whole run",
    "tool_timeout_s": "the seconds one tool call may take",
    "model_timeout_s": "the seconds one model call may take",
    "max_model_retries": "the retries of a failed model call",
    "retry_backoff_s": "the first wait before a retry (it doubles each retry)",
    "salvage": "whether a spent budget ends in one last tool-less call",
    "max_fallbacks": "the switches to a fallback model in a run",
    "max_transfers": "the transfers between agents in a run",
    "max_ping_pong": "the transfers back and forth between two agents",
    "max_suspensions": "the times a run may wait for people or results",
    "wait_timeout_s": "how long a suspended run's requests stay open",
    "max_tool_result_chars": "the characters of one tool result the model sees",
    "max_depth": "how deep runs started inside tools may nest",
    "max_tool_retries": "the retries of tool calls in a run",
    "salvage_reserve_s": "the seconds of timeout_s kept for the salvage call",
    "max_transitions": "the transitions one run may take, whatever its machine",
}


COARSE_FROM_S = 2.0
"""Timeouts of at least this many seconds are kept by a shared quarter-second watch (about a
microsecond a call, at most ``TICK_S`` late); shorter ones get a timer of their own."""
TICK_S = 0.25


class Watched:
    """One awaited call under a time bound (see :func:`watch`): ``expired()`` after a
    ``CancelledError`` says whether it was the bound's own cancellation (then taken back),
    ``close()`` when the call is over, however it ended. Made by :func:`watch` only (its slots
    set there: no ``__init__`` frame at every tool call)."""

    __slots__ = ("before", "deadline", "fired", "handle", "shared", "task")
    deadline: float
    task: asyncio.Task[Any]
    shared: _Watch | None
    before: int
    fired: bool
    handle: asyncio.TimerHandle | None

    def fire(self) -> None:
        self.fired = True
        self.task.cancel()

    def expired(self) -> bool:
        """The ``CancelledError`` being handled is this bound's alone (taken back: the caller
        reports a timeout); False: someone else cancelled the task too (re-raise it)."""
        if self.fired:
            self.fired = False
            return self.task.uncancel() <= self.before
        return False

    def close(self) -> None:
        if self.shared is not None:  # the loop's shared watch, or (None) a timer of its own
            self.shared.live.discard(self)
        elif self.handle is not None:
            self.handle.cancel()
        if self.fired:  # it fired, but the call finished anyway
            self.task.uncancel()


class _Watch:
    """One per event loop: while calls are watched, a tick every ``TICK_S`` cancels those past
    their deadline."""

    __slots__ = ("clock", "handle", "live", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.live = loop, set[Watched]()
        self.handle: asyncio.TimerHandle | None = None
        self.clock: Callable[[], float] = time.monotonic if type(loop).time is _BASE_TIME else loop.time
        """``loop.time``: asyncio's own loops keep ``time.monotonic()``, read without a Python frame."""

    def tick(self) -> None:
        now = self.clock()
        for watched in [w for w in self.live if w.deadline <= now and not w.fired]:
            watched.fire()
        self.handle = self.loop.call_later(TICK_S, self.tick) if self.live else None


_running_loop = asyncio.get_running_loop
_BASE_TIME = asyncio.BaseEventLoop.time
_current_task = asyncio.current_task  # the C function on 3.12+
_new = object.__new__


W = TypeVar("W", bound="Watched")


def watch(seconds: float, kind: type[W] = Watched, task: asyncio.Task[Any] | None = None) -> W:  # type: ignore[assignment]
    """Bound the call the current task is about to await by ``seconds``: past them, the task
    is cancelled (``kind``: a subclass of Watched that carries more of the call's own; ``task``:
    the current task, when the caller has it at hand).
    Timeouts of ``COARSE_FROM_S`` or more share one watch per loop (kept to
    within ``TICK_S``: about a microsecond a call); shorter ones get a timer of their own.
    The caller's own frame does the rest (no coroutine of its: the model call and a tool call
    are bounded this way)::

        bound = watch(seconds)
        try:
            value = await call
        except asyncio.CancelledError:
            if bound.expired(): ...  # timed out
            raise
        finally:
            bound.close()
    """
    loop = _running_loop()
    if task is None:
        task = _current_task(loop)
    if task is None:
        raise RuntimeError("loopwright bounds a call inside an asyncio task; await it from a coroutine run as a task")
    watched = _new(kind)
    watched.task, watched.before, watched.fired, watched.handle = task, task.cancelling(), False, None
    if seconds < COARSE_FROM_S:
        watched.deadline, watched.shared = 0.0, None
        watched.handle = loop.call_later(seconds, watched.fire)
        return watched
    shared: _Watch | None = getattr(loop, "_loopwright_watch", None)
    if shared is None:
        shared = _Watch(loop)
        loop._loopwright_watch = shared  # type: ignore[attr-defined]
    watched.deadline, watched.shared = shared.clock() + seconds, shared
    shared.live.add(watched)
    if shared.handle is None:
        shared.handle = loop.call_later(TICK_S, shared.tick)
    return watched
