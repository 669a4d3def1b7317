"""Runs in a session: ``runner.run(text, session=("app", "user-1", "s-42"))``.

The runner's session store (``Runner(agent, sessions=SQLiteSessions("app.db"))``,
:mod:`loopwright.stores.sessions`) holds the session for the run, and the run starts from it:

- its conversation (the messages so far, the agent that answered last), as ``after=`` would;
- its state, by scope: ``app:x`` (shared by every user of the app), ``user:x`` (by every
  session of the user), unprefixed keys (this session's own); ``temp:x`` keys live for one
  run and are never saved. ``state=`` given to ``run`` goes on top. The run's own key
  ``temp:session`` holds ``[app, user, session_id]`` (tools and memory read it).

When the run ends, the session keeps its messages and unprefixed state, and the ``app:`` and
``user:`` keys the run changed (set or removed) are written; those it did not touch are left as
another run may have written them meanwhile. A run that fails with an error saves nothing.

One run at a time on a session: a second one raises :class:`SessionBusy` (not queued). A run
that suspends (a confirmation, a long-running tool) or pauses keeps the session held: another
run on it is refused until ``runner.resume`` ends it, and saves the session then (in any
process, with a runner that has the same session store).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data.errors import ConfigurationError
from ..data.inputs import UserInput
from ..data.result import RunResult, copy_state
from ..stores.sessions import DELETED, SESSION_KEY, SavedSession, SessionBusy, SessionKey, SessionStore, check_key

Runner = Any
"""A :class:`~loopwright.loop.runner.Runner` (it imports this module: named here, not imported)."""
STOPPED = ("suspended", "paused")
"""Outcomes that keep the session held (the run goes on at ``resume``)."""


def scope_of(key: str) -> str:
    """``"app"``, ``"user"``, ``"temp"`` or ``"session"`` (unprefixed, or any other prefix)."""
    head, sep, _ = key.partition(":")
    return head if sep and head in ("app", "user", "temp") else "session"


def starting_state(saved: SavedSession, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state a run in ``saved`` starts from: the shared scopes, the session's own, then ``given``."""
    key = saved.key
    return {**copy_state(saved.scopes), **copy_state(saved.state), **(given or {}), SESSION_KEY: list(key)}


def split_end(state: Mapping[str, Any], started: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a run's end saves: the session's own state (no ``app:``/``user:``/``temp:`` keys),
    and the shared keys it changed from ``started`` (removed ones as :data:`DELETED`)."""
    own: dict[str, Any] = {}
    changed: dict[str, Any] = {}
    for key, value in state.items():
        scope = scope_of(key)
        if scope == "session":
            own[key] = value
        elif scope != "temp" and (key not in started or started[key] != value):
            changed[key] = value
    for key in started:
        if key not in state and scope_of(key) in ("app", "user"):
            changed[key] = DELETED
    return own, changed


def store_of(runner: Runner) -> SessionStore:
    sessions: SessionStore | None = runner.sessions
    if sessions is None:
        raise ConfigurationError(
            "run(..., session=...) needs a session store: Runner(agent, sessions=SQLiteSessions('app.db')) "
            "(from loopwright.stores.sessions)"
        )
    return sessions


async def run_in_session(runner: Runner, input: UserInput, session: object, options: dict[str, Any]) -> RunResult:
    """``runner.run(input, session=key, **options)``: hold the session, run from it, save its end."""
    from .run import Run

    key: SessionKey = check_key(session)
    if options.get("after") is not None:
        raise ConfigurationError("give a run session= or after=, not both: the session holds the conversation")
    sessions = store_of(runner)
    deps = options.pop("deps", runner.deps)
    rs = runner.new_run(input, **options)  # (checks the options, makes the run id)
    saved = await sessions.begin(key, rs.run_id)
    try:
        rs.state = starting_state(saved, options.get("state"))
        rs.messages = list(saved.messages)
        if options.get("agent") is None and saved.agent in runner.tree.agents:
            rs.active_agent = saved.agent
            runner.adopt(rs)  # (the turn limits of the agent that takes the message)
        run = Run(runner, rs, deps=deps)
        result = await run.run_to_end()
    except BaseException:
        await sessions.release(key, rs.run_id)
        raise
    await save_end(sessions, key, result, saved)
    return result


def kept_of(messages: list[Any], saved: list[Any]) -> int:
    """How many of ``messages`` lead with ``saved``'s, unchanged (the run shares their objects:
    a run that did not rewrite its history keeps them all)."""
    kept = 0
    for new, old in zip(messages, saved, strict=False):
        if new is not old and new != old:
            break
        kept += 1
    return kept


async def save_end(sessions: SessionStore, key: SessionKey, result: RunResult, saved: SavedSession) -> None:
    """Save a run's end in its session (a suspended or paused run keeps it held, unsaved):
    only the messages after those it started from (unless it rewrote them)."""
    if result.outcome in STOPPED:
        return
    own, changed = split_end(result.state, saved.scopes)
    messages = list(result.messages)
    kept = kept_of(messages, saved.messages)
    await sessions.commit(key, result.run_id, messages, own, changed, result.answered_by, kept)


async def after_resume(runner: Runner, result: RunResult) -> None:
    """A resumed run ended: if it holds a session, save its end there."""
    sessions: SessionStore | None = runner.sessions
    if sessions is None or result.outcome in STOPPED:
        return
    held = await sessions.held_by(result.run_id)
    if held is not None:
        await save_end(sessions, held.key, result, held)


__all__ = ["SESSION_KEY", "SessionBusy", "kept_of", "run_in_session", "scope_of", "split_end", "starting_state"]
