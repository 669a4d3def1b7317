"""Decisions for pending tool calls, handed to ``Runner.resume``: ``approve()``, ``deny(reason)``
or — for a credential or a long-running tool's result — the value itself."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Approve(BaseModel):
    """Run the call that waited for confirmation (exactly once)."""

    model_config = ConfigDict(frozen=True)
    type: Literal["approve"] = "approve"


class Deny(BaseModel):
    """Do not run the call; the model gets an error result "denied by the user: <reason>"."""

    model_config = ConfigDict(frozen=True)
    type: Literal["deny"] = "deny"
    reason: str = ""


def approve() -> Approve:
    return Approve()


def deny(reason: str = "") -> Deny:
    return Deny(reason=reason)


Decision = Approve | Deny | Any
