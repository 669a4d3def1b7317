"""The CLI's live view of a run (rich): current state, iteration n/max, tool calls, then the
path the run took."""

from __future__ import annotations

import contextlib
import os
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..data.events import (
    ErrorOccurred,
    Event,
    LimitReached,
    ModelResponded,
    Observed,
    PlanUpdated,
    RunFinished,
    StateEntered,
    TextDelta,
    ToolAnswered,
    ToolCalled,
    Transferred,
)
from ..data.result import RunResult
from ..loop.runner import Runner


class EventLines:
    """Events as JSON lines on ``out`` (``run --json``, ``demo --json``): every event, or, from
    the first one that cannot be written (a value JSON cannot hold, an encoding that cannot
    hold its text, a full disk), none more and :meth:`why` saying which and why: the run goes
    on, and the command exits 1 (a reader that left, a closed pipe, is not an error)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.failed: BaseException | None = None
        self.failed_at: Event | None = None

    def write(self, event: Event) -> None:
        if self.failed is not None:
            return
        try:
            self.out.write(event.model_dump_json() + "\n")
            self.out.flush()
        except Exception as exc:  # the run is not stopped for it; the command says so at the end
            self.failed, self.failed_at = exc, event
            if isinstance(exc, OSError):
                with contextlib.suppress(OSError, ValueError):  # nothing left to flush at exit
                    os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())

    @property
    def broken(self) -> bool:
        """An event could not be written, and not because the reader left."""
        return self.failed is not None and not isinstance(self.failed, BrokenPipeError)

    def why(self) -> str:
        exc, event = self.failed, self.failed_at
        if exc is None or event is None:
            return ""
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        return f"event {event.seq} ({event.type}): {detail}"


class LiveView:
    """Folds a run's events into a picture."""

    def __init__(self, agent: str, max_iterations: int) -> None:
        self.agent = agent
        self.max_iterations = max_iterations
        self.state = "start"
        self.active = agent
        self.iteration = 0
        self.calls: dict[str, list[str]] = {}  # call id -> [agent, name, args, status, detail]
        self.notes: list[str] = []
        self.reply = ""

    def add(self, event: Event) -> None:
        self.state = event.state
        self.active = event.agent
        self.iteration = event.iteration
        if isinstance(event, ToolCalled):
            args = ", ".join(f"{k}={v!r}" for k, v in event.args.items())
            self.calls[event.call_id] = [event.agent, event.name, args, "running", ""]
        elif isinstance(event, ToolAnswered):
            row = self.calls.setdefault(event.call_id, [event.agent, event.name, "", "", ""])
            row[3] = "error" if event.is_error else "ok"
            row[4] = str(event.content)[:70]
        elif isinstance(event, ModelResponded):
            self.reply = event.response.text
        elif isinstance(event, TextDelta) and not event.thought:
            self.reply += event.text
        elif isinstance(event, StateEntered) and event.state == "reason":
            self.reply = ""
        elif (note := _note(event)) is not None:
            self.notes.append(note)

    def render(self) -> Panel:
        head = Text.assemble(
            ("agent ", "dim"),
            (self.active, "bold magenta"),
            ("   state ", "dim"),
            (self.state, "bold cyan"),
            ("   iteration ", "dim"),
            (f"{self.iteration}/{self.max_iterations}", "bold"),
        )
        table = Table(box=None, show_header=True, header_style="dim", expand=True)
        for column in ("agent", "tool", "arguments", "status", "result"):
            table.add_column(column, overflow="fold")
        style = {"ok": "green", "error": "red", "running": "yellow"}
        for agent, name, args, status, detail in self.calls.values():
            table.add_row(agent, name, args, Text(status, style=style.get(status, "")), detail)
        parts: list[Text | Table] = [head, table]
        parts += [Text(note, style="yellow") for note in self.notes[-4:]]
        if self.reply:
            parts.append(Text(self.reply[-300:], style="italic"))
        return Panel(Group(*parts), title=f"loopwright · {self.agent}", border_style="cyan")


def _note(event: Event) -> str | None:
    """The line an event adds under the table (None: it adds none)."""
    if isinstance(event, ErrorOccurred):
        return f"{event.error.kind}: {event.error.message}"
    if isinstance(event, Transferred):
        return f"transfer {event.from_agent} → {event.to_agent}: {event.task}"
    if isinstance(event, PlanUpdated):
        steps = "; ".join(f"[{s['status']}] {s['description']}" for s in event.steps)
        return f"plan{' (complete)' if event.complete else ''}: {steps}"
    if isinstance(event, Observed):
        return f"observer: {event.verdict}" + (f" — {event.correction}" if event.correction else "")
    if isinstance(event, LimitReached):
        return f"limit reached: {event.limit} ({event.used:g} of {event.value:g})"
    return None


async def run_live(runner: Runner, text: str, *, live: bool, console: Console | None = None) -> RunResult:
    """Run with the live view (``live``) or, off a terminal, print the final frame only."""
    console = console or Console()
    view = LiveView(runner.agent.name, runner.agent.limits.max_iterations)
    stream = runner.stream(text)
    with Live(view.render(), console=console, refresh_per_second=12, transient=False, auto_refresh=live) as screen:
        async for event in stream:
            view.add(event)
            if live:
                screen.update(view.render())
        screen.update(view.render())
    console.line()
    result = stream.result
    path = Text(" → ".join(result.trace), style="bold")
    console.print(Text("path taken: ", style="dim") + path)
    finished = next(e for e in reversed(result.events) if isinstance(e, RunFinished))
    console.print(
        Text.assemble(
            ("outcome ", "dim"),
            (finished.outcome, "bold green" if finished.outcome == "final" else "bold yellow"),
            (f"   iterations {result.iterations}   tool calls {result.tool_calls}", "dim"),
            (f"   tokens {result.usage.total_tokens}", "dim"),
        )
    )
    if result.output:
        shown = result.output if isinstance(result.output, str) else repr(result.output)
        console.print(Text("answer: ", style="dim") + Text(shown))
    if result.error:
        console.print(Text(f"error: {result.error.message}", style="red"))
    return result
