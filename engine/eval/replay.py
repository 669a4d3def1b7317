"""Recorded runs as cases, and replaying them.

:func:`case_from_events` turns a run's events (from a store: ``loopwright eval record``) into an
:class:`EvalCase`: its input, its tool calls as the expected trajectory (exact arguments), its
answer as the expected response, and its model replies with what each tool answered
(:class:`Replay`). Replayed, the agent gets the recorded replies in place of its model, as long
as its tools answer as they did: a tool that answers differently ends the run with an error
naming the call (the path has changed), so the case fails.
"""

from __future__ import annotations

from typing import Any

from ..data.errors import ModelError
from ..data.events import (
    Event,
    ModelRequest,
    ModelResponded,
    ModelResponse,
    RunFinished,
    RunStarted,
    ToolAnswered,
    ToolCalled,
    ToolResult,
)
from ..data.inputs import input_text
from ..runtime.agent import Agent
from .cases import EvalCase
from .expect import ExpectedCall, Replay


class ReplayDiverged(ModelError):
    """A replayed run's tools answered differently from the recorded run's (or it asked for
    more replies than were recorded)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ReplayModel:
    """Gives one agent's recorded replies in order, after checking that every recorded tool
    result the request holds is the one recorded."""

    def __init__(self, agent: str, replay: Replay) -> None:
        self.name = f"replay:{agent}"
        self._agent, self._replay = agent, replay
        self._replies = list(replay.replies.get(agent, []))
        self._errors = set(replay.errors)
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        recorded = self._replay.results
        for message in request.messages:
            for part in message.parts:
                if isinstance(part, ToolResult) and part.call_id in recorded:
                    was, was_error = recorded[part.call_id], part.call_id in self._errors
                    if part.content != was or part.is_error != was_error:
                        raise ReplayDiverged(
                            f"replay diverged: tool {part.name!r} (call {part.call_id}) answered "
                            f"{_short(part.content)}{' (an error)' if part.is_error else ''}; the recorded run got "
                            f"{_short(was)}{' (an error)' if was_error else ''}"
                        )
        if self._next >= len(self._replies):
            raise ReplayDiverged(
                f"replay diverged: agent {self._agent!r} asked for reply {self._next + 1}; "
                f"the recorded run has {len(self._replies)}"
            )
        reply = self._replies[self._next]
        self._next += 1
        return reply


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


def replayed_agent(agent: Agent, replay: Replay) -> Agent:
    """``agent`` (and every agent below it) on the recorded replies."""
    subs = [replayed_agent(sub, replay) for sub in agent.sub_agents]
    return agent.replace(model=ReplayModel(agent.name, replay), sub_agents=subs)


def case_from_events(events: list[Event], name: str | None = None) -> EvalCase:
    """An eval case from a finished run's events (see the module docstring)."""
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    if started is None:
        raise ValueError("the events hold no run_started event: give every event of the run")
    finished = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    replies: dict[str, list[ModelResponse]] = {}
    results: dict[str, Any] = {}
    errors: list[str] = []
    calls: list[ExpectedCall] = []
    for e in events:
        if isinstance(e, ModelResponded):
            replies.setdefault(e.agent, []).append(e.response)
        elif isinstance(e, ToolCalled):
            calls.append(ExpectedCall(name=e.name, args=dict(e.args)))
        elif isinstance(e, ToolAnswered):
            results[e.call_id] = e.content
            if e.is_error:
                errors.append(e.call_id)
    answered = {e.call_id: e.content for e in events if isinstance(e, ToolAnswered)}
    by_id = [e.call_id for e in events if isinstance(e, ToolCalled)]
    calls = [c.model_copy(update={"result": answered.get(i)}) for c, i in zip(calls, by_id, strict=True)]
    output = finished.output if finished is not None else None
    return EvalCase(
        name=name or f"run-{started.run_id[:12]}",
        input=input_text(started.input),
        expected_calls=calls,
        expected_response=output,
        tags=["recorded", f"run:{started.run_id}", f"outcome:{finished.outcome if finished else 'unfinished'}"],
        replay=Replay(replies=replies, results=results, errors=errors),
    )


__all__ = ["ReplayDiverged", "ReplayModel", "case_from_events", "replayed_agent"]
