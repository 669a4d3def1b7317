"""Decisions for pending tool calls, handed to ``Runner.resume``: ``approve()``, ``deny(reason)``
or — for a credential or a long-running tool's result — the value itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Approve(BaseModel):
    """Run the call that waited for confirmation (exactly once). ``args``: run it with these
    arguments instead of the model's (checked against the tool's schema when the run is
    resumed; the model is told what ran); ``note``: words for the model, read with the result."""

    model_config = ConfigDict(frozen=True)
    type: Literal["approve"] = "approve"
    args: dict[str, Any] | None = None
    note: str = ""


class Deny(BaseModel):
    """Do not run the call; the model gets an error result "denied by the user: <reason>"."""

    model_config = ConfigDict(frozen=True)
    type: Literal["deny"] = "deny"
    reason: str = ""


def approve(*, args: Mapping[str, Any] | None = None, note: str = "") -> Approve:
    """Approve a call: as the model asked, or with ``args`` edited (every argument the call
    runs with, as the tool takes them); ``note`` goes to the model with the result."""
    return Approve(args=None if args is None else dict(args), note=note)


def deny(reason: str = "") -> Deny:
    return Deny(reason=reason)


Decision = Approve | Deny | Any
