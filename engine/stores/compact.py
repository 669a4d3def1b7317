"""The compact form of a run's log a store writes: one codec, its writer and its reader together.

A checkpoint's *body* holds what is new since the previous checkpoint: ``{"s": seq of its first
event, "w": [stage, iteration, agent] before it, "m": messages, "t": trace entries, "e": events,
"k": own field names of the event types the worker had not written yet, "g": ``[number, label]``
of the guard labels it had not written yet}`` (see :mod:`loopwright.stores.base`). Its events:

- a transition: ``[time, source, dest, guard number]``;
- another event: ``[type, time, *its own field values]`` (a ``model_responded`` of the reply in
  the checkpoint's head: ``["model_responded", time]``, the reply kept once);
- ``[null, stage, iteration, agent]``: where the next one was recorded;
- a built event: its JSON.

A *head* is the run's state without its history, whole or only the fields that changed (it
begins with :data:`DELTA`); :func:`merge_heads` makes the whole one of a run's heads.

:func:`compact_events` writes the events from the run's event log (its compact entries, nothing
built); :func:`decode_bodies` reads the bodies back into messages, trace and event dicts. A test
(``tests/stores/test_store_compact.py``) pins that one reads what the other writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import zip_longest
from typing import Any, Protocol

from ..data.event_log import Where, entry_values, own_values, walk
from ..data.events import EVENT_BY_TYPE, EVENT_FIELDS, EVENT_TYPE, EventBase, ModelResponded, is_reply, reply_of

FULL_HEAD_EVERY = 32
"""A worker writes the whole head at its first checkpoint and at every 32nd after it, so a
load applies at most 31 changes to the last whole head."""

DELTA = b'{"~":1'
"""How a head that holds only the changed fields begins."""


class Entries(Protocol):
    """What :func:`compact_events` reads of a run's event log (:class:`loopwright.data.event_log.EventLog`)."""

    entries: list[Any]
    times: Any
    """The entries' times (an ``array("d")``)."""


# ---------------------------------------------------------------- writing


def compact_events(
    log: Entries, start: int, at: Where, written: set[str], guards: dict[str, int], response: Any = None
) -> tuple[list[Any], dict[str, tuple[str, ...]], Where, list[Any]]:
    """The log's events from entry ``start`` as a store keeps them (the ``"e"`` of a body, see
    :mod:`loopwright.stores.base`), read from the compact entries through the event log's own
    walk (:func:`loopwright.data.event_log.walk`, :func:`~loopwright.data.event_log.entry_values`;
    nothing is built): a transition ``[time, source, dest, guard number]``; another event
    ``[type, time, *its own field values]``; before an entry recorded at another iteration or
    agent (or stage, for an event) than the one before it ``[null, stage, iteration, agent]``; a
    built event as itself. A ``model_responded`` of ``response`` (the run's latest reply, in the
    head written with these events) is ``["model_responded", time]``: the reply is kept once.

    Also returned: the own field names of the types not in ``written`` (added to it); where the
    run was after the last entry (``at``: before ``start``); and ``[number, guard]`` for each
    guard label not yet in ``guards`` (this worker's numbering of the labels, added to it)."""
    times = log.times
    out: list[Any] = []
    kinds: dict[str, tuple[str, ...]] = {}
    new_guards: list[Any] = []
    stage, iteration, agent = at
    for i, entry, now_stage, now_iteration, now_agent in walk(log.entries, start, at):
        if isinstance(entry, EventBase):  # a built event: it says where it was recorded
            stage, iteration, agent = now_stage, now_iteration, now_agent
            out.append(entry)
            continue
        when = times[i]
        kind, values = entry_values(entry)
        if kind is None:  # a transition (the commonest entry): it moves the stage itself
            if now_iteration != iteration or now_agent != agent:
                out.append([None, now_stage, now_iteration, now_agent])
            stage, iteration, agent = now_stage, now_iteration, now_agent
            row = values[0]
            number = guards.get(row.label)
            if number is None:
                number = guards[row.label] = len(guards)
                new_guards.append([number, row.label])
            out.append([when, row.source, stage, number])
            continue
        if now_stage != stage or now_iteration != iteration or now_agent != agent:
            stage, iteration, agent = now_stage, now_iteration, now_agent
            out.append([None, stage, iteration, agent])
        if kind == _MODEL_RESPONDED:
            if response is not None and is_reply(values, response):
                out.append([kind, when])  # the head's response
            else:  # the reply, or its values (see own_values)
                out.append([kind, when, values[0] if len(values) == 1 else reply_of(values)])
        else:
            out.append([kind, when, *own_values(kind, values)])
        if kind not in written:
            written.add(kind)
            kinds[kind] = EVENT_FIELDS[EVENT_BY_TYPE[kind]]
    return out, kinds, (stage, iteration, agent), new_guards


_MODEL_RESPONDED = EVENT_TYPE[ModelResponded]


# ---------------------------------------------------------------- reading

_NO_HEADS = object()


def decode_bodies(
    bodies: Iterable[bytes], run_id: str, events: bool = True, heads: Iterable[bytes] = ()
) -> tuple[list[Any], list[str], list[Any]]:
    """The messages, trace and (unless ``events`` is False) events of a run's bodies, in order
    (each event with its run id). A reply is kept once, in the head: decoding needs the rows'
    ``heads`` too."""
    messages: list[Any] = []
    trace: list[str] = []
    out: list[Any] = []
    kinds: dict[str, list[str]] = {}
    guards: dict[int, str] = {}
    response: Any = _NO_HEADS
    for body, head in zip_longest(bodies, heads):
        if head and b'"response"' in head:
            response = json.loads(head).get("response", response)
        if body:
            part = json.loads(body)
            new = part["m"]
            if any(type(m) is list for m in new):  # [agent]: the reply in the head, as its message
                new = [_reply_message(m[0], response) if type(m) is list else m for m in new]
            messages += new
            trace += part["t"]
            kinds.update(part.get("k", ()))
            guards.update(part.get("g", ()))
            if events:
                out += _events(part, kinds, guards, run_id, response) if "s" in part else _events_2(part, kinds, run_id)
    return messages, trace, out


def _reply_message(agent: str | None, response: Any) -> dict[str, Any]:
    if response is _NO_HEADS or response is None:
        raise ValueError("decode_bodies(...) needs the rows' heads to decode their bodies")
    return {"role": "assistant", "parts": response["parts"], "agent": agent}


def _events(
    part: dict[str, Any], kinds: dict[str, list[str]], guards: dict[int, str], run_id: str, response: Any
) -> list[Any]:
    """A body's events (``"s"``: the first one's seq, ``"w"``: where the run was before it;
    ``response``: its head's)."""
    seq = part["s"]
    stage, iteration, agent = part["w"]
    out: list[Any] = []
    for event in part["e"]:
        if type(event) is dict:  # a built event
            stage, iteration, agent = event["state"], event["iteration"], event["agent"]
        else:
            first = event[0]
            if first is None:  # where the next entry was recorded
                _, stage, iteration, agent = event
                continue
            if type(first) is not str:  # a transition: [time, source, dest, guard or its number]
                at, source, stage, guard = event
                if type(guard) is int:
                    guard = guards[guard]
                event = {"type": "state_entered", "run_id": run_id, "seq": seq, "time": at, "state": stage,
                         "iteration": iteration, "agent": agent, "source": source, "guard": guard}  # fmt: skip
            else:  # [type, time, *own field values]
                kind, at, *values = event
                if not values and kind == "model_responded":  # the reply in the head
                    if response is _NO_HEADS:
                        raise ValueError("decode_bodies(...) needs the rows' heads to decode their bodies")
                    values = [response]
                own = dict(zip(kinds[kind], values, strict=True))
                event = {"type": kind, "run_id": run_id, "seq": seq, "time": at, "state": stage,
                         "iteration": iteration, "agent": agent, **own}  # fmt: skip
        out.append(event)
        seq += 1
    return out


def _events_2(part: dict[str, Any], kinds: dict[str, list[str]], run_id: str) -> list[Any]:
    """A body written by schema 2: each event ``[type, seq, time, state, iteration, agent,
    *own field values]`` or built."""
    out: list[Any] = []
    for event in part["e"]:
        if type(event) is list:
            kind, seq, at, state, iteration, agent, *values = event
            own = dict(zip(kinds[kind], values, strict=True))
            event = {"type": kind, "run_id": run_id, "seq": seq, "time": at, "state": state,
                     "iteration": iteration, "agent": agent, **own}  # fmt: skip
        out.append(event)
    return out


def merge_heads(heads: Sequence[bytes]) -> bytes:
    """The whole head of a run from its heads in version order: the last whole one, with the
    changes written after it applied."""
    last = len(heads) - 1
    while last > 0 and heads[last].startswith(DELTA):
        last -= 1
    if last == len(heads) - 1:
        return heads[last]
    if heads[last].startswith(DELTA):
        raise ValueError("the run's log holds no whole head")
    merged = json.loads(heads[last])
    for head in heads[last + 1 :]:
        merged.update(json.loads(head))
    del merged["~"]
    return json.dumps(merged, separators=(",", ":")).encode()
