"""loopwright's events as AG-UI events, so AG-UI front ends can follow and drive a run.

An AG-UI *thread* is a conversation: a chain of loopwright runs, one a message. The thread's
first run has the thread's id (``threadId``), the next ones ``<thread>~2``, ``<thread>~3``, ...
(:func:`thread_run`; ``.`` marks a workflow's child runs and ``:`` a leg, so neither is used).
A thread is its user's: with an auth hook the ids of its runs are ``<thread>@u<digest>``,
``<thread>@u<digest>~2``, ... (:func:`user_thread`), so two users' threads of the same id are
two threads, and one user's never blocks another's;
each continues the one before it (or, when the server keeps sessions, the user's session
``(agent, user, threadId)``). Each leg of a run (its start, then each resume) is one AG-UI
*run* (``runId``: the run id, then ``<run id>:<seq of the resumed event>``), and every event
of it carries the thread's id. The mapping:

=====================  =======================================================================
loopwright             AG-UI
=====================  =======================================================================
run_started, resumed   ``RUN_STARTED``
state_entered          ``STEP_FINISHED`` of the stage left, ``STEP_STARTED`` of the stage entered
text_delta             ``TEXT_MESSAGE_START`` (first delta of a reply), ``TEXT_MESSAGE_CONTENT``
model_responded        its text as ``TEXT_MESSAGE_START``/``CONTENT``/``END`` (or the ``END`` of
                       the streamed one)
tool_called            ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (the arguments' JSON), ``TOOL_CALL_END``
tool_answered          ``TOOL_CALL_RESULT``
suspended              ``RUN_FINISHED`` with ``outcome: {type: "interrupt", interrupts: [...]}``,
                       one interrupt per pending call (its ``id`` and ``toolCallId`` are the call id)
run_finished           ``RUN_FINISHED`` (``outcome`` ``success`` with ``result``, or ``cancelled``),
                       or ``RUN_ERROR`` for a run that failed or hit a limit
anything else          ``CUSTOM`` with ``name`` the event type and ``value`` the event
=====================  =======================================================================

An interrupt is answered with ``POST /runs/{id}/decisions`` (or, from an AG-UI client, a new
run input whose ``resume`` entries carry ``interruptId`` and ``status``: see
:func:`decisions_of_resume`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

USER_MARK = "@u"
"""Between a thread's id and its user's digest in the ids of its runs (:func:`user_thread`)."""
_USER_TAIL = re.compile(r"@u[0-9a-f]{16}$")
THREAD_MARK = "~"
"""Between a thread's id and the number of its run: ``<thread>~2`` is the thread's second run."""
KEPT_THREADS = 10_000
"""Threads whose latest run a service remembers (the oldest is forgotten first; the store has them all)."""

_CONFIRM_REASON = {"confirmation": "tool_approval", "credential": "credential_required", "result": "tool_result"}


class AguiMapper:
    """Maps one run's events (as JSON dicts, in order) to AG-UI events; it keeps the stream's
    state (the stage in progress, the reply being streamed)."""

    def __init__(self, thread: str | None = None) -> None:
        self.thread = thread
        """The ``threadId`` of every event (None: the run's own id)."""
        self.step: str | None = None
        self.message: str | None = None
        """The id of the assistant message being streamed (by text deltas), if any."""
        self.leg = ""

    def map(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        kind = e["type"]
        method = getattr(self, f"_{kind}", None)
        if method is None:
            return [{"type": "CUSTOM", "name": kind, "value": e}]
        out: list[dict[str, Any]] = method(e)
        return out

    def _ids(self, e: dict[str, Any]) -> dict[str, Any]:
        return {"threadId": self.thread or e["run_id"], "runId": self.leg or e["run_id"]}

    def _run_started(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        self.leg = e["run_id"]
        return [{"type": "RUN_STARTED", **self._ids(e), "timestamp": _ms(e)}]

    def _resumed(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        self.leg = f"{e['run_id']}:{e['seq']}"
        return [{"type": "RUN_STARTED", **self._ids(e), "timestamp": _ms(e)}]

    def _state_entered(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        if self.step is not None:
            out.append({"type": "STEP_FINISHED", "stepName": self.step})
        self.step = e["state"]
        out.append({"type": "STEP_STARTED", "stepName": e["state"]})
        return out

    def _text_delta(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        if self.message is None:
            self.message = f"{e['run_id']}-m{e['seq']}"
            out.append({"type": "TEXT_MESSAGE_START", "messageId": self.message, "role": "assistant"})
        out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.message, "delta": e.get("text", "")})
        return out

    def _model_responded(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        if self.message is not None:
            message, self.message = self.message, None
            return [{"type": "TEXT_MESSAGE_END", "messageId": message}]
        text = _reply_text(e)
        if not text:
            return []
        message = f"{e['run_id']}-m{e['seq']}"
        return [
            {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": message},
        ]

    def _tool_called(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        call = e["call_id"]
        return [
            {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": e["name"]},
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": json.dumps(e.get("args", {}))},
            {"type": "TOOL_CALL_END", "toolCallId": call},
        ]

    def _tool_answered(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        content = e.get("content")
        return [
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"{e['run_id']}-r{e['seq']}",
                "toolCallId": e["call_id"],
                "content": content if isinstance(content, str) else json.dumps(content),
                "role": "tool",
            }
        ]

    def _suspended(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        interrupts = [
            {
                "id": p["call_id"],
                "reason": _CONFIRM_REASON.get(p["kind"], p["kind"]),
                "message": p.get("detail") or f"{p['tool']}({json.dumps(p['args'])}) waits for a {p['kind']}",
                "toolCallId": p["call_id"],
                "metadata": {"tool": p["tool"], "args": p["args"], "kind": p["kind"]},
            }
            for p in e.get("pending", [])
        ]
        return [
            *self._step_done(),
            {"type": "RUN_FINISHED", **self._ids(e), "outcome": {"type": "interrupt", "interrupts": interrupts}},
        ]

    def _run_finished(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        outcome = e.get("outcome")
        if outcome in ("final", "salvaged"):
            done = {"type": "RUN_FINISHED", **self._ids(e), "outcome": {"type": "success"}, "result": e.get("output")}
        elif outcome == "cancelled":
            done = {"type": "RUN_FINISHED", **self._ids(e), "outcome": {"type": "cancelled"}}
        else:
            error = e.get("error") or {}
            message = error.get("message") or f"the run ended {outcome}"
            done = {"type": "RUN_ERROR", "message": message, "code": str(outcome)}
        return [*self._step_done(), done]

    def _step_done(self) -> list[dict[str, Any]]:
        if self.step is None:
            return []
        step, self.step = self.step, None
        return [{"type": "STEP_FINISHED", "stepName": step}]


def _reply_text(e: dict[str, Any]) -> str:
    response = e.get("response") or {}
    text = response.get("text")
    if isinstance(text, str):
        return text
    parts = response.get("parts") or response.get("content") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _ms(e: dict[str, Any]) -> int:
    return int(float(e.get("time", 0.0)) * 1000)


def decisions_of_resume(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI resume entries (``{interruptId, status, payload?}``) as decisions for
    ``POST /runs/{id}/decisions``: ``resolved`` approves (``payload.args``: edited arguments;
    ``payload.approved: false`` denies; ``payload.value``: a credential or result), ``cancelled`` denies."""
    out = []
    for entry in entries:
        payload = entry.get("payload") or {}
        call = entry.get("interruptId")
        if entry.get("status") == "cancelled" or payload.get("approved") is False:
            out.append({"call_id": call, "action": "deny", "reason": str(payload.get("reason", "declined"))})
        elif "value" in payload:
            out.append({"call_id": call, "action": "value", "value": payload["value"]})
        else:
            out.append({"call_id": call, "action": "approve", "args": payload.get("args")})
    return out


def user_thread(thread: str, user: str | None) -> str:
    """The stem of the run ids of ``user``'s thread ``thread``: each user's threads are their own,
    so one user's thread id never blocks another's. Without users (no auth hook) the thread id
    itself; with one ``<thread>@u<16 hex digits of the user's SHA-256>`` (the user's name is not
    written into run ids). :func:`shown_thread` gives the thread id back."""
    if user is None:
        return thread
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{thread}{USER_MARK}{digest}"


def shown_thread(stem: str) -> str:
    """The thread id a client chose, from the stem of its runs' ids (:func:`user_thread`)."""
    return _USER_TAIL.sub("", stem)


def thread_run(thread: str, n: int) -> str:
    """The id of the thread's ``n``-th run (1: the thread's own id)."""
    return thread if n == 1 else f"{thread}{THREAD_MARK}{n}"


def thread_of(run_id: str) -> str:
    """The thread whose run ``run_id`` is (a run id not of the form ``<thread>~<n>``, n >= 2, is its own thread)."""
    head, mark, tail = run_id.rpartition(THREAD_MARK)
    if mark and head and tail.isdigit() and tail[0] != "0" and int(tail) >= 2:
        return head
    return run_id


class Threads:
    """A service's AG-UI threads: the number of each one's latest run known here (a cache: the
    store says which runs exist, so a thread goes on after a restart or on another server), and
    the threads whose next run is being started now (one message at a time)."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}
        self.starting: set[str] = set()

    async def latest_of(self, thread: str, exists: Callable[[str], Awaitable[bool]]) -> int:
        """The number of the thread's latest run (0: it has none). ``exists(run_id)``: the run is
        known (stored, or running here). The runs of a thread are numbered without gaps, so the
        last is found by doubling steps from the last one known, then halving them: a few
        probes after a restart, one (the next number is free) while the cache is warm."""
        n = self.latest.get(thread, 0)
        if n == 0:
            if not await exists(thread):
                return 0
            n = 1
        step = 1
        while await exists(thread_run(thread, n + step)):
            n, step = n + step, step * 2
        free = n + step
        while free - n > 1:
            mid = (n + free) // 2
            if await exists(thread_run(thread, mid)):
                n = mid
            else:
                free = mid
        self.started(thread, n)
        return n

    def forget(self, thread: str) -> None:
        """Ask the store alone next time (the run remembered left nothing in it)."""
        self.latest.pop(thread, None)

    def started(self, thread: str, n: int) -> None:
        """The thread's run ``n`` exists (started here, or found in the store)."""
        latest = self.latest
        latest.pop(thread, None)
        latest[thread] = n
        if len(latest) > KEPT_THREADS:
            del latest[next(iter(latest))]
