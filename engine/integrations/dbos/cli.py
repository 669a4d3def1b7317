"""``loopwright worker``: serve DBOS runs from queues (``--db``, ``--app``, ``--queue``), and
``loopwright worker cancel``."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from ...data.errors import ConfigurationError
from .client import Client
from .registry import DBOS, QUEUE, RUNNERS
from .workflow import launch, recover_dead


def worker_parser() -> argparse.ArgumentParser:
    worker = argparse.ArgumentParser(
        prog="loopwright worker", description="Run agents' runs from DBOS queues (pip install 'loopwright[dbos]')."
    )
    worker.add_argument("--db", required=True, help="DBOS system database: sqlite:///runs.sqlite or postgresql://...")
    worker.add_argument("--app", required=True, action="append", help="module that registers the agents (repeatable)")
    worker.add_argument("--queue", default=[], action="append", help=f"queue to listen to (default {QUEUE})")
    worker.add_argument("--concurrency", type=int, default=8, help="runs at once on this worker, per queue")
    worker.add_argument("--executor-id", default=None, help="a stable id: restarted, it recovers its own runs")
    worker.add_argument(
        "--lease",
        type=float,
        default=None,
        help="take over another host's runs not updated for this many seconds (default: never; this host's "
        "dead workers are always taken over)",
    )
    return worker


def _cancel_main(argv: Sequence[str]) -> int:
    """``loopwright worker cancel --db URL RUN_ID...``: :meth:`Client.cancel` each run."""
    import sys

    parser = argparse.ArgumentParser(prog="loopwright worker cancel", description="Cancel runs on DBOS.")
    parser.add_argument("--db", required=True, help="DBOS system database: sqlite:///runs.sqlite or postgresql://...")
    parser.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    args = parser.parse_args(argv)
    client = Client(args.db)
    try:
        for run_id in args.run_ids:
            try:
                asked = client.cancel(run_id)
            except ConfigurationError as exc:
                print(f"loopwright worker cancel: {exc}", file=sys.stderr)
                return 2
            print(f"{run_id}: {'cancelling' if asked else 'already ended'}")
    finally:
        client.close()
    return 0


def worker_main(argv: Sequence[str]) -> int:
    """``loopwright worker --db URL --app module``: serve until SIGTERM/SIGINT (``loopwright
    worker cancel --db URL RUN_ID``: cancel runs)."""
    import importlib
    import signal
    import sys

    if list(argv[:1]) == ["cancel"]:
        return _cancel_main(argv[1:])
    args = worker_parser().parse_args(argv)

    if args.concurrency < 1:
        print(f"loopwright worker: --concurrency must be 1 or more, got {args.concurrency}", file=sys.stderr)
        return 2
    for module in args.app:
        try:
            importlib.import_module(module)
        except Exception as exc:  # one line naming the cause (the module's own error included)
            print(f"loopwright worker: cannot import --app {module!r}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    if not RUNNERS:
        print("loopwright worker: the --app modules registered no agent (call dbos_runner.register)", file=sys.stderr)
        return 2
    queues = {name: args.concurrency for name in (args.queue or [QUEUE])}
    launch(args.db, queues=queues, executor_id=args.executor_id)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"loopwright worker {DBOS.executor_id}: agents {', '.join(sorted(RUNNERS))}; queues {queues}", flush=True)
    while not stop.wait(0.5):
        try:
            dead = recover_dead(args.lease)
        except Exception as exc:  # a failed look is retried on the next tick
            print(f"loopwright worker: recovering dead workers failed: {exc}", file=sys.stderr, flush=True)
            continue
        if dead:
            print(f"recovered the runs of {', '.join(dead)}", flush=True)
    DBOS.destroy(workflow_completion_timeout_sec=5)
    return 0
