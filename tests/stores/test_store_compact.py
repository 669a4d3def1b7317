"""The log's compact form is one codec: what compact_events writes decode_bodies reads back, and both
stay byte for byte what stores hold today."""

from __future__ import annotations

import json
from array import array
from typing import Any

from loopwright.data.events import ToolCall
from loopwright.stores.compact import compact_events, decode_bodies
from loopwright.table.machine import Row


def more(rs: Any) -> bool:
    return True


class Log:
    """An event log's entries and times (what compact_events reads)."""

    def __init__(self, entries: list[Any], times: list[float]) -> None:
        self.entries, self.times = entries, array("d", times)


CALL = ToolCall(id="c1", name="add", args={"a": 1})
ENTRIES: list[Any] = [
    ("run_started", "hi"),  # an event at the run's place
    Row("start", "preprocess"),  # a transition
    (2, "model_requested", 1, 3, ["add"]),  # a new iteration
    Row("preprocess", "reason"),
    (Row("reason", "act", guards=(more,)), 2, "helper"),  # a transition where the agent changed
    CALL,  # a tool_called kept as the call itself
    (("act", 2, "main"), "tool_called", CALL),  # where the agent changed back
    Row("act", "decide", guards=(more,)),  # a guard label numbered before
]
TIMES = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]

BODY_EVENTS = (
    '[["run_started",1.0,"hi"],[1.5,"start","preprocess",0],[null,"preprocess",2,"main"],'
    '["model_requested",2.0,1,3,["add"]],[2.5,"preprocess","reason",0],[null,"act",2,"helper"],'
    '[3.0,"reason","act",1],["tool_called",3.5,"c1","add",{"a":1}],[null,"act",2,"main"],'
    '["tool_called",4.0,"c1","add",{"a":1}],[4.5,"act","decide",1]]'
)
"""The ``"e"`` of a body as stores hold it (a change here is a change of the format on disk)."""


def test_compact_events_writes_the_bytes_stores_hold() -> None:
    written: set[str] = set()
    guards: dict[str, int] = {}
    events, kinds, at, new_guards = compact_events(Log(ENTRIES, TIMES), 0, ("start", 1, "main"), written, guards)
    assert json.dumps(events, separators=(",", ":")) == BODY_EVENTS
    assert kinds == {
        "run_started": ("input",),
        "model_requested": ("attempt", "message_count", "tool_names"),
        "tool_called": ("call_id", "name", "args"),
    }
    assert at == ("decide", 2, "main")
    assert new_guards == [[0, "else"], [1, "more"]]
    again = compact_events(Log([*ENTRIES, Row("decide", "preprocess", guards=(more,))], [*TIMES, 5.0]),
                           len(ENTRIES), at, written, guards)  # fmt: skip
    assert again == ([[5.0, "decide", "preprocess", 1]], {}, ("preprocess", 2, "main"), [])


def test_decode_bodies_reads_what_compact_events_wrote() -> None:
    written: set[str] = set()
    guards: dict[str, int] = {}
    events, kinds, _, new_guards = compact_events(Log(ENTRIES, TIMES), 0, ("start", 1, "main"), written, guards)
    body = {"s": 1, "w": ["start", 1, "main"], "m": [], "t": ["preprocess"], "e": events, "k": kinds, "g": new_guards}
    messages, trace, read = decode_bodies([json.dumps(body).encode()], "r1", heads=[b"{}"])
    assert messages == [] and trace == ["preprocess"]
    assert [(e["seq"], e["type"], e["state"], e["iteration"], e["agent"]) for e in read] == [
        (1, "run_started", "start", 1, "main"),
        (2, "state_entered", "preprocess", 1, "main"),
        (3, "model_requested", "preprocess", 2, "main"),
        (4, "state_entered", "reason", 2, "main"),
        (5, "state_entered", "act", 2, "helper"),
        (6, "tool_called", "act", 2, "helper"),
        (7, "tool_called", "act", 2, "main"),
        (8, "state_entered", "decide", 2, "main"),
    ]
    assert read[4]["guard"] == "more" and read[1]["guard"] == "else" and read[0]["input"] == "hi"
    assert read[5] == {"type": "tool_called", "run_id": "r1", "seq": 6, "time": 3.5, "state": "act",
                       "iteration": 2, "agent": "helper", "call_id": "c1", "name": "add", "args": {"a": 1}}  # fmt: skip
