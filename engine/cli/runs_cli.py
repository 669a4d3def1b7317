"""``loopwright runs``: the runs a store holds.

::

    loopwright runs list   --store sqlite:///runs.db
    loopwright runs show   RUN --store URL [--json]
    loopwright runs resume RUN --store URL --agent myapp.agents:support [--approve CALL] [--deny CALL[=reason]]
    loopwright runs diagram RUN --store URL [--format mermaid] [--agent module:attr]

``--store`` defaults to ``$LOOPWRIGHT_STORE``; URLs are ``sqlite:///runs.db`` or
``postgresql://user@host/db``. Exit codes as the rest of the CLI: 0 ok, 1 the work failed
(a resume that did not end well, a drawing that cannot be made), 2 a bad argument (no such
store, run or agent; the message says which).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sqlite3
import sys
from typing import Any

from ..data.decisions import approve, deny
from ..data.errors import ConfigurationError, ResumeError
from ..data.events import EVENT_ADAPTER
from ..durable.checkpoint import rebuild
from ..stores import RunStore, SQLiteStore, open_store


def add_runs_parser(sub: Any) -> None:
    """Register ``runs`` on the CLI's subcommands."""
    runs = sub.add_parser("runs", help="list, show, resume or draw the runs a store holds")
    verbs = runs.add_subparsers(dest="verb", required=True, parser_class=type(runs))
    store_help = "the store: sqlite:///runs.db or postgresql://user@host/db (default: $LOOPWRIGHT_STORE)"
    for name, help_text in (
        ("list", "the most recent runs"),
        ("show", "one run: its state, trace, history and what it waits for"),
        ("resume", "resume a suspended run, or one whose worker crashed"),
        ("diagram", "draw the run's path on its machine"),
    ):
        verb = verbs.add_parser(name, help=help_text)
        verb.add_argument("--store", default=os.environ.get("LOOPWRIGHT_STORE"), help=store_help)
        if name != "list":
            verb.add_argument("run_id", metavar="RUN", help="the run's id")
        if name in ("resume", "diagram"):
            verb.add_argument("--agent", dest="target", default=None, help="module:attr of the run's Agent")
    verbs.choices["list"].add_argument("--limit", type=int, default=50, help="how many runs (default 50)")
    verbs.choices["show"].add_argument("--json", action="store_true", help="print the run state as JSON")
    resume = verbs.choices["resume"]
    resume.add_argument("--approve", action="append", default=[], metavar="CALL", help="approve a pending call")
    resume.add_argument("--deny", action="append", default=[], metavar="CALL[=REASON]", help="deny a pending call")
    verbs.choices["diagram"].add_argument("--format", dest="fmt", default="mermaid", help="mermaid, dot, svg or png")


def runs_main(args: argparse.Namespace) -> int:
    if not args.store:
        print("loopwright runs: name the store: --store sqlite:///runs.db (or set LOOPWRIGHT_STORE)", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_dispatch(args))
    except (ConfigurationError, LookupError) as exc:
        print(f"loopwright runs {args.verb}: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2


async def open_cli_store(url: str, *, read_only: bool = False) -> RunStore:
    """The store at ``url`` for a command. ``read_only``: an existing SQLite store opened to read
    (no file made, no table added, a file that is not a loopwright store refused). Any failure
    to open it is a ConfigurationError of one line naming the cause."""
    path = _sqlite_path(url)
    try:
        if path is not None and read_only:
            return SQLiteStore(path, read_only=True)
        if read_only and url.startswith(("postgresql://", "postgres://")):
            from ..stores.postgres import PostgresStore

            return await PostgresStore.open(url, read_only=True)
        return await open_store(url)
    except sqlite3.DatabaseError as exc:
        raise ConfigurationError(_sqlite_trouble(path or url, exc)) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot open the run store {url}: {exc.strerror or exc}") from None
    except Exception as exc:
        if type(exc).__name__ != "PoolTimeout":  # psycopg_pool's: the server never answered
            raise
        raise ConfigurationError(f"cannot connect to the run store {url} ({exc}); is the server running?") from None


def _sqlite_path(url: str) -> str | None:
    """The file of a SQLite store URL (as :func:`~loopwright.stores.open_store` reads it)."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite://"):
        return url.removeprefix("sqlite://").removeprefix("/") or None
    return None if "://" in url else url


def _sqlite_trouble(path: str, exc: sqlite3.DatabaseError) -> str:
    """Why SQLite could not open the store ``path``, in words for the user."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        return f"cannot make the run store {path!r}: the folder {folder!r} does not exist; create it or fix the path"
    if isinstance(exc, sqlite3.OperationalError):
        return f"cannot open the run store {path!r}: {exc}"
    return f"{path!r} is not a SQLite database ({exc}); name a loopwright run store, or a new file to make one"


async def _dispatch(args: argparse.Namespace) -> int:
    store = await open_cli_store(args.store, read_only=args.verb != "resume")
    try:
        if args.verb == "list":
            return await _list(store, args.limit)
        if args.verb == "show":
            return await _show(store, args.run_id, args.json)
        if args.verb == "resume":
            return await _resume(store, args)
        return await _diagram(store, args.run_id, args.fmt, args.target)
    finally:
        await store.close()


def _when(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


async def _list(store: RunStore, limit: int) -> int:
    runs = await store.runs(limit)
    if not runs:
        print(f"no runs in {store.url}")
        return 0
    width = max(len(r.run_id) for r in runs)
    print(f"{'RUN':<{width}}  {'AGENT':<12} {'STATE':<12} {'OUTCOME':<10} {'CHECKPOINTS':>11}  UPDATED (UTC)")
    for r in runs:
        outcome = r.outcome or "-"
        print(f"{r.run_id:<{width}}  {r.agent:<12} {r.stage:<12} {outcome:<10} {r.version:>11}  {_when(r.updated)}")
    return 0


async def _load(store: RunStore, run_id: str) -> Any:
    saved = await store.load(run_id)
    if saved is None:
        raise LookupError(f"no run {run_id!r} in {store.url}; `loopwright runs list --store {store.url}` lists them")
    return saved


async def _show(store: RunStore, run_id: str, as_json: bool) -> int:
    saved = await _load(store, run_id)
    rs = rebuild(saved)
    if as_json:
        sys.stdout.write(rs.to_json().decode() + "\n")
        return 0
    print(f"run {run_id}  agent {rs.agent}  state {rs.stage}  outcome {rs.outcome or '-'}")
    print(f"  checkpoints {saved.version}, last {_when(saved.updated)} UTC, worker {saved.owner}")
    print(f"  iterations {rs.iteration}, tool calls {rs.tool_calls_made}, messages {len(rs.messages)}")
    print(f"  trace: {' -> '.join(rs.trace)}")
    for part in rs.features.values():
        for p in getattr(part, "pending_requests", list)():
            print(f"  waits: {p.call_id} {p.tool}({json.dumps(p.args)}) for a {p.kind}: {p.detail}")
    if rs.output is not None:
        print(f"  output: {rs.output}")
    if rs.error is not None:
        print(f"  error: {rs.error.message}")
    return 0


async def _resume(store: RunStore, args: argparse.Namespace) -> int:
    from ..loop.runner import Runner
    from ..machines.verify import load_target
    from ..runtime.agent import Agent

    if args.target is None:
        print("loopwright runs resume: name the run's agent: --agent myapp.agents:support", file=sys.stderr)
        return 2
    agent = load_target(args.target)
    if not isinstance(agent, Agent):
        raise LookupError(f"{args.target} is a LoopMachine; resume needs the Agent (its model and tools)")
    decisions: dict[str, Any] = {call: approve() for call in args.approve}
    for item in args.deny:
        call, _, reason = item.partition("=")
        decisions[call] = deny(reason)
    try:
        result = await Runner(agent, store=store).resume(args.run_id, decisions or None)
    except ResumeError as exc:
        print(f"loopwright runs resume: {exc}", file=sys.stderr)
        return 1
    print(f"run {args.run_id}: {result.outcome}")
    if result.output is not None:
        print(result.output)
    for p in result.pending:
        print(f"  waits: {p.call_id} {p.tool}({json.dumps(p.args)}) for a {p.kind}: {p.detail}")
    return 0 if result.outcome in ("final", "salvaged", "suspended") else 1


async def _diagram(store: RunStore, run_id: str, fmt: str, target: str | None) -> int:
    from ..machines.diagram import FORMATS, diagram, machine_for_target, machine_of_trace

    if fmt not in FORMATS:
        print(f"loopwright runs diagram: unknown format {fmt!r}; use one of {', '.join(FORMATS)}", file=sys.stderr)
        return 2
    await _load(store, run_id)
    events = [EVENT_ADAPTER.validate_json(e) for e in await store.events(run_id)]
    machine = machine_for_target(target) or machine_of_trace(events)
    data = diagram(machine, fmt, trace=events)
    if isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data if data.endswith("\n") else data + "\n")
    return 0
