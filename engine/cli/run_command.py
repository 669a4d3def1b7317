"""``loopwright run module:agent "input"``: run any agent from the terminal.

- On a terminal: the live view (the active agent and stage, the iteration, the budgets left,
  the tool calls as they run, the transition path so far), then the path taken and the answer.
- ``--json``: the run's events as JSON lines on standard output (for ``loopwright trace``,
  ``loopwright diagram --trace``, or your own tools); prompts and notes go to standard error.
- Calls that need a person: a confirmation is asked in the terminal (``y``/``n``, with a reason
  when denied), a credential is asked without echo, a long-running tool's result as JSON. Off a
  terminal (or when not every request is decided) the run's state is saved under
  ``.loopwright/runs/RUN_ID.json`` and the command says how to go on: ``--resume RUN_ID`` (or
  the file's path) continues it, asking again. ``--yes`` approves every confirmation unasked.
- ``--trace trace.html`` also writes the run's trace page (:mod:`loopwright.cli.trace_page`).

``module:agent`` names an Agent, or a function of no arguments that makes one, importable from
the current folder (it is put first on ``sys.path``, as ``python -m`` does). Exit codes: 0 the
run answered (``final`` or ``salvaged``), 1 it did not (failed, limit, cancelled), 2 a bad
argument, 3 it waits for decisions (its state saved).
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from ..data.decisions import approve, deny
from ..data.errors import ConfigurationError, ResumeError
from ..data.events import Event, PendingRequest
from ..data.result import RunResult
from ..data.run_state import RunState
from ..data.values import clean_text
from ..durable.checkpoint import rebuild
from ..loop.runner import Runner
from ..runtime.agent import Agent
from .live import EventLines, LiveView
from .runs_cli import open_cli_store

RUNS_DIR = Path(".loopwright") / "runs"
EXIT_WAITING = 3


class RunView(LiveView):
    """The demo's live view, plus the budgets left and the transition path so far."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent.name, agent.limits.max_iterations)
        self.limits = agent.limits
        self.path: list[str] = []
        self.tool_calls = 0
        self.tokens = 0
        self.started = time.time()

    def add(self, event: Event) -> None:
        super().add(event)
        if event.type == "run_started":
            self.started = event.time
        elif event.type == "state_entered":
            if not self.path:
                self.path.append(event.source)
            self.path.append(event.state)
        elif event.type == "tool_called":
            self.tool_calls += 1
        elif event.type == "model_responded":
            self.tokens += event.response.usage.total_tokens
        elif event.type == "suspended":
            for request in event.pending:
                if request.call_id in self.calls:
                    self.calls[request.call_id][3] = f"waiting: {request.kind}"

    def budgets(self) -> Text:
        limits = self.limits
        cells: list[tuple[str, str]] = [("iterations", f"{limits.max_iterations - self.iteration}")]
        if limits.max_tool_calls is not None:
            cells.append(("tool calls", f"{limits.max_tool_calls - self.tool_calls}"))
        if limits.max_total_tokens is not None:
            cells.append(("tokens", f"{limits.max_total_tokens - self.tokens}"))
        if limits.timeout_s is not None:
            cells.append(("time", f"{max(limits.timeout_s - (time.time() - self.started), 0):.1f} s"))
        parts: list[tuple[str, str] | str] = [("budgets left ", "dim")]
        for name, left in cells:
            parts += [(f"{name} ", "dim"), (f"{left}   ", "bold")]
        return Text.assemble(*parts)

    def render(self) -> Panel:
        panel = super().render()
        tail = self.path[-14:]
        path = Text.assemble(("path ", "dim"), ("… " if len(self.path) > 14 else "", "dim"), " → ".join(tail))
        panel.renderable = Group(self.budgets(), panel.renderable, path)
        return panel


class _Feed:
    """The runner's observer: every event to the view (and the live display) or as a JSON line
    (:class:`~loopwright.cli.live.EventLines`); what failed is kept, never raised into the run."""

    def __init__(self, view: RunView, out: TextIO | None) -> None:
        self.view = view
        self.lines = EventLines(out) if out is not None else None
        self.screen: Live | None = None
        self.events: list[Event] = []
        self.shown_failed: Exception | None = None
        """Why the live view failed to show an event (the run goes on; the command then exits 1)."""

    @property
    def failed(self) -> BaseException | None:
        """Why an event could not be written or shown (None: every one was)."""
        return self.lines.failed if self.lines is not None else self.shown_failed

    def why(self) -> str:
        if self.lines is not None:
            return self.lines.why()
        return f"{type(self.shown_failed).__name__}: {self.shown_failed}" if self.shown_failed else ""

    def on_event(self, event: Event) -> None:
        self.events.append(event)
        if self.lines is not None:
            self.lines.write(event)
            return
        if self.shown_failed is not None:
            return
        try:
            self.view.add(event)
            if self.screen is not None:
                self.screen.update(self.view.render())
        except Exception as exc:  # the run is not stopped for it; the command says so at the end
            self.shown_failed = exc


def add_command(sub: Any) -> None:
    """Register ``loopwright run`` on the CLI's subparsers."""
    command = sub.add_parser("run", help="run your agent (module:attr) on an input, with the live view")
    command.add_argument("target", help="module:attr of an Agent (or a function making one), e.g. myapp:agent")
    command.add_argument(  # (clean_text: bytes the locale cannot decode arrive as lone surrogates, now U+FFFD)
        "input", nargs="?", default=None, type=clean_text, help="the user's message (not with --resume)"
    )
    command.add_argument("--json", action="store_true", help="print the run's events as JSON lines")
    command.add_argument("--resume", metavar="RUN", default=None, help="continue a waiting run (its id or file)")
    command.add_argument("--yes", action="store_true", help="approve every confirmation without asking")
    command.add_argument("--trace", metavar="HTML", default=None, help="also write the run's trace page here")
    command.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="checkpoint the run in a store (sqlite:///runs.db, postgresql://...); --resume RUN resumes it from there",
    )
    command.add_argument(
        "--model",
        metavar="SPEC",
        default=None,
        help="run the agent on this model instead of its own: openai:MODEL, anthropic:MODEL, gemini:MODEL",
    )
    command.add_argument(
        "--base-url",
        metavar="URL",
        default=None,
        help="an OpenAI-compatible server for --model openai:... (Chat Completions)",
    )
    command.set_defaults(handler=run_command)


def _run(
    agent: Any, args: Any, saved: Any, console: Console, feed: _Feed, saved_at: Any
) -> tuple[RunResult, Mapping[str, Sequence[Any]] | None]:
    """Drive the run; with ``--trace``, every run's events too (a workflow's children are drawn inside it)."""
    if args.trace is None:
        return asyncio.run(_drive(agent, args, saved, console, feed, saved_at)), None
    from .trace_children import recording

    with recording() as runs:
        return asyncio.run(_drive(agent, args, saved, console, feed, saved_at)), runs


def run_command(args: Any) -> int:
    console = Console(stderr=args.json)
    agent = _load(args.target, args.model, args.base_url)
    if agent is None:
        return 2
    if (args.input is None) == (args.resume is None):
        _fail("loopwright run: give the input, or --resume RUN (not both)")
        return 2
    saved: RunState | None = None
    saved_at: Path | None = None
    if args.resume is not None and args.store is None:
        saved_at = _state_file(args.resume)
        saved = _load_state(saved_at, agent)
        if saved is None:
            return 2
    feed = _Feed(RunView(agent), sys.stdout if args.json else None)
    try:
        result, runs = _run(agent, args, saved, console, feed, saved_at)
    except (ConfigurationError, ResumeError, LookupError) as exc:
        _fail(f"loopwright run: {exc}")
        return 2
    if feed.failed is not None and not isinstance(feed.failed, BrokenPipeError):  # (a reader that left: fine)
        doing = "writing the events" if args.json else "showing the run"
        _fail(f"loopwright run: {doing} failed ({feed.why()}); the run went on: {result.outcome}")
        return 1
    if args.trace is not None:
        from .trace_page import write_trace_page

        page = write_trace_page(feed.events, args.trace, machine=agent, children=runs)
        console.print(f"trace page: {page}", style="dim", markup=False, highlight=False)
    if result.outcome == "suspended":
        where = f"the store {args.store}" if args.store else str(_save(result.run_state))
        store = f" --store {args.store}" if args.store else ""
        console.print(
            f"the run waits for {len(result.pending)} decision(s); its state is in {where}. Go on with:\n"
            f"  loopwright run {args.target}{store} --resume {result.run_id}",
            style="yellow",
            markup=False,
        )
        return EXIT_WAITING
    return 0 if result.outcome in ("final", "salvaged") else 1


def _fail(message: str) -> None:
    """An error: one line on standard error, whatever the terminal's width."""
    print(message, file=sys.stderr, flush=True)


def _with_model(agent: Agent, spec: str | None, base_url: str | None) -> Agent | None:
    """``agent`` on the model ``--model`` names (and ``--base-url`` points at), if given."""
    if spec is None and base_url is None:
        return agent
    if spec is None:
        _fail("loopwright run: --base-url goes with --model openai:MODEL")
        return None
    from ..models.spec import model_with_key

    try:
        return agent.replace(model=model_with_key(spec, base_url))
    except ConfigurationError as exc:
        _fail(f"loopwright run --model: {exc}")
        return None


def _load(target: str, spec: str | None = None, base_url: str | None = None) -> Agent | None:
    from ..machines.verify import load_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's own folder, as `python -m` does
    try:
        agent = load_target(target)
    except LookupError as exc:
        _fail(f"loopwright run: {exc.args[0]}")
        return None
    if not isinstance(agent, Agent):
        _fail(f"loopwright run: {target} is a LoopMachine; name the Agent that runs on it")
        return None
    return _with_model(agent, spec, base_url)


def _state_file(run: str) -> Path:
    given = Path(run)
    return given if given.suffix == ".json" or given.exists() else RUNS_DIR / f"{run}.json"


def _load_state(path: Path, agent: Agent) -> RunState | None:
    try:
        state = RunState.from_json(path.read_bytes())
    except OSError as exc:
        _fail(f"loopwright run: cannot read the saved run {str(path)!r}: {exc.strerror or exc}")
        return None
    except ValueError as exc:
        _fail(f"loopwright run: {str(path)!r} is not a saved loopwright run: {exc}")
        return None
    if state.agent != agent.name:
        _fail(f"loopwright run: run {state.run_id} belongs to agent {state.agent!r}, not {agent.name!r}")
        return None
    return state


def _claim(path: Path, state: RunState, *, look_only: bool = False) -> None:
    """Take this wait of the run saved at ``path``, once across processes (a claim file made
    beside it with O_EXCL, named by the run and its event count): a second resume of the same
    wait is refused, so an approved call does not run twice. ``look_only``: refuse a wait
    claimed already, take nothing (before the decisions are asked)."""
    claim = path.with_name(f"{state.run_id}.{state.seq}.claimed")
    try:
        if look_only:
            if claim.exists():
                raise FileExistsError
            return
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise ResumeError(
            f"run {state.run_id} was already resumed from this wait ({_claimed_by(claim)}); a waiting run is "
            f"resumed once, so that an approved call runs once. If that resume died before it ended, delete "
            f"{claim} to resume it again (its approved calls may then run twice)"
        ) from None
    with os.fdopen(fd, "w") as out:
        json.dump({"pid": os.getpid(), "time": time.time()}, out)


def _claimed_by(claim: Path) -> str:
    try:
        found = json.loads(claim.read_text())
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(found["time"]))
        return f"by process {found['pid']} at {when}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"claimed in {claim}"


def _save(state: RunState) -> Path:
    path = RUNS_DIR / f"{state.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(state.to_json())
    return path


async def _drive(
    agent: Agent, args: Any, saved: RunState | None, console: Console, feed: _Feed, saved_at: Path | None = None
) -> RunResult:
    """Run (or resume) the agent, asking for decisions while it waits and someone can answer
    (a wait saved at ``saved_at`` is claimed first: it is resumed once)."""
    view = feed.view
    store = await open_cli_store(args.store) if args.store is not None else None
    runner = Runner(agent, observers=[feed], store=store)
    interactive = sys.stdin.isatty()
    target: RunResult | RunState | str | None = saved
    result: RunResult | None = None
    decisions: dict[str, Any] = {}
    if store is not None and args.resume is not None:  # from the store, by id (it claims the wait)
        found = await store.load(args.resume)
        if found is None:
            raise LookupError(f"no run {args.resume!r} in {store.url}; `loopwright runs list --store {store.url}`")
        saved, target = rebuild(found), args.resume
    if saved is not None:
        decisions = _decide(saved, saved_at, args.yes, interactive, console)
    while True:
        if target is None:
            result = await _watch(feed, console, runner.run(args.input), args.json)
        else:
            result = await _watch(feed, console, runner.resume(target, decisions), args.json)
        if not args.json:
            _report(view, result, console)
        if result.outcome != "suspended":
            return result
        decisions = _ask(result.pending, args.yes, interactive, console)
        if len(decisions) < len(result.pending):
            return result  # someone must decide the rest: the state is saved
        target = result


def _decide(saved: RunState, saved_at: Path | None, yes: bool, interactive: bool, console: Console) -> dict[str, Any]:
    """The decisions for a saved wait; a wait saved in a file is claimed (refused if it was
    resumed already: looked at before asking, taken once decided)."""
    if saved_at is not None:
        _claim(saved_at, saved, look_only=True)
    decisions = _ask(_pending(saved), yes, interactive, console)
    if saved_at is not None:
        _claim(saved_at, saved)
    return decisions


async def _watch(feed: _Feed, console: Console, work: Any, json_lines: bool) -> RunResult:
    if json_lines:
        return await work  # type: ignore[no-any-return]
    live = console.is_terminal
    with Live(feed.view.render(), console=console, refresh_per_second=12, auto_refresh=live) as screen:
        feed.screen = screen if live else None
        try:
            result: RunResult = await work
        finally:
            feed.screen = None
            screen.update(feed.view.render())
    return result


def _report(view: RunView, result: RunResult, console: Console) -> None:
    console.print(Text("path taken: ", style="dim") + Text(" → ".join(result.trace), style="bold"))
    style = {"final": "bold green", "blocked": "bold red"}.get(result.outcome, "bold yellow")
    console.print(
        Text.assemble(
            ("outcome ", "dim"),
            (result.outcome, style),
            (f"   iterations {result.iterations}   tool calls {result.tool_calls}", "dim"),
            (f"   tokens {result.usage.total_tokens}", "dim"),
        )
    )
    if result.output:
        console.print(Text("answer: ", style="dim") + Text(result.output))
    if result.error:
        console.print(Text(f"error: {result.error.message}", style="red"))
    if result.blocked is not None:
        said = f"blocked by the {result.blocked.where} guard {result.blocked.guard!r}: {result.blocked.message}"
        console.print(Text(said, style="red"))


def _pending(state: RunState) -> list[PendingRequest]:
    found: list[PendingRequest] = []
    for part in state.features.values():
        ask = getattr(part, "pending_requests", None)
        if ask is not None:
            found += ask()
    return found


def _ask(pending: list[PendingRequest], yes: bool, interactive: bool, console: Console) -> dict[str, Any]:
    """A decision for each pending request someone can give now (``--yes`` approves
    confirmations; on a terminal each request is asked)."""
    decisions: dict[str, Any] = {}
    for request in pending:
        args = ", ".join(f"{k}={v!r}" for k, v in request.args.items())
        if request.kind == "confirmation" and yes:
            decisions[request.call_id] = approve()
            console.print(f"approved {request.tool}({args}) (--yes)", style="yellow", markup=False)
            continue
        if not interactive:
            continue
        console.print(Text.assemble(("? ", "bold yellow"), (f"{request.tool}({args})", "bold"), f"  {request.detail}"))
        if request.kind == "confirmation":
            answer = _read(console, "  Approve this call? [y/N] ").strip().lower()
            if answer in ("y", "yes"):
                decisions[request.call_id] = approve()
            else:
                decisions[request.call_id] = deny(_read(console, "  Reason (optional): ").strip())
        elif request.kind == "credential":
            secret = getpass.getpass(f"  {request.credential_key or 'credential'}: ")
            decisions[request.call_id] = secret if secret else deny("no credential given")
        else:
            text = _read(console, "  The result, as JSON (empty: decide later): ").strip()
            if text:
                try:
                    decisions[request.call_id] = json.loads(text)
                except ValueError:
                    decisions[request.call_id] = text
    return decisions


def _read(console: Console, prompt: str) -> str:
    console.print(prompt, end="", markup=False, highlight=False)
    console.file.flush()
    line = sys.stdin.readline()
    if not line:
        raise ConfigurationError("standard input closed while a decision was asked")
    return line


__all__ = ["RUNS_DIR", "RunView", "add_command", "run_command"]
