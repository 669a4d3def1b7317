"""``loopwright worker --temporal HOST:PORT --task-queue Q module:agent`` (a Temporal worker for
the agent's runs), ``loopwright run --temporal HOST:PORT --task-queue Q module:agent TEXT`` (a run
started on it; its output printed, or its RunResult as JSON with ``--json``) and ``loopwright
trace RUN_ID --temporal HOST:PORT`` (the trace page of a run, read from Temporal)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ..data.errors import ConfigurationError, LoopwrightError
from ..runtime.agent import Agent


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temporal", required=True, metavar="HOST:PORT", help="the Temporal server's gRPC address")
    parser.add_argument("--task-queue", default="loopwright", metavar="Q", help="the task queue (default loopwright)")
    parser.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")
    parser.add_argument("target", help="module:attr of the Agent, e.g. myapp:agent")


def worker_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwright worker --temporal",
        description="Run an agent's runs as Temporal workflows (pip install 'loopwright[temporal]').",
    )
    _common(parser)
    parser.add_argument(
        "--heartbeat", type=float, default=10.0, help="a stage's worker is taken for dead after this many seconds"
    )
    parser.add_argument(
        "--sticky-timeout",
        type=float,
        default=10.0,
        help="seconds a run's next workflow task waits for this worker before any worker takes it",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="checkpoint a workflow agent's children here (sqlite:///runs.db, postgresql://...)",
    )
    return parser


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwright run --temporal", description="Start a run on Temporal workers and wait for its result."
    )
    _common(parser)
    parser.add_argument("input", help="the user's message")
    parser.add_argument("--run-id", default=None, help="the run's id (the workflow id; default: a new one)")
    parser.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    return parser


def trace_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwright trace --temporal",
        description="Write the trace page of a run on Temporal, read from Temporal by its run id (the workflow id).",
    )
    parser.add_argument("run_id", help="the run's id (its workflow id)")
    parser.add_argument("--temporal", required=True, metavar="HOST:PORT", help="the Temporal server's gRPC address")
    parser.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")
    parser.add_argument("--agent", dest="target", default=None, help="module:attr of the Agent the run used")
    parser.add_argument(
        "--store", metavar="URL", default=None, help="a workflow agent's children, from the workers' --store"
    )
    parser.add_argument("-o", "--output", default="trace.html", help="the page to write (default: trace.html)")
    return parser


def trace_main(argv: Sequence[str]) -> int:
    """The run's RunResult from Temporal (ended: its result; running: the ``loopwright:result``
    query), drawn as :func:`~loopwright.write_trace_page` draws any run."""
    args = trace_parser().parse_args(argv)
    prog = "loopwright trace"
    from ..machines.diagram import machine_for_target
    from .trace_page import write_trace_page

    async def read() -> tuple[Any, Any]:
        from temporalio.client import Client

        from ..integrations.temporal import read_result

        client = await Client.connect(args.temporal, namespace=args.namespace)
        result = await read_result(client, args.run_id)
        return result, await _children(args.store, result, machine)

    try:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        machine = machine_for_target(args.target)
        result, children = asyncio.run(read())
        path = write_trace_page(result, args.output, machine=machine, children=children)
    except (LookupError, LoopwrightError, RuntimeError, OSError) as exc:
        print(f"{prog}: {exc.args[0] if exc.args else type(exc).__name__}", file=sys.stderr)
        code = 2
    else:
        print(f"wrote {path} (run {result.run_id}: {result.outcome or 'running'})", flush=True)
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # (the client's core threads, as run's: leave without finalizing)


async def _children(url: str | None, result: Any, machine: Any) -> Any:
    """A workflow agent's children from the workers' store (None: no store, or not a workflow's run);
    the run's own events are its RunResult's (Temporal holds the run; the store, its children)."""
    from ..data.events import EVENT_ADAPTER
    from ..stores.base import StoreWrapper
    from .trace_children import composites_of, stored_children

    if url is None or machine is None or not composites_of(machine):
        return None
    from .runs_cli import open_cli_store

    root, lines = result.run_id, [EVENT_ADAPTER.dump_json(e) for e in result.events]

    class RunFromTemporal(StoreWrapper):
        async def events(self, run_id: str) -> list[bytes]:
            return lines if run_id == root else await self.inner.events(run_id)

    store = await open_cli_store(url, read_only=True)
    try:
        return await stored_children(RunFromTemporal(store), root, machine)
    finally:
        await store.close()


def _agent(target: str, prog: str) -> Agent | None:
    from ..machines.verify import load_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        agent = load_target(target)
    except LookupError as exc:
        print(f"{prog}: {exc.args[0]}", file=sys.stderr)
        return None
    if not isinstance(agent, Agent):
        print(f"{prog}: {target} is not an Agent (a LoopMachine?); name the Agent that runs on it", file=sys.stderr)
        return None
    return agent


async def _runner(args: argparse.Namespace, agent: Agent, **options: Any) -> Any:
    from temporalio.client import Client

    from ..integrations.temporal import TemporalRunner

    client = await Client.connect(args.temporal, namespace=args.namespace)
    return TemporalRunner(agent, client=client, task_queue=args.task_queue, **options)


def worker_main(argv: Sequence[str]) -> int:
    """Serve the agent's runs until SIGTERM/SIGINT."""
    args = worker_parser().parse_args(argv)
    prog = "loopwright worker"
    if args.heartbeat <= 0 or args.sticky_timeout <= 0:
        print(f"{prog}: --heartbeat and --sticky-timeout take seconds, more than 0", file=sys.stderr)
        return 2
    agent = _agent(args.target, prog)
    if agent is None:
        return 2

    async def serve() -> None:
        store = None
        if args.store is not None:
            from ..stores import open_store

            store = await open_store(args.store)
        runner = await _runner(args, agent, heartbeat_s=args.heartbeat, store=store)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        sticky = timedelta(seconds=args.sticky_timeout)
        async with runner.worker(sticky_queue_schedule_to_start_timeout=sticky):
            print(
                f"loopwright worker {os.getpid()}: agent {agent.name} on task queue {args.task_queue} "
                f"at {args.temporal}",
                flush=True,
            )
            await stop.wait()

    try:
        asyncio.run(serve())
    except (LoopwrightError, RuntimeError, OSError) as exc:
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    # The worker has shut down (its runs handed back to the server). temporalio's core threads may
    # still call into Python while the interpreter finalizes (a fatal PyGILState_Release, exit
    # -6): leave without finalizing, the output flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_main(argv: Sequence[str]) -> int:
    """Start one run, wait for it to stop, print its output (or its RunResult as JSON)."""
    args = run_parser().parse_args(argv)
    prog = "loopwright run"
    agent = _agent(args.target, prog)
    if agent is None:
        return 2

    async def one() -> Any:
        runner = await _runner(args, agent)
        return await runner.run(args.input, run_id=args.run_id)

    try:
        result = asyncio.run(one())
    except (ConfigurationError, RuntimeError, OSError) as exc:
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        from ..durable.codec import run_result_json

        print(run_result_json(result))
    else:
        print(f"run {result.run_id}: {result.outcome}", file=sys.stderr)
        print(result.output if result.output is not None else "")
    # (the client's core threads, as the worker's: leave without finalizing, the output flushed)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if result.outcome in ("final", "suspended", "paused") else 1)


def wants_temporal(argv: Sequence[str]) -> bool:
    """``loopwright worker|run|trace ... --temporal ...``: this module's commands."""
    return (
        bool(argv)
        and argv[0] in ("worker", "run", "trace")
        and any(a == "--temporal" or a.startswith("--temporal=") for a in argv)
    )


def temporal_main(argv: Sequence[str]) -> int:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        print(f"loopwright {argv[0]} --temporal: pip install 'loopwright[temporal]'", file=sys.stderr)
        return 2
    if argv[0] == "trace":
        return trace_main(argv[1:])
    return worker_main(argv[1:]) if argv[0] == "worker" else run_main(argv[1:])
