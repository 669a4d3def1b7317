"""The AG-UI routes: ``GET /runs/{id}/agui`` (a run's events as AG-UI events, resumable like
``/events``) and ``POST /agents/{name}/agui`` (what an AG-UI client sends: a run input whose last
user message starts a run, or whose ``resume`` entries answer a run's interrupts; the answer is
that leg's AG-UI events, up to its ``RUN_FINISHED`` or ``RUN_ERROR``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .agui import AguiMapper, decisions_of_resume
from .decisions import DecisionIn, ServeError
from .web import SSE_HEADERS, App, after_of, dropped_frame, json_body


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
    return StreamingResponse(_agui(app, run_id, after), media_type="text/event-stream", headers=SSE_HEADERS)


async def agui_input(app: App, request: Request) -> Response:
    user = await app.user(request)
    agent = request.path_params["name"]
    body = RunAgentInput.model_validate(await json_body(request))
    service = app.service
    service.runner(agent)
    if body.resume:
        run_id = body.thread_id or ""
        await service.check_visible(run_id, user, app.everyone)
        after = await service.last_seq(run_id)
        entries = [{"interruptId": r.interrupt_id, "status": r.status, "payload": r.payload} for r in body.resume]
        given = [DecisionIn(**d) for d in decisions_of_resume(entries)]
        await service.decide(run_id, given, user, app.everyone)
    else:
        text = _last_user_text(body.messages)
        taken = body.thread_id is None or await service.store.load(body.thread_id) is not None
        run_id = await service.start(agent, text, user, None if taken else body.thread_id)
        after = 0
    stream = _agui(app, run_id, after, leg_only=True)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


def _last_user_text(messages: list[AguiMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str) and content:
                return content
    raise ServeError(422, "the run input has no user message with text: send messages=[{role: 'user', content: ...}]")


async def _agui(app: App, run_id: str, after: int, *, leg_only: bool = False) -> AsyncIterator[str]:
    mapper = AguiMapper()
    last = after
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
            yield "".join(frames)
            if leg_only and done:
                return
        elif got == "ping":
            yield ": ping\n\n"
        elif got == "dropped":
            yield dropped_frame(run_id, last)
