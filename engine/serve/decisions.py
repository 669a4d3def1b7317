"""Decisions over HTTP: what a body's decisions become for ``Runner.resume``, and the refusals
(:class:`ServeError`: an HTTP status and a message) when one does not fit the run."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..data.decisions import approve, deny
from ..data.errors import LoopwrightError
from ..data.run_state import RunState
from ..stores.base import SavedRun

STARLETTE_MISSING = "loopwright.serve needs Starlette and uvicorn: pip install 'loopwright[serve]'"
"""What ``loopwright.serve.app`` says when the ``serve`` extra is not installed."""

ENDED = frozenset({"final", "salvaged", "limit", "failed", "cancelled"})
"""Outcomes after which a run has no more events."""


class ServeError(LoopwrightError):
    """A request the service refuses: ``status`` (an HTTP status) and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True, frozen=True)
class DecisionIn:
    """One decision as the service takes it (the HTTP layer validates the body into these)."""

    call_id: str
    action: str
    """``approve``, ``deny`` or ``value`` (a credential, or a long-running tool's result)."""
    reason: str = ""
    args: dict[str, Any] | None = None
    value: Any = None


def approve_takes_args() -> bool:
    """Whether this loopwright's ``approve`` takes edited arguments (``approve(args=...)``)."""
    return "args" in inspect.signature(approve).parameters


def decisions_for(run_id: str, pending: list[Any], given: list[DecisionIn]) -> dict[str, Any]:
    """The runner's decisions for ``given`` (ServeError 409/422, nothing done, if one does not fit)."""
    by_id = {p.call_id: p for p in pending}
    waits = ", ".join(f"{p.call_id} ({p.tool}, {p.kind})" for p in pending) or "none"
    out: dict[str, Any] = {}
    for d in given:
        request = by_id.get(d.call_id)
        if request is None:
            raise ServeError(
                409,
                f"call {d.call_id!r} of run {run_id!r} is not pending (decided already, or never asked); "
                f"pending: {waits}",
            )
        if d.call_id in out:
            raise ServeError(422, f"two decisions for call {d.call_id!r}; send one per call")
        if request.kind == "confirmation" and d.action not in ("approve", "deny"):
            raise ServeError(422, f"call {d.call_id!r} waits for a confirmation: send action 'approve' or 'deny'")
        if request.kind != "confirmation" and d.action != "value":
            raise ServeError(422, f"call {d.call_id!r} waits for a {request.kind}: send action 'value' with the value")
        out[d.call_id] = _decision(d)
    return out


def _decision(d: DecisionIn) -> Any:
    if d.action == "deny":
        return deny(d.reason)
    if d.action == "value":
        return d.value
    if d.args is None:
        return approve()
    if not approve_takes_args():
        raise ServeError(
            422, "this loopwright's approve() takes no edited arguments; approve the call as it is (leave out args)"
        )
    return approve(args=d.args)  # type: ignore[call-arg,unused-ignore]


def pending_of(rs: RunState) -> list[Any]:
    return [
        p
        for part in rs.features.values()
        if (ask := getattr(part, "pending_requests", None)) is not None
        for p in ask()
    ]


def not_waiting(run_id: str, saved: SavedRun) -> str:
    if saved.outcome in ENDED:
        return f"run {run_id!r} has ended (outcome {saved.outcome!r}); it waits for no decision"
    return f"run {run_id!r} waits for no decision (it is in state {saved.stage!r}, outcome {saved.outcome!r})"
