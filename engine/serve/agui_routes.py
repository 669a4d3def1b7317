"""The AG-UI routes: ``GET /runs/{id}/agui`` (a run's events as AG-UI events, resumable like
``/events``) and ``POST /agents/{name}/agui`` (what an AG-UI client sends: a run input whose last
user message starts the thread's next run, or whose ``resume`` entries answer the interrupts of
the thread's latest run; the answer is that leg's AG-UI events, up to its ``RUN_FINISHED`` or
``RUN_ERROR``).

A message on a thread (:mod:`loopwright.serve.agui`) starts its next run, ``<thread>~<n+1>``,
which continues the conversation of run ``n`` (``after=`` its result, read back from the
store), or, when the app keeps sessions and knows the user, the session ``(agent, user,
thread)``. Refused, nothing started: a thread whose latest run is running, waits or is paused
(409, saying what to do), one of another agent without sessions (409). Each user's threads are
their own (:func:`~loopwright.serve.agui.user_thread`): another user's thread of the same id is
another thread, never in the way."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..data.result import RunResult
from ..durable.codec import rebuild
from ..loop.options import new_run_id
from ..stores.base import SavedRun
from .agui import (
    THREAD_MARK,
    USER_MARK,
    AguiMapper,
    decisions_of_resume,
    shown_thread,
    thread_of,
    thread_run,
    user_thread,
)
from .decisions import DecisionIn, ServeError, pending_of
from .hub import BUSY, END, SHUTDOWN
from .web import SSE_HEADERS, App, after_of, busy_frame, dropped_frame, end_frame, json_body, pieces, shutdown_frame


class AguiMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: Any = None


class AguiResume(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    interrupt_id: str = Field(alias="interruptId", min_length=1)
    status: str = "resolved"
    payload: Any = None


class RunAgentInput(BaseModel):
    """The part of AG-UI's ``RunAgentInput`` loopwright reads (its other fields are ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    thread_id: str | None = Field(default=None, alias="threadId")
    messages: list[AguiMessage] = []
    resume: list[AguiResume] = []


async def agui(app: App, request: Request) -> Response:
    user = await app.user(request)
    run_id = request.path_params["run_id"]
    after = after_of(request)
    await app.service.check_visible(run_id, user, app.everyone)
    app.service.streams.check_room()
    stream = _agui(app, run_id, after, shown_thread(thread_of(run_id)))
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


async def agui_input(app: App, request: Request) -> Response:
    user = await app.user(request)
    agent = request.path_params["name"]
    body = RunAgentInput.model_validate(await json_body(request))
    service = app.service
    service.runner(agent)
    service.streams.check_room()  # (its answer is a stream: refused before anything starts)
    thread = body.thread_id or new_run_id()
    if thread_of(thread) != thread or shown_thread(thread) != thread:
        raise ServeError(
            422,
            f"threadId {thread!r} ends in {THREAD_MARK}<number> or {USER_MARK}<digest>, which mark a thread's "
            "later runs and its user here; choose a threadId without it",
        )
    stem = user_thread(thread, user)
    if body.resume:
        n = await service.threads.latest_of(stem, lambda run_id: _exists(app, run_id))
        run_id = thread_run(stem, max(n, 1))
        await service.check_visible(run_id, user, app.everyone)
        after = await service.last_seq(run_id)
        entries = [{"interruptId": r.interrupt_id, "status": r.status, "payload": r.payload} for r in body.resume]
        given = [DecisionIn(**d) for d in decisions_of_resume(entries)]
        await service.decide(run_id, given, user, app.everyone)
    else:
        run_id = await _next_turn(app, agent, thread, stem, _last_user_text(body.messages), user)
        after = 0
    stream = _agui(app, run_id, after, thread, leg_only=True)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


async def _next_turn(app: App, agent: str, thread: str, stem: str, text: str, user: str | None) -> str:
    """Start the next run on ``text`` of the user's thread ``thread`` (its runs' ids: ``stem``,
    ``stem~2``, ...; see the module docstring); its id."""
    service = app.service
    threads = service.threads
    if stem in threads.starting:
        raise ServeError(409, f"a message on thread {thread!r} is starting its run now; wait for its RUN_FINISHED")
    threads.starting.add(stem)
    try:
        n, saved = await _latest(app, stem)
        keyed = service.runner(agent).sessions is not None and user is not None
        after = None
        if n:
            previous = await _ended(app, agent, thread, thread_run(stem, n), saved, user, keyed)
            if not keyed:
                after = RunResult.of(rebuild(previous), None, service.runner(agent).machine)
        run_id = await service.start(
            agent, text, user, thread_run(stem, n + 1), session=thread if keyed else None, after=after
        )
        threads.started(stem, n + 1)
        return run_id
    finally:
        threads.starting.discard(stem)


async def _latest(app: App, thread: str) -> tuple[int, SavedRun | None]:
    """The number of the thread's latest run (0: none) and the store's copy of it (None while
    it runs here before its first checkpoint)."""
    service = app.service
    threads = service.threads
    for _ in range(2):
        n = await threads.latest_of(thread, lambda run_id: _exists(app, run_id))
        latest = thread_run(thread, n)
        if n == 0 or latest in service.live:
            return n, None
        saved = await service.store.load(latest)
        if saved is not None:
            return n, saved
        threads.forget(thread)  # started here, it left nothing in the store: ask the store alone
    return n, None


async def _exists(app: App, run_id: str) -> bool:
    service = app.service
    return run_id in service.live or await service.store.load(run_id) is not None


async def _ended(
    app: App, agent: str, thread: str, latest: str, saved: SavedRun | None, user: str | None, keyed: bool
) -> SavedRun:
    """The thread's latest run, ended: one the next can continue (ServeError, saying what to do, if not)."""
    service = app.service
    try:
        await service.check_visible(latest, user, app.everyone, saved)
    except ServeError:
        raise ServeError(
            404, f"no thread {thread!r} that you can see; start a new thread with a new threadId"
        ) from None
    if saved is None:
        raise ServeError(
            409,
            f"thread {thread!r} is running its run {latest!r}: wait for its RUN_FINISHED "
            f"(GET /runs/{latest}/agui follows it)",
        )
    if not keyed and saved.agent != agent:
        raise ServeError(
            409,
            f"thread {thread!r} is a conversation with agent {saved.agent!r}: send its messages to "
            f"/agents/{saved.agent}/agui, or start a new thread with a new threadId",
        )
    if saved.outcome == "suspended":
        ids = ", ".join(p.call_id for p in pending_of(rebuild(saved))) or "none"
        raise ServeError(
            409,
            f"thread {thread!r} waits for its run {latest!r}'s interrupts ({ids}) to be answered: send a run "
            f"input on the thread whose resume entries carry their interruptId (or POST /runs/{latest}/cancel), "
            "then the message",
        )
    if saved.outcome in (None, "paused") or latest in service.live:
        if latest in service.paused:
            raise ServeError(409, f"thread {thread!r}'s run {latest!r} is paused: POST /runs/{latest}/resume first")
        raise ServeError(
            409,
            f"thread {thread!r}'s run {latest!r} is running (here, elsewhere, or its server stopped mid-way): wait "
            f"for its RUN_FINISHED (GET /runs/{latest}/agui follows it), or POST /runs/{latest}/resume if its "
            "server stopped",
        )
    return saved


def _told(got: str, run_id: str, last: int) -> str:
    """The frame that tells an AG-UI client ``got`` (busy, ping, dropped, end, shutdown)."""
    if got == BUSY:
        return busy_frame()
    if got == "dropped":
        return dropped_frame(run_id, last)
    if got == END:
        return end_frame(run_id, last, agui=True)
    if got == SHUTDOWN:
        return shutdown_frame(run_id, last, agui=True)
    return ": ping\n\n"


def _last_user_text(messages: list[AguiMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str) and content:
                return content
    raise ServeError(422, "the run input has no user message with text: send messages=[{role: 'user', content: ...}]")


async def _agui(app: App, run_id: str, after: int, thread: str, *, leg_only: bool = False) -> AsyncIterator[str]:
    mapper = AguiMapper(thread)
    last = after
    told = False  # the last AG-UI event sent said how the run ended (RUN_FINISHED, RUN_ERROR)
    async for got in app.service.follow(run_id, after):
        if isinstance(got, list):
            frames = []
            done = False
            for item in got:
                data = json.loads(item.json)
                mapped = mapper.map(data) if item.seq >= 0 else [{"type": "RUN_ERROR", "message": data["message"]}]
                last = max(last, item.seq)
                frames += [f"id: {item.seq}\ndata: {json.dumps(out)}\n\n" for out in mapped]
                done = done or any(out["type"] in ("RUN_FINISHED", "RUN_ERROR") for out in mapped)
                if mapped:
                    told = mapped[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
            for piece in pieces(frames):
                yield piece
            if leg_only and done:
                return
        elif not (got == END and told):  # (AG-UI clients take no event after RUN_FINISHED: it says so)
            yield _told(got, run_id, last)
