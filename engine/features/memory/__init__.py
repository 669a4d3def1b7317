"""memory: what the user said in earlier sessions, as a tool and as a preload.

``memory = Memory(SQLiteMemory("app.db"))`` (any :class:`~loopwright.stores.memory.MemoryService`)
gives an agent in a session (``runner.run(text, session=(app, user, id))``) two ways to recall:

- ``memory.tool``, the ``load_memory(query)`` tool: the model searches the user's earlier
  sessions (of this app) when it decides to;
- ``memory.extension`` (with ``preload=True``, the default): the state ``recall``, between
  ``start`` and ``preprocess``, searches them once with the run's input, and each pass's request
  carries what it found as an instruction (not added to the conversation, so not saved with the
  session). Its slice :class:`Recalled` keeps the passages.

Both read the run's session from beside the run (:func:`~loopwright.stores.sessions.session_of`:
the session the run holds, never a value of its state, which its tools can write); outside a
session they find nothing (the tool says so to the model). Passages of the run's own session
are left out (they are in the conversation already). Sessions go into memory with
``await service.add_session(session)`` (e.g. ``await sessions.load(key)`` after a run).

``Agent(tools=[memory.tool], extensions=[memory.extension])``. The preload's state is entered
from ``start -> preprocess``; with another feature that inserts a state there (the Planner's
``plan``, guardrails' ``guard_input``) it composes by the table's rule for a shared row (the
feature composed later is entered first: :mod:`loopwright.table.table_edits`), so an agent's
own extensions come first: ``start -> recall -> plan -> preprocess``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopwright.data.events import Instruction, ModelRequest
from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext
from loopwright.runtime.tools import Tool, tool
from loopwright.stores.memory import MemoryHit, MemoryService
from loopwright.stores.sessions import session_of
from loopwright.table.machine import Extension
from loopwright.table.rows import PRE, START, Row, cancellable

NAME = "memory"
RECALL = "recall"


@dataclass(slots=True)
class Recalled:
    """The memory feature's slice of a run's state (``RunState.features["memory"]``)."""

    passages: list[str] | None = None
    """What the preload found (None: nothing, or not searched)."""


def render(hits: list[MemoryHit]) -> list[str]:
    return [f"({hit.role}, session {hit.session}) {hit.text}" for hit in hits]


async def recall_for(service: MemoryService, query: str, ctx: Any, limit: int) -> list[MemoryHit] | None:
    """The passages of earlier sessions that match ``query`` (None: the run of ``ctx``, a
    context or run state, is in no session)."""
    key = await session_of(ctx)
    if key is None:
        return None
    app, user, sid = key
    hits = await service.search(query, user, app=app, limit=limit + 8)
    return [h for h in hits if h.session != sid][:limit]


def input_text(rs: RunState) -> str:
    given = rs.input
    if isinstance(given, str):
        return given
    return " ".join(getattr(p, "text", "") for p in getattr(given, "parts", given) or ())


@dataclass(frozen=True, eq=False)
class Memory:
    """Recall across sessions from ``service``: :attr:`tool` and :attr:`extension` (see the
    module docstring). ``limit``: at most that many passages a search; ``preload=False``: the
    extension searches nothing (use the tool alone)."""

    service: MemoryService
    limit: int = 5
    preload: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"Memory(limit={self.limit!r}): limit is a whole number of passages, at least 1")
        if not callable(getattr(self.service, "search", None)):
            raise ValueError(
                f"Memory(service=...) takes a MemoryService (SQLiteMemory, PostgresMemory), got {self.service!r}"
            )
        object.__setattr__(self, "tool", self._make_tool())
        object.__setattr__(self, "extension", self._make_extension())

    tool: Tool = field(init=False, repr=False, compare=False)
    """The ``load_memory(query)`` tool."""
    extension: Extension = field(init=False, repr=False, compare=False)
    """The preload: the ``recall`` state and its rows, as one feature."""

    def _make_tool(self) -> Tool:
        memory = self

        @tool(name="load_memory")
        async def load_memory(ctx: RunContext, query: str) -> str:
            """Search what the user said in earlier sessions (facts, preferences, past requests).
            Give a few keywords."""
            hits = await recall_for(memory.service, query, ctx, memory.limit)
            if hits is None:
                return "No memory: this run is not in a session."
            if not hits:
                return "Nothing found in earlier sessions."
            return "\n".join(render(hits))

        return load_memory

    def _make_extension(self) -> Extension:
        memory = self

        async def recall(rs: RunState, ctx: RunContext) -> None:
            """Search earlier sessions with the run's input; keep what was found in the slice."""
            if not memory.preload:
                return
            hits = await recall_for(memory.service, input_text(rs), rs, memory.limit)
            rs.features[NAME].passages = render(hits) if hits else None

        return Extension(
            name=NAME,
            states={RECALL: recall},
            redirect={(START, PRE): RECALL},
            rows=[cancellable(RECALL), Row(RECALL, PRE)],
            slice=Recalled,
            request=show_memory,
        )


def show_memory(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: the passages the preload found, as an instruction."""
    found: Recalled | None = rs.features.get(NAME)
    if found is None or not found.passages:
        return request
    text = "From the user's earlier sessions (use it if it helps):\n" + "\n".join(f"- {p}" for p in found.passages)
    return request.model_copy(update={"instructions": (*request.instructions, Instruction(text=text))})


__all__ = ["RECALL", "Memory", "Recalled", "show_memory"]
