"""RunResult: what a finished run hands back."""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr, computed_field

from .build import all_fields, new_object, set_dict, set_extra, set_fields_set, set_private
from .events import EVENT_ADAPTER, Blocked, ErrorInfo, Event, Message, Outcome, PendingRequest, Usage
from .run_state import RunState


def copy_state(value: Any) -> Any:
    """A copy of session state (JSON data: dicts and lists copied all the way down)."""
    kind = type(value)
    if kind is dict:
        return {k: copy_state(v) for k, v in value.items()}
    if kind is list:
        return [copy_state(v) for v in value]
    return value


class RunResult(BaseModel):
    """The end of a run.

    A result is a snapshot: its ``messages``, ``trace`` and ``state`` do not change when the
    run is resumed or the conversation goes on (``run_state`` is the live run, for resuming).

    ``outcome`` is ``"final"`` (the model answered), ``"salvaged"`` (a budget ran out and the
    salvage call answered), ``"limit"`` (a budget ran out; ``limit`` names it), ``"failed"``
    (``error`` says why), ``"cancelled"``, ``"blocked"`` (a guard blocked it: ``blocked`` names
    the guard and its message), or ``"suspended"`` (calls wait: ``pending``; continue
    with ``Runner.resume``). ``trace`` lists the states visited in order,
    terminal included; ``events`` is every event of the run, in ``seq`` order (every leg of a
    resumed run: see :attr:`events`).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    agent: str
    answered_by: str
    """The agent whose turn ended the run (the next message of the conversation goes to it)."""
    outcome: Outcome
    output: Any
    """The answer for people: the final (or salvaged) text, or for an agent with an
    ``output_type``, the validated object."""
    trace: list[str]
    usage: Usage
    cost_usd: Decimal | None
    """What the run's model calls cost in US dollars, exactly: the sum of each reply's
    ``usage.cost_usd``; None when a call's cost is unknown (its model has no price:
    :func:`loopwright.models.prices.register_price`), never a partial sum or a guess."""
    models_used: list[str]
    """Every model the run called, by name (an adapter's model id, a ScriptedModel's name), in
    the order it first called them: a run that switched to a fallback model names both."""
    iterations: int
    tool_calls: int
    error: ErrorInfo | None
    limit: str | None
    messages: list[Message]
    state: dict[str, JsonValue]
    pending: list[PendingRequest]
    """While the outcome is "suspended": the requests to decide (``Runner.resume``)."""
    blocked: Blocked | None = None
    """When the outcome is "blocked": the guard that blocked the run, where, and its message."""
    run_state: RunState = Field(exclude=True, repr=False)
    """The run's state (``to_json()`` it to resume elsewhere). Resuming continues it."""
    _log: Any = PrivateAttr(default=None)
    _earlier: tuple[Any, ...] = PrivateAttr(default=())
    _machine: Any = PrivateAttr(default=None)

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def events(self) -> list[Event]:
        """Every event of the run, in ``seq`` order, its earlier legs' too: those run in this
        process (resumed from a RunResult or its RunState) or kept by the runner's store
        (resumed by run id). A run resumed from ``RunState.from_json`` without a store has its
        events from the resume on (the first one's ``seq`` says where they begin)."""
        log = self._log
        if log is None:
            return []
        if not self._earlier:
            return log.events()  # type: ignore[no-any-return]
        out = [event for leg in self._earlier for event in leg.events()]
        out += log.events()
        return out

    @property
    def machine(self) -> Any:
        """The machine the run ran on (``loopwright.machines.diagram(result)`` draws it with the run's path)."""
        return self._machine

    @classmethod
    def of(cls, rs: RunState, log: Any, machine: Any = None) -> RunResult:
        if rs.outcome is None:
            raise ValueError(f"run {rs.run_id} has not ended (it is in state {rs.stage!r})")
        ended = rs.outcome not in _GOES_ON  # its trace and history never change again: shared, not copied
        features = rs.features
        legs = rs.legs
        earlier = legs[:-1] if legs and legs[-1] is log else legs  # (a suspended run's own leg is its log)
        plain = False  # every slice of the run's features is one with no output and no requests of its own
        if features:
            kinds = tuple(map(type, features.values()))
            known = _PLAIN.get(kinds)
            if known is None:
                known = _PLAIN[kinds] = all(map(_plain_slice, kinds))
            plain = known
        result = new_object(cls)  # (events.trusted, written out, its private attributes set at once)
        set_dict(
            result,
            {
                "run_id": rs.run_id,
                "agent": rs.agent,
                "answered_by": rs.active_agent,
                "outcome": rs.outcome,
                "output": _output(rs) if features and not plain else rs.output,
                "trace": rs.trace if ended else list(rs.trace),
                "usage": rs.usage,
                "cost_usd": rs.usage.cost_usd,
                "models_used": rs.models_used if ended else list(rs.models_used),
                "iterations": rs.iteration,
                "tool_calls": rs.tool_calls_made,
                "error": rs.error,
                "limit": rs.limit,
                "messages": rs.messages if ended else list(rs.messages),
                "state": copy_state(rs.state) if rs.state else {},
                "pending": [
                    p for part in features.values() if (ask := getattr(part, "pending_requests", None)) for p in ask()
                ]
                if features and not plain
                else [],
                "blocked": getattr(features.get("guardrails"), "blocked", None) if rs.outcome == "blocked" else None,
                "run_state": rs,
            },
        )
        set_fields_set(result, _ALL_FIELDS)
        set_extra(result, None)
        set_private(result, {"_log": log, "_earlier": earlier, "_machine": machine})
        return result


class StoredLeg:
    """The events a store kept of a run before this process resumed it (``store.events``:
    JSON, built when first read): the earlier legs of a run resumed by its id."""

    __slots__ = ("_built", "_raw", "_upto")

    def __init__(self, raw: list[bytes], upto: int) -> None:
        self._raw, self._upto = raw, upto
        self._built: list[Event] | None = None

    def events(self) -> list[Event]:
        """The kept events up to ``seq`` ``upto`` (those of the checkpoint resumed from)."""
        if self._built is None:
            built = [EVENT_ADAPTER.validate_json(raw) for raw in self._raw]
            self._built, self._raw = [e for e in built if e.seq <= self._upto], []
        return self._built


_PLAIN: dict[tuple[type[Any], ...], bool] = {}
"""Whether runs whose feature slices are of these types have no ``final_output`` and no
``pending_requests`` among them (found once a set of types: a run's result then reads neither)."""


def _plain_slice(kind: type[Any]) -> bool:
    """A slice type (a dataclass) whose instances have no ``final_output`` and no ``pending_requests``."""
    names = getattr(kind, "__dataclass_fields__", None)
    if names is None:
        return False
    return not any(hasattr(kind, name) or name in names for name in ("final_output", "pending_requests"))


_GOES_ON = frozenset({"suspended", "paused"})
"""Outcomes of a run that resuming continues (the result keeps copies of what it then changes)."""


def _output(rs: RunState) -> Any:
    """The run's text output, unless a feature's slice offers a ``final_output()`` (the
    structured-output feature: the validated object)."""
    for part in rs.features.values():
        final = getattr(part, "final_output", None)
        if final is not None and (value := final()) is not None:
            return value
    return rs.output


_ALL_FIELDS = all_fields(RunResult)
