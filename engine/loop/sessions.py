"""Runs in a session: ``runner.run(text, session=("app", "user-1", "s-42"))``, and the same
``session=`` on ``runner.stream`` and ``runner.start`` (a :class:`SessionRun`: its first step
holds the session and starts the run from it; ``run_to_end``/``step`` drive it as any run).

The runner's session store (``Runner(agent, sessions=SQLiteSessions("app.db"))``,
:mod:`loopwright.stores.sessions`) holds the session for the run, and the run starts from it:

- its conversation (the messages so far, the agent that answered last), as ``after=`` would;
- its state, by scope: ``app:x`` (shared by every user of the app), ``user:x`` (by every
  session of the user), unprefixed keys (this session's own); ``temp:x`` keys live for one
  run and are never saved. ``state=`` given to ``run`` goes on top.

Which session a run holds is kept beside the run, never in its state (its tools can write
any state key): :func:`~loopwright.stores.sessions.session_of` reads it (memory does, and a
tool may: ``await session_of(ctx)``), from the run's hold, or, for a run resumed from a store,
from the session store's record of the run that holds each session.

When the run ends, the session keeps its messages and unprefixed state, and the ``app:`` and
``user:`` keys the run changed (set or removed) are written; those it did not touch are left as
another run may have written them meanwhile. A run that fails (outcome ``failed``, or an
exception that leaves it) saves nothing and frees the session; a cancelled one is saved.

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
from ..stores.sessions import DELETED, RunSession, SavedSession, SessionBusy, SessionKey, SessionStore, check_key
from .run import Run

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
    return {**copy_state(saved.scopes), **copy_state(saved.state), **(given or {})}


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


class SessionHold:
    """One run's session: held, and the run started from it, before the run's first step
    (:meth:`begin`); its end saved, or the session freed, when the run stops (:meth:`end`)."""

    __slots__ = ("agent_given", "beside", "given", "key", "saved", "sessions")

    def __init__(self, sessions: SessionStore, key: SessionKey, options: Mapping[str, Any]) -> None:
        self.sessions = sessions
        self.key = key
        self.given: Mapping[str, Any] | None = options.get("state")
        self.agent_given = options.get("agent") is not None
        self.saved: SavedSession | None = None
        """The session as the run started from it (None until :meth:`begin`)."""
        self.beside: RunSession | None = None
        """The session the run holds, beside the run (not in its state): :func:`session_of` reads it."""

    async def begin(self, run: Any) -> None:
        """Hold the session for ``run`` (SessionBusy if another run holds it) and start the run
        from its messages, state and last agent (``state=`` of the run on top)."""
        rs = run.state
        saved = await self.sessions.begin(self.key, rs.run_id)
        try:
            rs.state.clear()  # (in place: the run's context holds this dict)
            rs.state.update(starting_state(saved, self.given))
            rs.messages = list(saved.messages)
            runner = run.runner
            if not self.agent_given and saved.agent in runner.tree.agents and saved.agent != rs.active_agent:
                rs.active_agent = saved.agent
                run.ctx.switch_agent(saved.agent)
                runner.adopt(rs)  # (the turn limits of the agent that takes the message)
        except BaseException:
            await self.sessions.release(self.key, rs.run_id)
            raise
        self.saved = saved
        self.beside = RunSession(rs, self.key)

    async def end(self, result: RunResult) -> None:
        """The run stopped: its end saved (:func:`end_session`)."""
        assert self.saved is not None
        await end_session(self.sessions, self.key, result, self.saved)

    async def release(self, run_id: str) -> None:
        """The run left with an exception: the session is freed, nothing saved."""
        if self.saved is not None:
            await self.sessions.release(self.key, run_id)


class SessionRun(Run):
    """A :class:`~loopwright.loop.runner.Run` in a session (``run``, ``stream`` or ``start`` with
    ``session=``): its first step holds the session first, and the step that ends it saves the
    session's end. A run without a session is a plain Run: it pays nothing of this."""

    __slots__ = ("hold",)

    def __init__(self, runner: Any, rs: Any, hold: SessionHold, **kwargs: Any) -> None:
        self.hold = hold
        super().__init__(runner, rs, **kwargs)

    async def open(self) -> None:
        """Hold the session now and start the run from it, rather than at its first step (a
        server answers SessionBusy to the request that started the run). Once only."""
        hold = self.hold
        if hold.saved is not None:
            return
        try:
            await hold.begin(self)
        except BaseException:  # (SessionBusy: this run never ran; it is not left registered)
            self.runner.unregister(self.run_id)
            if self._save is not None:
                self._save.retire()
            raise

    async def steps(self, to_end: bool) -> Any:
        hold = self.hold
        if hold.saved is None:
            await self.open()
        try:
            row = await super().steps(to_end)
        except BaseException:
            await hold.release(self.run_id)
            raise
        if self.state.stage in self._terminals:
            await hold.end(self.result)
        return row


def session_run(runner: Runner, input: UserInput, session: object, options: dict[str, Any], **run: Any) -> SessionRun:
    """The run of ``runner.run/stream/start(input, session=key, **options)`` (not started:
    its first step holds the session). ``run``: the Run's own arguments (``sink``, ...)."""
    key: SessionKey = check_key(session)
    if options.get("after") is not None:
        raise ConfigurationError("give a run session= or after=, not both: the session holds the conversation")
    hold = SessionHold(store_of(runner), key, options)
    deps = options.pop("deps", runner.deps)
    return SessionRun(runner, runner.new_run(input, **options), hold, deps=deps, **run)


async def run_in_session(runner: Runner, input: UserInput, session: object, options: dict[str, Any]) -> RunResult:
    """``runner.run(input, session=key, **options)``: hold the session, run from it, save its end."""
    return await session_run(runner, input, session, options).run_to_end()


def kept_of(messages: list[Any], saved: list[Any]) -> int:
    """How many of ``messages`` lead with ``saved``'s, unchanged (the run shares their objects:
    a run that did not rewrite its history keeps them all)."""
    kept = 0
    for new, old in zip(messages, saved, strict=False):
        if new is not old and new != old:
            break
        kept += 1
    return kept


async def end_session(sessions: SessionStore, key: SessionKey, result: RunResult, saved: SavedSession) -> None:
    """Save a run's end in its session: only the messages after those it started from (unless
    it rewrote them). A suspended or paused run keeps the session held, unsaved; a failed one
    frees it and saves nothing."""
    if result.outcome in STOPPED:
        return
    if result.outcome == "failed":
        await sessions.release(key, result.run_id)
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
        await end_session(sessions, held.key, result, held)


__all__ = [
    "SessionBusy",
    "SessionHold",
    "SessionRun",
    "kept_of",
    "run_in_session",
    "scope_of",
    "session_run",
    "split_end",
    "starting_state",
]
