"""Observers: code that watches runs and never steers them (trio's instruments).

An observer is any object with some of these methods (one signature each):

- ``on_transition(run, row)``: the run took ``row`` (``run.state`` is its RunState,
  ``run.machine`` the machine);
- ``on_event(event)``: an event was emitted (a built, typed event);
- ``on_finish(result)``: the run ended or paused (a RunResult);
- ``on_start(run)``: a run (or a resumed run) is about to begin, before its first event; it
  returns an observer for that run alone, or None. A per-run observer has the three hooks
  above, and may have ``tool_scope(call)``: a context manager entered around each tool call,
  in the task that runs it, and ``model_scope(request)``: one entered around each model call
  (OpenTelemetry uses them to make the call's span current, so the tool's or the model
  client's own spans nest under it). An observer that watches only some runs (tracing when a
  tracer provider is set) costs the other runs one call each.

They are kept in per-hook sets, so a run pays only for the hooks someone watches. An observer
that raises is removed from its sets and the failure is logged; the run goes on as if it had
never been there. Observers are installed for every runner (:func:`instrument`), per runner
(``Runner(agent, observers=[...])``), or per run (``runner.start(text, sink=...)``,
``runner.stream(...)``). Transition logging (:func:`configure_logging`), the event sink and
the testing kit's row coverage are observers; an OpenTelemetry one plugs in the same way.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .log import LogFormat, get_logger, make_logger

HOOKS = ("on_transition", "on_event", "on_finish", "on_start")


class Observers:
    """Per-hook observer sets. ``transition``, ``event``, ``finish`` and ``start`` hold
    ``(observer, bound method)`` pairs in the order observers were added."""

    __slots__ = ("event", "finish", "start", "transition")

    def __init__(self, *observers: object) -> None:
        self.transition: list[tuple[object, Callable[..., None]]] = []
        self.event: list[tuple[object, Callable[..., None]]] = []
        self.finish: list[tuple[object, Callable[..., None]]] = []
        self.start: list[tuple[object, Callable[..., Any]]] = []
        for observer in observers:
            self.add(observer)

    def add(self, observer: object) -> None:
        """Watch with ``observer`` (on each hook it has a method for); adding it twice is a no-op."""
        methods = [getattr(observer, hook, None) for hook in HOOKS]
        if not any(callable(m) for m in methods):
            raise TypeError(
                f"{type(observer).__name__} is not an observer: give it one of the methods {', '.join(HOOKS)}"
            )
        for pairs, method in zip(self._sets(), methods, strict=True):
            if callable(method) and all(o is not observer for o, _ in pairs):
                pairs.append((observer, method))

    def _sets(self) -> tuple[list[tuple[object, Callable[..., Any]]], ...]:
        return self.transition, self.event, self.finish, self.start

    def remove(self, observer: object) -> None:
        for pairs in self._sets():
            pairs[:] = [(o, m) for o, m in pairs if o is not observer]

    def __contains__(self, observer: object) -> bool:
        return any(o is observer for pairs in self._sets() for o, _ in pairs)

    def notify(self, pairs: list[tuple[object, Callable[..., None]]], *args: Any) -> None:
        """Call each observer of one hook; one that raises is removed and logged."""
        for observer, method in tuple(pairs):
            try:
                method(*args)
            except Exception as exc:
                self.remove(observer)
                _report(observer, method, exc)

    def scopes(self, hook: str) -> tuple[Callable[[Any], Any], ...]:
        """The ``hook`` methods (``tool_scope``, ``model_scope``) of the observers in this set."""
        seen = {id(o): o for pairs in self._sets() for o, _ in pairs}
        return tuple(m for o in seen.values() if callable(m := getattr(o, hook, None)))

    def start_run(self, run: Any, into: Observers | None) -> Observers | None:
        """Ask each ``on_start`` observer for an observer of ``run``; add the ones given to ``into``
        (the run's own set, made here if needed) and return it. One that raises, or returns a
        non-observer, is removed and logged."""
        for observer, method in tuple(self.start):
            try:
                watcher = method(run)
                if watcher is not None:
                    into = into or Observers()
                    into.add(watcher)
            except Exception as exc:
                self.remove(observer)
                _report(observer, method, exc)
        return into


def enter_scopes(scopes: tuple[Callable[[Any], Any], ...], item: Any) -> contextlib.ExitStack:
    """Enter each scope (``scope(item)``, a context manager) on a stack the caller closes. One
    that raises on entry or on exit is skipped and reported: observers never break a run."""
    stack = contextlib.ExitStack()
    for scope in scopes:
        try:
            manager = scope(item)
            manager.__enter__()
        except Exception as exc:
            print(f"loopwright: scope {scope!r} raised {type(exc).__name__}: {exc}; skipped", file=sys.stderr)
            continue
        stack.push(_leaving(scope, manager))
    return stack


def _leaving(scope: Any, manager: Any) -> Callable[..., None]:
    def leave(*exc_info: Any) -> None:
        try:
            manager.__exit__(*exc_info)
        except Exception as exc:
            print(f"loopwright: scope {scope!r} raised {type(exc).__name__} on exit: {exc}", file=sys.stderr)

    return leave


def _report(observer: object, method: Callable[..., None], exc: Exception) -> None:
    name = getattr(method, "__name__", "hook")
    message = f"observer {type(observer).__name__}.{name} raised {type(exc).__name__}: {exc}; it was removed"
    logger = get_logger()
    if logger.enabled:
        logger.error("observer_removed", observer=type(observer).__name__, hook=name, error=str(exc))
    else:
        print(f"loopwright: {message}", file=sys.stderr)


INSTRUMENTS = Observers()
"""Observers of every run of every runner in this process."""


def instrument(observer: object) -> None:
    """Watch every run of every runner with ``observer`` (see the module docstring)."""
    INSTRUMENTS.add(observer)


def uninstrument(observer: object) -> None:
    INSTRUMENTS.remove(observer)


class EventSink:
    """An observer that hands every event to a function (``runner.start(text, sink=fn)``)."""

    __slots__ = ("on_event",)

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.on_event = fn


class TransitionLog:
    """The structlog observer: one record per transition (run id, from, to, iteration, the
    guard that chose the row, the rows before it whose guards said no), per tool call, and per
    finished run. Installed by :func:`configure_logging`."""

    def on_transition(self, run: Any, row: Any) -> None:
        rs = run.state
        get_logger().info(
            "transition",
            run_id=rs.run_id,
            **{"from": row.source, "to": row.dest},
            iteration=rs.iteration,
            guard=row.label,
            rejected=[str(r) for r in run.machine.rejected_before(row)],
        )

    def on_event(self, event: Any) -> None:
        if event.type == "tool_answered":
            get_logger().info(
                "tool_call",
                run_id=event.run_id,
                call_id=event.call_id,
                tool=event.name,
                is_error=event.is_error,
                duration_s=round(event.duration_s, 6),
            )

    def on_finish(self, result: Any) -> None:
        get_logger().info(
            "run_finished",
            run_id=result.run_id,
            agent=result.agent,
            outcome=result.outcome,
            iterations=result.iterations,
            tool_calls=result.tool_calls,
            limit=result.limit,
            error=result.error.message if result.error else None,
        )


_TRANSITION_LOG = TransitionLog()


def configure_logging(fmt: LogFormat = "console", *, level: str = "info", stream: TextIO | None = None) -> None:
    """Turn loopwright's structured logs on (``console``/``json``), hand them to the app's own
    structlog configuration (``structlog``), or off again (``off``)."""
    make_logger(fmt, level=level, stream=stream)
    if fmt == "off":
        uninstrument(_TRANSITION_LOG)
    else:
        instrument(_TRANSITION_LOG)
