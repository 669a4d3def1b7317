"""A run's event log: the one owner of its entries' shapes — how an event is recorded (encoded,
compactly), how an entry is read back (decoded: built, as a plain dict, or as its own field
values) and how a reader walks the entries with the place each was recorded at. The store's
compact form (:func:`loopwright.stores.compact.compact_events`) reads the entries through
:func:`walk` and :func:`entry_values` here, so a new shape is a change of this module alone.

Events are recorded compactly: an entry is the event's class, time, stage, iteration, agent
and own fields, and the pydantic event is built only when someone reads it
(``RunResult.events``) or an event observer is watching (a stream, a sink, a log). A run that
nobody watches pays for no event object.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from .events import (
    EVENT_BY_TYPE,
    EVENT_CLASSES,
    EVENT_FIELDS,
    EVENT_TYPE,
    EventBase,
    ModelResponded,
    StateEntered,
    ToolCall,
    ToolCalled,
    make_event,
    reply_of,
)

_clock = time.time

LogEntry = Any
"""An event as recorded, one of:

- a built event (once someone read it);
- a ``Row``: the transition taken (a ``StateEntered`` into ``row.dest``), at the iteration and
  agent of the entry before it;
- ``(row, iteration, agent)``: a transition where either changed;
- a ``ToolCall``: a ``tool_called`` event of that call, at the stage, iteration and agent of
  the entry before it (:meth:`RunContext.record_call`: the call is frozen and the history
  keeps it, so the log keeps nothing of its own for it);
- ``(kind, *values)``: any other event, ``kind`` its ``type`` string, its own field values in
  ``EVENT_FIELDS[cls]`` order, at the stage, iteration and agent of the entry before it (a
  ``tool_called`` recorded where its place changed holds the call itself,
  ``(..., "tool_called", call)``, the log pointing at it rather than copying three fields;
  a ``model_responded`` may hold the reply's five field values instead of the reply,
  ``("model_responded", parts, usage, stop_reason, model, details or None)``
  (:func:`~loopwright.data.events.reply_values`): the parts are the history's, and the reply
  object, its ``__dict__`` and its empty ``details`` are not kept alive once the run moves
  on, a third of what a past iteration would otherwise keep; the usage is kept as its counts,
  a flat tuple (:func:`~loopwright.data.parts.usage_counts`: 112 bytes where the ``Usage``
  object took 352); :func:`own_values` reads them);
- ``(iteration, kind, *values)``: the same where only the iteration changed (a pass's first
  model request: no tuple for the place);
- ``((stage, iteration, agent), kind, *values)``: the same where the stage or agent changed.

An event is named by its ``type`` string, not its class: a tuple of strings and numbers is
one the garbage collector stops tracking, so a finished run's log costs it nothing to walk.

The times are kept apart, one float each in an array. So a transition costs the log 16 bytes,
another event one flat tuple, and events() rebuilds every field exactly in one pass.
"""


_TOOL_CALLED = EVENT_TYPE[ToolCalled]
_MODEL_RESPONDED = EVENT_TYPE[ModelResponded]

Where = tuple[str, int, str]
"""(stage, iteration, agent): where in the run an entry was recorded."""


class EventLog:
    """One run's events in ``seq`` order, built on demand. ``base`` is the ``seq`` before the
    first entry (a resumed run continues its numbering); ``start`` the (stage, iteration,
    agent) before it; ``stage``, ``iteration`` and ``agent`` those of the latest entry."""

    __slots__ = ("agent", "base", "entries", "iteration", "run_id", "stage", "start", "times")

    def __init__(self, run_id: str, base: int, stage: str = "", iteration: int = 0, agent: str = "") -> None:
        self.run_id = run_id
        self.base = base
        self.entries: list[LogEntry] = []
        self.times = array("d")
        self.start = (stage, iteration, agent)
        self.stage, self.iteration, self.agent = stage, iteration, agent

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, event: Any) -> None:
        """Append an event built elsewhere (one recorded by a durable executor, replayed)."""
        self.entries.append(event)
        self.times.append(event.time)
        self.stage, self.iteration, self.agent = event.state, event.iteration, event.agent

    # ------------------------------------------------------------ recording (the encoders)

    def record(self, stage: str, iteration: int, agent: str, kind: str, values: tuple[Any, ...]) -> None:
        """Record an event of type ``kind`` with its own field ``values`` (in ``EVENT_FIELDS``
        order) at (stage, iteration, agent): ``(kind, *values)`` where the place is the latest
        entry's, else with the iteration or the whole place in front."""
        if stage == self.stage and agent == self.agent:
            if iteration == self.iteration:
                self.entries.append((kind,) + values)  # noqa: RUF005 (cheaper than unpacking: no list built)
            else:
                self.iteration = iteration
                self.entries.append((iteration, kind, *values))
        else:
            where = self.stage, self.iteration, self.agent = stage, iteration, agent
            self.entries.append((where, kind, *values))
        self.times.append(_clock())

    def record_call(self, stage: str, iteration: int, agent: str, call: ToolCall) -> None:
        """Record the ``tool_called`` event of ``call``: the call itself where the place is the
        latest entry's (the history keeps the frozen call; the log keeps nothing of its own)."""
        if stage != self.stage or agent != self.agent or iteration != self.iteration:
            self.record(stage, iteration, agent, _TOOL_CALLED, (call,))
            return
        self.entries.append(call)
        self.times.append(_clock())

    def transition(self, row: Any, iteration: int, agent: str) -> None:
        """Record the ``state_entered`` event of taking ``row``: the row itself where the
        iteration and agent are the latest entry's (16 bytes with its time)."""
        if iteration == self.iteration and agent == self.agent:
            self.entries.append(row)
        else:
            self.entries.append((row, iteration, agent))
            self.iteration, self.agent = iteration, agent
        self.stage = row.dest
        self.times.append(_clock())

    # ------------------------------------------------------------ reading (the decoders)

    def latest(self) -> Any:
        """The latest event, built and kept (the log's own stage, iteration and agent are
        the latest entry's)."""
        i = len(self.entries) - 1
        entry = self.entries[i]
        if isinstance(entry, EventBase):
            return entry
        event = self.entries[i] = make_event(*self._parts(i, entry, self.stage, self.iteration, self.agent))
        return event

    def events(self) -> list[Any]:
        """Every event, built (and kept) in one pass."""
        entries = self.entries
        for i, entry, stage, iteration, agent in self._walk(0, self.start):
            if not isinstance(entry, EventBase):
                entries[i] = make_event(*self._parts(i, entry, stage, iteration, agent))
        return list(entries)

    def records(self, start: int, at: Where) -> tuple[list[Any], Where]:
        """The events from entry ``start`` on, each as its built event (if one was built) or a
        plain dict of all its fields (JSON-ready but for nested models; nothing is built or
        kept), and the (stage, iteration, agent) after the last. ``at`` is that before
        ``start`` (``log.start`` for 0): a reader that saves events as they come (a store)
        keeps it between calls, so each call costs only the new entries."""
        out: list[Any] = []
        for i, entry, stage, iteration, agent in self._walk(start, at):
            at = (stage, iteration, agent)
            if isinstance(entry, EventBase):
                out.append(entry)
                continue
            cls, run_id, seq, time, state, _, _, fields = self._parts(i, entry, stage, iteration, agent)
            out.append({"type": EVENT_CLASSES[cls][0], "run_id": run_id, "seq": seq, "time": time, "state": state,
                        "iteration": iteration, "agent": agent, **fields})  # fmt: skip
        return out, at

    def flat(self, start: int, at: Where) -> Iterator[tuple[int, Any, str, int, str, tuple[Any, ...]]]:
        """The entries from ``start`` as ``(i, cls, stage, iteration, agent, values)``, its
        own field values in ``EVENT_FIELDS[cls]`` order (``("source", "guard")`` for a
        ``StateEntered``); an event built already as ``(i, event, ...)`` with values ``()``.
        Nothing is built: what a store writes as it goes. ``at`` as for :meth:`records`."""
        for i, entry, stage, iteration, agent in self._walk(start, at):
            if isinstance(entry, EventBase):
                yield i, entry, stage, iteration, agent, ()
                continue
            cls, values = decoded(entry)
            yield i, cls, stage, iteration, agent, values

    def _walk(self, start: int, at: Where) -> Iterator[tuple[int, LogEntry, str, int, str]]:
        return walk(self.entries, start, at)

    def _parts(self, i: int, entry: LogEntry, stage: str, iteration: int, agent: str) -> tuple[Any, ...]:
        """``make_event``'s arguments for entry ``i`` (not a built event)."""
        cls, values = decoded(entry)
        fields = dict(zip(EVENT_FIELDS[cls], values, strict=True))
        return cls, self.run_id, self.base + i + 1, self.times[i], stage, iteration, agent, fields


def decoded(entry: LogEntry) -> tuple[Any, tuple[Any, ...]]:
    """The class and own field values of a compact entry (not a built event); a transition's
    are ``StateEntered``'s, its source and guard (the ``stage`` it is read at is its dest)."""
    kind, values = entry_values(entry)
    if kind is None:
        row = values[0]
        return StateEntered, (row.source, row.label)
    return EVENT_BY_TYPE[kind], own_values(kind, values)


def own_values(kind: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """An entry's values as the event's own fields (a ``tool_called`` kept as its call: the
    call's id, name and arguments; a ``model_responded`` kept as the reply's field values:
    the reply, rebuilt)."""
    if kind == _TOOL_CALLED and len(values) == 1:
        call = values[0]
        return call.id, call.name, call.args
    if kind == _MODEL_RESPONDED and len(values) == 5:
        return (reply_of(values),)
    return values


def walk(entries: Sequence[LogEntry], start: int, at: Where) -> Iterator[tuple[int, LogEntry, str, int, str]]:
    """Each entry from ``start`` with the stage, iteration and agent it was recorded at; ``at``
    is the place before ``start``."""
    stage, iteration, agent = at
    for i in range(start, len(entries)):
        entry = entries[i]
        if isinstance(entry, EventBase):
            stage, iteration, agent = entry.state, entry.iteration, entry.agent
        elif not isinstance(entry, tuple):
            if type(entry) is not ToolCall:  # a transition (a tool call keeps its place)
                stage = entry.dest
        else:
            first = entry[0]
            if type(first) is tuple:  # an event where the stage or agent changed
                stage, iteration, agent = first
            elif type(first) is int:  # an event where the iteration changed
                iteration = first
            elif type(first) is not str:  # a transition where the iteration or agent changed
                stage, iteration, agent = first.dest, entry[1], entry[2]
        yield i, entry, stage, iteration, agent


def entry_values(entry: LogEntry) -> tuple[str | None, tuple[Any, ...]]:
    """A compact entry's (not a built event's) type and values as recorded: ``(None, (row,))``
    for a transition; a ``tool_called`` may hold its call alone and a ``model_responded`` the
    reply or its five field values (:func:`own_values` makes them the event's own fields)."""
    if type(entry) is ToolCall:
        return _TOOL_CALLED, (entry,)
    if not isinstance(entry, tuple):
        return None, (entry,)
    first = entry[0]
    if type(first) is str:
        return first, entry[1:]
    if type(first) is tuple or type(first) is int:  # an event where its place changed
        return entry[1], entry[2:]
    return None, (first,)
