"""An agent served over A2A: :func:`a2a_app` builds a Starlette app from the SDK's own pieces
(its agent-card route, its JSON-RPC route and ``DefaultRequestHandler``), with loopwright's
parts plugged in where the SDK asks for them:

- :class:`RunExecutor` (the SDK's ``AgentExecutor``): a message starts a run of the agent, or,
  in a task whose run waits, decides its pending calls; it follows the run's events through the
  :class:`~loopwright.serve.service.Service` (the one the HTTP API uses) until the leg stops
  (the model's streamed text going out as chunks of the answer: :class:`Chunks`), waits for the
  service to let the leg go (``Service.leg_over``: woken, not polling), then says where the run
  is as the store keeps it (:func:`~.tasks.task_of`);
- :class:`OwnedTasks` (the SDK's ``DefaultRequestHandler``): ``CancelTask`` checked at the door
  (another user's task is "task not found" before the SDK reads it);
- :class:`DecisionGate` (the SDK's ``RequestContextBuilder``, called before a message reaches a
  task): refuses, with a JSON-RPC error and before anything changes, a message that cannot be
  taken: decisions for a task whose run waits for none, for calls that are not pending, a
  second decision while one is being applied, a message without text;
- :class:`~.tasks.RunTaskStore`: the SDK's task store over the run store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

try:
    from a2a.helpers.proto_helpers import get_text_parts, new_text_part
except ImportError as exc:  # the extra is missing
    raise ImportError("loopwright.integrations.a2a needs the A2A SDK: pip install 'loopwright[a2a]'") from exc
from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    InvalidParamsError,
    SecurityScheme,
    SendMessageRequest,
    Task,
    TaskNotFoundError,
    TaskState,
    TaskStatus,
    UnsupportedOperationError,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ...data.errors import ConfigurationError
from ...durable.codec import rebuild
from ...runtime.agent import Agent
from ...serve.decisions import DecisionIn, ServeError, decisions_for, not_waiting, pending_of
from ...serve.service import Service
from ...stores.base import RunStore
from .door import Auth, guarded, secure_card, user_of
from .tasks import ANSWER, CONTEXT_KEY, RunTaskStore, cancel_run, decisions_in, task_of

STOPS = frozenset({"run_finished", "suspended", "paused", "error"})
"""Event types after which a leg of a run has stopped (``error``: the service's own, seq -1)."""


def agent_card(agent: Agent, url: str, version: str = "1.0.0") -> AgentCard:
    """The card of ``agent`` served at ``url`` (its JSON-RPC interface): its name, description,
    the protocol version, streaming, and a skill per tool."""
    skills = [
        AgentSkill(id=name, name=name, description=tool.description, tags=["tool"])
        for name, tool in agent.tools.items()
    ]
    if not skills:
        skills = [AgentSkill(id=agent.name, name=agent.name, description=_describe(agent), tags=["chat"])]
    return AgentCard(
        name=agent.name,
        description=_describe(agent),
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )


def _describe(agent: Agent) -> str:
    return agent.description or f"the loopwright agent {agent.name!r}"


def _invalid(exc: ServeError) -> InvalidParamsError:
    return InvalidParamsError(message=exc.message)


class DecisionGate(SimpleRequestContextBuilder):
    """Checks each message before the SDK hands it to a task (see the module docstring); the
    decisions it took are kept for the executor (``taken``), and the task is held while they
    are applied (``deciding``)."""

    def __init__(self, service: Callable[[], Awaitable[Service]]) -> None:
        super().__init__()
        self._service = service
        self.deciding: set[str] = set()
        self.taken: dict[str, list[DecisionIn]] = {}

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        message = params.message if params is not None else None
        if message is not None and task_id:
            # (holds the task: ``deciding``)
            self.taken[task_id] = await self._check_decisions(task_id, message, user_of(context))
            try:
                return await super().build(context, params, task_id, context_id, task)
            except BaseException:
                self.deciding.discard(task_id)
                self.taken.pop(task_id, None)
                raise
        if message is not None and not "".join(get_text_parts(message.parts)).strip():
            raise InvalidParamsError(message="the message has no text: send a text part with what the agent should do")
        return await super().build(context, params, task_id, context_id, task)

    async def _check_decisions(self, task_id: str, message: Any, user: str) -> list[DecisionIn]:
        try:
            decided = decisions_in(message)
        except ServeError as exc:
            raise _invalid(exc) from None
        service = await self._service()
        saved = await service.store.load(task_id)
        if saved is not None and saved.user != user:  # (the SDK found no task for them already: kept as a guard)
            raise TaskNotFoundError(message=f"task {task_id!r} not found")
        if task_id in self.deciding or task_id in service.live:
            raise UnsupportedOperationError(
                message=f"task {task_id!r} is running (or being decided) now; wait for it to stop, then try again"
            )
        if saved is None or saved.outcome != "suspended":
            why = not_waiting(task_id, saved) if saved is not None else f"run {task_id!r} has not started yet"
            raise UnsupportedOperationError(message=f"task {task_id!r} takes no more messages: {why}")
        if decided is None:
            raise InvalidParamsError(
                message=f"task {task_id!r} waits for decisions: send a data part "
                '{"decisions": [{"call_id": ..., "action": "approve" | "deny" | "value"}]}'
            )
        try:
            decisions_for(task_id, pending_of(rebuild(saved)), decided)
        except ServeError as exc:
            raise _invalid(exc) from None
        if task_id in self.deciding:  # (decided meanwhile: checked again after the awaits above)
            raise UnsupportedOperationError(message=f"task {task_id!r} is being decided now; its calls run once")
        self.deciding.add(task_id)
        return decided


class RunExecutor(AgentExecutor):
    """Runs of ``agent`` for the SDK (see the module docstring)."""

    def __init__(
        self, service: Callable[[], Awaitable[Service]], agent: str, gate: DecisionGate, sessions: bool
    ) -> None:
        self._service = service
        self.agent = agent
        self.gate = gate
        self.sessions = sessions

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        run_id, context_id = str(context.task_id), str(context.context_id)
        user = user_of(context.call_context)
        service = await self._service()
        updater = TaskUpdater(event_queue, run_id, context_id)
        decisions = self.gate.taken.pop(run_id, None)
        try:
            if decisions is None:
                after = 0
                if context.current_task is None:  # (the SDK makes it from the message, as a rule)
                    await event_queue.enqueue_event(self._new_task(context, run_id, context_id))
                await service.start(
                    self.agent,
                    context.get_user_input(),
                    user,
                    run_id=run_id,
                    session=context_id if self.sessions else None,
                    state={CONTEXT_KEY: context_id},
                    deltas=True,
                )
            else:
                after = await service.last_seq(run_id)
                await service.decide(run_id, decisions, user, everyone=False)
            await updater.start_work()
            await _leg(service, run_id, after, updater)
        except ServeError as exc:
            await updater.failed(updater.new_agent_message([new_text_part(exc.message)]))
            return
        finally:
            self.gate.deciding.discard(run_id)
        saved = await service.store.load(run_id)
        if saved is None:  # (the run failed before its first checkpoint)
            await updater.failed(updater.new_agent_message([new_text_part("the run failed before it started")]))
            return
        await _report(updater, task_of(saved))

    def _new_task(self, context: RequestContext, run_id: str, context_id: str) -> Task:
        task = Task(id=run_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        if context.message is not None:
            task.history.append(context.message)
        return task

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await cancel_run(await self._service(), str(context.task_id), user_of(context.call_context))


class OwnedTasks(DefaultRequestHandler):
    """The SDK's request handler, with CancelTask checked at the door: a task that is not the
    caller's is "task not found" before anything of the SDK's cancelling runs (no task is
    read for it, no executor called, nothing written)."""

    task_store: RunTaskStore

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        if not params.id or not await self.task_store.owns(params.id, context):
            raise TaskNotFoundError(message=f"task {params.id!r} not found")
        cancelled: Task | None = await super().on_cancel_task(params, context)
        return cancelled


async def _report(updater: TaskUpdater, task: Task) -> None:
    """Tell the SDK where the run is: its answer as the artifact, then its state."""
    for artifact in task.artifacts:
        await updater.add_artifact(
            list(artifact.parts), artifact_id=artifact.artifact_id, name=artifact.name, append=False, last_chunk=True
        )
    message = task.status.message if task.status.HasField("message") else None
    if message is not None:
        message = updater.new_agent_message(list(message.parts))
    await updater.update_status(task.status.state, message=message)


async def _leg(service: Service, run_id: str, after: int, updater: TaskUpdater) -> None:
    """Follow the run's leg in progress until it has stopped (ended, suspended, paused, failed)
    and the service has let it go (the store holds where it stopped); the model's text as it
    streams (``text_delta``) goes out as chunks of the answer artifact (:class:`Chunks`)."""
    chunks = Chunks(updater)
    following = True
    while following:
        following = False
        async for got in service.follow(run_id, after):
            if isinstance(got, list):
                for item in got:
                    if item.seq > after:
                        await chunks.see(item)
                if any(item.type in STOPS for item in got):
                    break
                after = max(after, got[-1].seq)
            elif got == "dropped":  # (fell behind: follow again from the last event seen)
                following = True
                break
            elif got in ("end", "busy", "shutdown"):
                break
    await service.leg_over(run_id)


class Chunks:
    """The model's streamed text as chunks of the artifact ``answer`` (A2A's
    ``TaskArtifactUpdateEvent``): a reply's first chunk starts the artifact afresh (``append``
    false: it replaces what an earlier reply streamed), the next ones are appended; the run's
    final state then replaces it with the answer (``last_chunk``: :func:`_report`)."""

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater
        self.streaming = False
        """A reply's text is streaming now (the next chunk is appended to it)."""

    async def see(self, item: Any) -> None:
        if item.type == "model_responded":
            self.streaming = False
        elif item.type == "text_delta":
            delta = json.loads(item.json)
            if delta.get("thought") or not delta.get("text"):
                return
            await self.updater.add_artifact(
                [new_text_part(delta["text"])],
                artifact_id=ANSWER,
                name=ANSWER,
                append=self.streaming,
                last_chunk=False,
            )
            self.streaming = True


class _Started:
    """The app's service, made on first use (the lifespan, or the first request of an app mounted
    inside another whose lifespan Starlette does not run)."""

    def __init__(self, agent: Agent, store: RunStore | str, sessions: Any) -> None:
        self.agent, self.store, self.sessions = agent, store, sessions
        self.service: Service | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> Service:
        if self.service is not None:
            return self.service
        async with self._lock:
            if self.service is None:
                store = self.store
                if isinstance(store, str):
                    from ...stores import open_store

                    store = await open_store(store)
                self.service = Service([self.agent], store, sessions=self.sessions)
        return self.service


def a2a_app(
    agent: Agent,
    *,
    store: RunStore | str,
    url: str,
    sessions: Any = None,
    version: str = "1.0.0",
    auth: Auth | None = None,
    security_scheme: SecurityScheme | None = None,
) -> Starlette:
    """A Starlette app serving ``agent`` over A2A (JSON-RPC, protocol 1.0): its card at
    ``/.well-known/agent-card.json``, JSON-RPC (``SendMessage``, ``SendStreamingMessage``,
    ``GetTask``, ``CancelTask``, ``ListTasks``) at ``/``.

    ``store``: a RunStore or its URL (``sqlite:///runs.db``): every task is a run kept there, so
    a task outlives the server. ``url``: where clients reach the JSON-RPC endpoint (what the card
    says; mount the app there). ``sessions``: a session store: a task's ``context_id`` is then a
    session, and a new message in a context continues its conversation. ``version``: the agent's
    version on its card.

    ``auth``: the hook of :func:`loopwright.serve.app` (a function of the request, sync or async,
    giving its user, or None: HTTP 401 with a JSON-RPC error); each user finds only their own
    tasks (another's is "task not found"), and a ``context_id`` is a session of its user. The
    card stays public and declares ``security_scheme`` (an SDK ``SecurityScheme``; default HTTP
    bearer, what :func:`loopwright.serve.guard.bearer_token` checks)."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"a2a_app() serves one Agent, got {type(agent).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"a2a_app(url=) takes the absolute http(s) URL clients reach the agent at "
            f"(e.g. 'https://agents.example.com/refunds/'), got {url!r}"
        )
    started = _Started(agent, store, sessions)
    gate = DecisionGate(started)
    card = agent_card(agent, url, version)
    if auth is not None:
        card = secure_card(card, security_scheme)
    handler = OwnedTasks(
        agent_executor=RunExecutor(started, agent.name, gate, sessions is not None),
        task_store=RunTaskStore(started, agent.name),
        agent_card=card,
        request_context_builder=gate,
    )
    rpc = guarded(create_jsonrpc_routes(handler, rpc_url="/"), auth)
    routes: list[BaseRoute] = [*create_agent_card_routes(card), *rpc]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service = await started()
        try:
            yield
        finally:
            await handler.aclose()
            await service.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.loopwright_a2a = started  # (``.service``: the runs, for tests and probes)
    return app
