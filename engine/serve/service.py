"""What the HTTP app does, without HTTP: start runs, list and show them, decide their pending
calls, cancel, pause and resume them, and replay and follow their events.

A :class:`Service` holds one :class:`~loopwright.loop.runner.Runner` per agent, all on one
store. A run started here is driven by a task of the service, not of a request: the client
that started it may leave and the run goes on (the store keeps every checkpoint; any client
may follow it later). Runs are driven through the public runner API alone (``start`` with a
run id, ``resume``, ``pause``, ``cancel``, observers); their events reach the clients through
the hubs (:mod:`loopwright.serve.hub`).

Every refusal is a :class:`ServeError` with the HTTP status and a message saying what was
wrong and what to do; a refused request changes nothing in the store.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..data.errors import LoopwrightError, MachineError
from ..data.result import RunResult
from ..durable.codec import rebuild
from ..features import machine_for
from ..loop.options import new_run_id
from ..loop.runner import Runner, refusal, verdict
from ..loop.sessions import SessionRun
from ..runtime.agent import Agent
from ..runtime.log import get_logger
from ..stores.base import RunStore, SavedRun
from ..stores.session_base import SessionBusy
from .agui import Threads
from .decisions import ENDED, DecisionIn, ServeError, decisions_for, not_waiting, pending_of
from .hub import BUSY, END, SHUTDOWN, Hub, Item, StreamPool, Subscriber


def _session_key(runner: Runner, agent: str, user: str | None, session: str) -> tuple[str, str, str]:
    """The session ``(agent, user, session)`` a request names (ServeError 422 if it cannot)."""
    if runner.sessions is None:
        raise ServeError(422, "this server keeps no sessions: serve the app with sessions=SQLiteSessions(...)")
    if not user:
        raise ServeError(422, "a session belongs to a user: serve the app with auth= so each request has one")
    return (agent, user, session)


_log = get_logger()


def refuse_unverified(agents: Iterable[Agent]) -> None:
    """Refuse (MachineError, the Runner's message) an agent whose machine
    :func:`~loopwright.machines.verify` rejects: a server runs only bounded machines unless
    opted in (``app(..., unverified=True)``, ``loopwright serve --unverified``)."""
    for agent in agents:
        machine = machine_for(agent)
        if not (report := verdict(machine)).ok:
            raise MachineError(
                refusal(machine, report, agent.name)
                + "; to serve it: loopwright.serve.app(..., unverified=True) or loopwright serve --unverified"
            )


class Service:
    """Runs of ``agents`` on ``store`` (see the module docstring). ``buffer``: events a client
    may fall behind before it is dropped; ``streams``: the bounds of what clients hold (bytes
    each and together, streams open; :class:`~loopwright.serve.hub.StreamPool`)."""

    def __init__(
        self,
        agents: Iterable[Agent],
        store: RunStore,
        *,
        buffer: int = 1000,
        sessions: Any = None,
        streams: StreamPool | None = None,
        unverified: bool = False,
    ) -> None:
        self.store = store
        self.buffer = buffer
        self.streams = streams or StreamPool(limit=buffer)
        """The clients following runs, and what they hold (bounded)."""
        self.runners: dict[str, Runner] = {}
        for agent in agents:
            if agent.name in self.runners:
                raise ServeError(500, f"two agents are named {agent.name!r}; give each served agent its own name")
            self.runners[agent.name] = Runner(
                agent, store=store, observers=[self], sessions=sessions, unverified=unverified
            )
        self.hubs: dict[str, Hub] = {}
        self.live: dict[str, str] = {}
        """Runs with a leg in progress in this process: their agent, by run id."""
        self.users: dict[str, str | None] = {}
        """Who started each run seen so far (None: started outside the server)."""
        self.paused: set[str] = set()
        """Runs paused in this process (``Runner.pause``: the store has no outcome for them)."""
        self._busy: set[str] = set()
        self.stopping = False
        """The server is shutting down (:meth:`shutting_down`): streams end saying so."""
        """Runs being decided, cancelled or resumed right now (a second request is refused)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}
        """Who waits for a run's leg in progress here to stop (:meth:`leg_over`), by run id."""
        self.threads = Threads()
        """The AG-UI threads seen here (:mod:`loopwright.serve.agui`)."""

    # ------------------------------------------------------------------ the observer

    def on_event(self, event: Any) -> None:
        hub = self.hubs.get(event.run_id)
        if hub is not None:
            hub.publish(Item.of(event.seq, event.type, event.model_dump_json()))

    # ------------------------------------------------------------------ runs

    def runner(self, agent: str) -> Runner:
        found = self.runners.get(agent)
        if found is None:
            raise ServeError(404, f"no agent named {agent!r} is served here; the agents are: {', '.join(self.runners)}")
        return found

    async def start(
        self,
        agent: str,
        text: str,
        user: str | None,
        run_id: str | None = None,
        session: str | None = None,
        after: RunResult | None = None,
        state: dict[str, Any] | None = None,
        deltas: bool = False,
    ) -> str:
        """Start a run of ``agent`` on ``text`` for ``user``; its id (the run goes on in the background).
        ``session``: the user's session id: the run continues it (``(agent, user, session)``;
        :mod:`loopwright.loop.sessions`), or 409 if another run holds it. ``after``: an ended
        run whose conversation this one continues (``Runner.start(..., after=)``). ``state``:
        the run's starting state (``Runner.start(..., state=)``). ``deltas``: a streaming model's
        text comes as ``text_delta`` events too (as from ``Runner.stream``)."""
        runner = self.runner(agent)
        key = None if session is None else _session_key(runner, agent, user, session)
        run_id = run_id or new_run_id()
        if run_id in self.live or run_id in self._busy or await self.store.load(run_id) is not None:
            raise ServeError(409, f"run id {run_id!r} is taken; leave run_id out for a new one")
        if user is not None:
            await _keep_user(self.store, run_id, user)
        hub = self._hub(run_id)
        hub.leg_started()
        try:
            run = runner.start(text, run_id=run_id, session=key, after=after, state=state)
            run.ctx.stream_deltas = deltas
            if isinstance(run, SessionRun):
                await run.open()  # (held now, or SessionBusy: 409)
        except LoopwrightError as exc:
            hub.leg_stopped(ended=True)
            self._forget(run_id)
            raise ServeError(409 if isinstance(exc, SessionBusy) else 422, str(exc)) from None
        self.users[run_id] = user
        self.live[run_id] = agent
        self._spawn(run_id, run.run_to_end())
        return run_id

    def _spawn(self, run_id: str, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._drive(run_id, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, run_id: str, work: Any) -> None:
        """Drive one leg of a run to its end or its next stop; tell the clients how it ended."""
        hub = self._hub(run_id)
        outcome: str | None = "failed"
        try:
            result: RunResult = await work
            outcome = result.outcome
            if outcome == "paused":
                self.paused.add(run_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log.warning("serve.run_failed", run_id=run_id, error=f"{type(exc).__name__}: {exc}")
            hub.publish(Item.of(-1, "error", json.dumps({"run_id": run_id, "message": f"{type(exc).__name__}: {exc}"})))
        finally:
            self.live.pop(run_id, None)
            hub.leg_stopped(ended=outcome in ENDED)
            self._forget(run_id)
            for waiter in self._waiting.pop(run_id, ()):
                if not waiter.done():
                    waiter.set_result(None)

    async def leg_over(self, run_id: str) -> None:
        """Return once no leg of ``run_id`` goes on here (the store holds where it stopped): at
        once if none does, else when the service lets the leg go (woken then, never polling)."""
        if run_id not in self.live:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(run_id, []).append(waiter)
        try:
            await waiter
        finally:
            left = self._waiting.get(run_id)
            if left is not None and waiter in left:
                left.remove(waiter)
                if not left:
                    del self._waiting[run_id]

    def _hub(self, run_id: str) -> Hub:
        hub = self.hubs.get(run_id)
        if hub is None:
            hub = self.hubs[run_id] = Hub(run_id)
        return hub

    def _forget(self, run_id: str) -> None:
        """Drop the run's hub when nothing uses it any more."""
        hub = self.hubs.get(run_id)
        if hub is not None and not hub.subscribers and not hub.running:
            del self.hubs[run_id]

    def shutting_down(self) -> None:
        """The server is shutting down: every stream following a run here ends with ``"shutdown"``
        (after what it has buffered), so none holds the server or just closes."""
        self.stopping = True
        for hub in self.hubs.values():
            for sub in hub.subscribers:
                sub.stop()

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop the legs in progress here: each is paused at its next transition (the store keeps
        it as of that checkpoint; ``POST /runs/{id}/resume`` on the next server continues it);
        one still in its stage after ``grace_s`` seconds is cancelled."""
        for runner in self.runners.values():
            for run_id in runner.active_runs:
                runner.pause(run_id)
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace_s)
            if late:
                for runner in self.runners.values():
                    for run_id in runner.active_runs:
                        runner.cancel(run_id)
                await asyncio.gather(*late, return_exceptions=True)

    # ------------------------------------------------------------------ reading runs

    async def _saved(self, run_id: str, user: str | None, everyone: bool) -> SavedRun:
        saved = await self.store.load(run_id)
        if saved is None or not self._visible(run_id, saved, user, everyone):
            raise ServeError(404, f"no run {run_id!r} that you can see; GET /runs lists yours")
        return saved

    def _visible(self, run_id: str, saved: SavedRun | None, user: str | None, everyone: bool) -> bool:
        if everyone:
            return True
        if run_id not in self.users and saved is not None:
            self.users[run_id] = _user_of(saved)
        return self.users.get(run_id) == user and user is not None

    async def check_visible(self, run_id: str, user: str | None, everyone: bool, saved: SavedRun | None = None) -> None:
        """ServeError 404 unless the run exists (here or in the store) and ``user`` may see it
        (``saved``: the run as the store holds it, if the caller has it: not loaded again)."""
        if run_id in self.live and (everyone or self.users.get(run_id) == user):
            return
        if saved is not None and self._visible(run_id, saved, user, everyone):
            return
        await self._saved(run_id, user, everyone)

    async def show(self, run_id: str, user: str | None, everyone: bool) -> dict[str, Any]:
        if run_id in self.live and await self.store.load(run_id) is None:  # not checkpointed yet
            await self.check_visible(run_id, user, everyone)
            return {
                **_summary(run_id, self.live[run_id], "start", None, time.time(), self.users.get(run_id)),
                **{"input": None, "output": None, "error": None, "running": True, "pending": [], "trace": []},
            }
        saved = await self._saved(run_id, user, everyone)
        rs = rebuild(saved)
        return {
            **_summary(
                saved.run_id,
                saved.agent,
                saved.stage,
                self._outcome(saved.run_id, saved.outcome),
                saved.updated,
                self.users.get(run_id),
            ),
            "input": rs.input if isinstance(rs.input, str) else str(rs.input),
            "output": _plain(rs.output),
            "error": rs.error.message if rs.error is not None else None,
            "running": run_id in self.live,
            "pending": [p.model_dump(mode="json") for p in pending_of(rs)] if saved.outcome == "suspended" else [],
            "trace": list(saved.trace),
        }

    async def runs(
        self,
        user: str | None,
        everyone: bool,
        *,
        agent: str | None = None,
        outcome: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The runs ``user`` may see, newest first, filtered by agent, outcome and time of last checkpoint."""
        found = []
        for s in await self.store.runs(limit=max(limit * 4, 200)):
            if agent and s.agent != agent:
                continue
            said = self._outcome(s.run_id, s.outcome)
            if outcome and (said or "running") != outcome:
                continue
            if (since is not None and s.updated < since) or (until is not None and s.updated > until):
                continue
            if not everyone and s.run_id not in self.users:
                self._visible(s.run_id, await self.store.load(s.run_id), user, everyone)
            if everyone or (user is not None and self.users.get(s.run_id) == user):
                found.append(_summary(s.run_id, s.agent, s.stage, said, s.updated, self.users.get(s.run_id)))
            if len(found) >= limit:
                break
        return found

    async def last_seq(self, run_id: str) -> int:
        """The seq of the run's last event the store holds (0: none)."""
        stored = await self.store.events(run_id)
        return int(json.loads(stored[-1])["seq"]) if stored else 0

    def _outcome(self, run_id: str, stored: str | None) -> str | None:
        return "paused" if stored is None and run_id in self.paused else stored

    async def events(self, run_id: str) -> list[Any]:
        """Every event of the run the store kept, as event objects (for the trace page)."""
        from ..data.events import EVENT_ADAPTER

        return [EVENT_ADAPTER.validate_json(raw) for raw in await self.store.events(run_id)]

    # ------------------------------------------------------------------ following a run

    async def follow(self, run_id: str, after: int, *, heartbeat: float = 15.0) -> AsyncIterator[list[Item] | str]:
        """The run's events after seq ``after``, in order, in batches as they happen: first what
        the store and the leg in progress hold, then what arrived since the last batch. Ends
        after the run ends (``"end"``); yields ``"dropped"`` (then stops) when this client fell
        too far behind, ``"shutdown"`` (then stops) when the server is shutting down,
        ``"ping"`` when idle for ``heartbeat`` seconds, ``"busy"`` (then stops)
        when as many streams are open as may be."""
        hub = self._hub(run_id)
        sub, history = hub.subscribe(self.streams)
        try:
            if self.streams.open > self.streams.max_streams:
                yield BUSY
                return
            stored = await self.store.events(run_id)
            merged = _merged(stored, history)
            first = [item for item in merged if item.seq > after]
            last = first[-1].seq if first else after
            if first:
                yield first
            if not hub.running and any(item.type == "run_finished" for item in merged):
                yield END
                return
            if self.stopping:
                yield SHUTDOWN
                return
            async for live in self._live(sub, last, heartbeat):
                yield live
        finally:
            hub.subscribers.discard(sub)
            sub.close()
            self._forget(run_id)

    async def _live(self, sub: Subscriber, last: int, heartbeat: float) -> AsyncIterator[list[Item] | str]:
        while True:
            batch = await sub.batch(heartbeat)
            if sub.dropped:
                yield "dropped"
                return
            if not batch and not sub.ended:
                yield "ping"
            fresh = [item for item in batch if item.seq > last or item.seq < 0]
            if fresh:
                last = max(last, fresh[-1].seq)
                yield fresh
            if sub.ended and not sub.queue:
                yield END
                return
            if sub.stopped:
                yield SHUTDOWN
                return

    # ------------------------------------------------------------------ steering a run

    async def decide(self, run_id: str, decisions: list[DecisionIn], user: str | None, everyone: bool) -> None:
        """Resume a suspended run with ``decisions`` (one per pending call at most); refused
        (ServeError, nothing changed) unless each names a call the run waits for."""
        self._claim(run_id)
        try:
            saved = await self._saved(run_id, user, everyone)
            runner = self.runner(saved.agent)
            if saved.outcome != "suspended" or saved.stage not in runner.machine.waiting:
                raise ServeError(409, not_waiting(run_id, saved))
            decided = decisions_for(run_id, pending_of(rebuild(saved)), decisions)
        except BaseException:
            self._busy.discard(run_id)
            raise
        await self._resume(runner, run_id, decided, cancel=False)

    async def cancel(self, run_id: str, user: str | None, everyone: bool) -> str:
        """Cancel a run: one running here is interrupted; a suspended or paused one ends cancelled."""
        await self.check_visible(run_id, user, everyone)
        for runner in self.runners.values():
            if runner.cancel(run_id):
                return "cancelling"
        self._claim(run_id)
        try:
            saved = await self._saved(run_id, user, everyone)
            if saved.outcome in ENDED or saved.stage in self.runner(saved.agent).machine.terminals:
                raise ServeError(
                    409, f"run {run_id!r} has ended (outcome {saved.outcome!r}); there is nothing to cancel"
                )
        except BaseException:
            self._busy.discard(run_id)
            raise
        await self._resume(self.runner(saved.agent), run_id, None, cancel=True)
        return "cancelled"

    async def pause(self, run_id: str, user: str | None, everyone: bool) -> None:
        await self.check_visible(run_id, user, everyone)
        for runner in self.runners.values():
            if runner.pause(run_id):
                return
        raise ServeError(
            409, f"run {run_id!r} is not running here, so it cannot be paused; GET /runs/{run_id} says where it is"
        )

    async def resume(self, run_id: str, user: str | None, everyone: bool) -> None:
        """Continue a paused run (or one whose worker stopped) where it stopped."""
        self._claim(run_id)
        try:
            saved = await self._saved(run_id, user, everyone)
            if saved.outcome == "suspended":
                raise ServeError(409, f"run {run_id!r} waits for decisions: POST /runs/{run_id}/decisions")
            if saved.outcome in ENDED:
                raise ServeError(
                    409, f"run {run_id!r} has ended (outcome {saved.outcome!r}); there is nothing to resume"
                )
        except BaseException:
            self._busy.discard(run_id)
            raise
        await self._resume(self.runner(saved.agent), run_id, None, cancel=False)

    def _claim(self, run_id: str) -> None:
        if run_id in self.live or run_id in self._busy:
            raise ServeError(
                409, f"run {run_id!r} is running (or being decided) now; wait for it to stop, then try again"
            )
        self._busy.add(run_id)

    async def _resume(self, runner: Runner, run_id: str, decisions: Mapping[str, Any] | None, cancel: bool) -> None:
        """Start the run's next leg in the background; return once it runs (or raise why it could not)."""
        hub = self._hub(run_id)
        hub.leg_started()
        task = asyncio.get_running_loop().create_task(runner.resume(run_id, decisions, cancel=cancel))
        try:
            deadline = time.monotonic() + 10.0
            # the runner signals no "registered" moment: look every 2 ms, for at most 10 s
            while not task.done() and not runner.is_running(run_id) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            if task.done() and task.exception() is not None:
                exc = task.exception()
                hub.leg_stopped(ended=False)
                self._forget(run_id)
                raise ServeError(409, str(exc)) from None
            self.live[run_id] = runner.agent.name
            self.paused.discard(run_id)
        finally:
            self._busy.discard(run_id)
        self._spawn(run_id, task)


async def _keep_user(store: RunStore, run_id: str, user: str) -> None:
    """Keep who starts run ``run_id`` beside it in the store, never in its state (which its
    tools can write): ServeError 409 if the id is taken. A store that cannot keep it
    (no ``set_user``): the run is this process's user's, and after a restart only a caller who
    sees every run sees it."""
    keep = getattr(store, "set_user", None)
    if keep is None:
        _log.warning("serve.user_not_kept", run_id=run_id, store=type(store).__name__)
        return
    try:
        await keep(run_id, user)
    except NotImplementedError:
        _log.warning("serve.user_not_kept", run_id=run_id, store=type(store).__name__)
    except LoopwrightError as exc:
        raise ServeError(409, str(exc)) from None


def _user_of(saved: SavedRun) -> str | None:
    """Who the run belongs to, as the store keeps it beside the run (never its state)."""
    return saved.user


def _summary(
    run_id: str, agent: str, stage: str, outcome: str | None, updated: float, user: str | None
) -> dict[str, Any]:
    return {"run_id": run_id, "agent": agent, "stage": stage, "outcome": outcome, "updated": updated, "user": user}


def _plain(value: Any) -> Any:
    dump: Callable[..., Any] | None = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


def _merged(stored: list[bytes], history: list[Item]) -> list[Item]:
    """The store's events and the leg in progress's, once each, in seq order."""
    by_seq: dict[int, Item] = {}
    for raw in stored:
        data = json.loads(raw)
        by_seq[data["seq"]] = Item.of(data["seq"], data["type"], raw.decode() if isinstance(raw, bytes) else str(raw))
    for item in history:
        by_seq.setdefault(item.seq, item)
    return [by_seq[seq] for seq in sorted(by_seq)]
