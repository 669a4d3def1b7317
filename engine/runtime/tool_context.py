"""What a tool sees of its run: the ``ctx`` a tool takes (:class:`ToolContext`) and its
read-only view of the run's state (:class:`RunView`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Generic

from typing_extensions import TypeVar

DepsT = TypeVar("DepsT", default=Any)


class RunView:
    """A read-only view of a run's state, for tools: attributes read as in
    :class:`~loopwright.RunState`, lists as tuples, dicts as read-only mappings; setting one is
    an error. A tool keeps its own data in ``ctx.state`` (the session state)."""

    __slots__ = ("_rs",)

    def __init__(self, rs: Any) -> None:
        object.__setattr__(self, "_rs", rs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._rs, name)
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, dict):
            return MappingProxyType(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"a tool cannot set run_state.{name}: the run's state is read-only in tools; keep the tool's data in "
            "ctx.state (the session state)"
        )

    def __repr__(self) -> str:
        return f"RunView({self._rs.run_id!r})"


class ToolContext(Generic[DepsT]):
    """What a tool's ``ctx`` parameter receives: ``run_id``, ``agent`` (the active agent),
    ``agents``, ``state`` (the session state: read and write it), ``credentials`` (supplied on
    resume), ``deps`` (the run's dependencies, never saved: annotate ``ctx: ToolContext[MyDeps]``
    to type them), ``limits``, ``call_id`` and ``idempotency_key`` (stable across a crash and resume),
    and ``run_state`` (a read-only :class:`RunView`: a tool cannot rewind
    the run's counters or rewrite its history)."""

    __slots__ = ("_ctx", "run_state")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.run_state = RunView(ctx.run_state)

    @property
    def run_id(self) -> str:
        return str(self._ctx.run_id)

    @property
    def agent(self) -> Any:
        return self._ctx.agent

    @property
    def agents(self) -> Any:
        return self._ctx.agents

    @property
    def state(self) -> dict[str, Any]:
        return self._ctx.state  # type: ignore[no-any-return]

    @property
    def credentials(self) -> dict[str, Any]:
        return self._ctx.credentials  # type: ignore[no-any-return]

    @property
    def deps(self) -> DepsT:
        """The run's dependencies (``runner.run(text, deps=...)``; supplied again on resume)."""
        return self._ctx.deps  # type: ignore[no-any-return]

    @property
    def limits(self) -> Any:
        return self._ctx.limits

    @property
    def call_id(self) -> str | None:
        """The id of the tool call being run."""
        return self._ctx.call_id  # type: ignore[no-any-return]

    @property
    def idempotency_key(self) -> str:
        """``run_id:call_id``, the same across a crash and resume: pass it to payment or email
        APIs that take an idempotency key, so the call's work is done once."""
        return self._ctx.idempotency_key  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"ToolContext({self.run_id!r})"
