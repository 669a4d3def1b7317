"""What a session store keeps, and the protocol each implements (:mod:`loopwright.stores.sessions`
says where: its tables, in SQLite; :mod:`loopwright.stores.sessions_postgres` in PostgreSQL)."""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from ..data.errors import ConfigurationError, LoopwrightError
from ..data.parts import Message

SessionKey = tuple[str, str, str]
"""``(app, user, session)``."""

MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
DELETED: Any = type("Deleted", (), {"__repr__": lambda self: "DELETED"})()
"""In :meth:`SessionStore.commit`'s ``scopes``: the key was removed (its row is deleted)."""


class SessionBusy(LoopwrightError, RuntimeError):
    """Another run holds this session (one run at a time on a session): wait for it to end (or
    resume it, if it is suspended), or, if the process that ran it died, free it with
    ``await sessions.release(key)``. Nothing was run and nothing changed."""


@dataclass(slots=True)
class SavedSession:
    """A session as a store holds it."""

    key: SessionKey
    messages: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    """The session's own state (unprefixed keys)."""
    scopes: dict[str, Any] = field(default_factory=dict)
    """The app's and the user's shared state, prefixed: ``{"app:x": ..., "user:y": ...}``."""
    agent: str | None = None
    """The agent that answered last (None: a new session)."""
    updated: float = 0.0

    @property
    def app(self) -> str:
        return self.key[0]

    @property
    def user(self) -> str:
        return self.key[1]

    @property
    def id(self) -> str:
        return self.key[2]


def check_key(key: object) -> SessionKey:
    """``key`` as a session key, or a one-line ConfigurationError saying what a key is."""
    if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) and k for k in key)):
        raise ConfigurationError(
            f"a session is named by three non-empty strings (app, user, session_id), got {key!r}; "
            'e.g. session=("my-app", "user-1", "s-42")'
        )
    return key


def busy(key: SessionKey, holder: str) -> SessionBusy:
    return SessionBusy(
        f"session {key!r} is held by run {holder!r} (one run at a time on a session); wait for that run to end "
        "(or resume it, if it is suspended), or, if the process that ran it died, free the session: "
        "await sessions.release(key)"
    )


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions are kept (:class:`SQLiteSessions`, :class:`PostgresSessions`)."""

    async def begin(self, key: SessionKey, holder: str) -> SavedSession:
        """Hold the session for run ``holder`` (made if new) and return it; SessionBusy if
        another run holds it."""
        ...

    async def commit(
        self, key: SessionKey, holder: str, messages: list[Message], state: Mapping[str, Any],
        scopes: Mapping[str, Any], agent: str | None, kept: int = 0,
    ) -> None:  # fmt: skip
        """Save the end of run ``holder``: the session's messages (the first ``kept`` are stored
        already, unchanged: only the others are written) and own state, the ``app:`` and
        ``user:`` keys it changed (:data:`DELETED`: removed), and free the session."""
        ...

    async def release(self, key: SessionKey, holder: str | None = None) -> None:
        """Free the session without saving (only if ``holder`` holds it, when given)."""
        ...

    async def held_by(self, holder: str) -> SavedSession | None:
        """The session run ``holder`` holds (``scopes``: the values it started from), if any."""
        ...

    async def load(self, key: SessionKey) -> SavedSession | None: ...

    async def sessions(self, app: str, user: str) -> list[SavedSession]:
        """The user's sessions of the app, the latest first."""
        ...

    async def close(self) -> None: ...


class RunSession:
    """Which session a run holds, kept beside the run in this process, never in its state (a
    tool can write any state key, ``temp:`` ones too): made when the run holds its session
    (``key``), or, for a run resumed from a store, from ``sessions``, the session store, whose
    hold names the run (``held_by``, asked once, at first use). The run object keeps it alive;
    :func:`session_of` finds it by the run's id and state (a run of another runner with the
    same id finds nothing)."""

    __slots__ = ("__weakref__", "key", "run_state", "sessions")

    def __init__(self, run_state: Any, key: SessionKey | None = None, sessions: SessionStore | None = None) -> None:
        self.run_state = run_state
        self.key = key
        self.sessions = sessions
        _BESIDE[run_state.run_id] = self


_BESIDE: weakref.WeakValueDictionary[str, RunSession] = weakref.WeakValueDictionary()


async def session_of(ctx: Any) -> SessionKey | None:
    """The ``(app, user, session_id)`` of the session the run of ``ctx`` (a tool's or a
    stage's context, or the run state) holds; None outside a session. Read from beside the run,
    so nothing in its state changes it: this is what memory searches, and what a tool that must
    know whose session it runs in reads."""
    rs = getattr(ctx, "run_state", ctx)
    rs = getattr(rs, "_rs", rs)  # (a tool's ctx holds a read-only view of the run state)
    run_id = getattr(rs, "run_id", None)
    beside = _BESIDE.get(run_id) if isinstance(run_id, str) else None
    if beside is None or beside.run_state is not rs:
        return None
    sessions = beside.sessions
    if sessions is not None:
        held = await sessions.held_by(rs.run_id)
        beside.key, beside.sessions = (None if held is None else held.key), None
    return beside.key


def scope_rows(key: SessionKey, scopes: Mapping[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """``(app, user or "", key, value JSON or None to delete)`` of each changed scoped key."""
    app, user, _ = key
    rows = []
    for name, value in scopes.items():
        scope, _, bare = name.partition(":")
        if scope not in ("app", "user") or not bare:
            raise ConfigurationError(f"{name!r} is not an app: or user: key; only those are shared")
        rows.append((app, user if scope == "user" else "", bare, None if value is DELETED else json.dumps(value)))
    return rows


def history(bodies: list[tuple[str]]) -> list[Message]:
    """The messages of ``(body JSON,)`` rows, in one parse."""
    return MESSAGES.validate_json("[" + ",".join(b for (b,) in bodies) + "]") if bodies else []


def message_rows(messages: list[Message], kept: int) -> list[tuple[int, str]]:
    """``(n, body JSON)`` of each message from ``kept`` on."""
    return [(n, m.model_dump_json()) for n, m in enumerate(messages[kept:], kept)]


def prefixed(rows: list[tuple[str, str, str]]) -> dict[str, Any]:
    """``{"app:k"|"user:k": value}`` of ``(user or "", key, value JSON)`` rows."""
    return {f"{'user' if user else 'app'}:{name}": json.loads(value) for user, name, value in rows}


__all__ = [
    "DELETED",
    "MESSAGES",
    "RunSession",
    "SavedSession",
    "SessionBusy",
    "SessionKey",
    "SessionStore",
    "busy",
    "check_key",
    "history",
    "message_rows",
    "prefixed",
    "scope_rows",
    "session_of",
]
