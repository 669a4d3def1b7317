"""``loopwright eval``: run an eval set, record cases from stored runs, compare two reports.

- ``loopwright eval run module:agent set.yaml [--repeats N] [--concurrency M] [--judge
  module:attr] [--json] [-o report.html] [--save report.json] [--no-replay]``: runs the set
  (:func:`loopwright.eval.evaluate`) and prints a table of the cases (``--json``: the report as
  JSON); ``-o`` writes the HTML report, with each run's trace page beside it
  (``report-runs/RUN_ID.html``). Exit 0 when the set's threshold is reached, 1 when it is
  missed, 2 for bad input (a set that does not validate: one line per problem).
- ``loopwright eval record --store URL RUN_ID... -o set.yaml``: stored runs become cases (their
  input, their trajectory and answer as the expected ones, their model replies to replay).
- ``loopwright eval compare a.json b.json``: which cases got better or worse from report a to
  report b (saved with ``--save``). Exit 1 when any got worse.
- ``loopwright eval schema``: the JSON schema of a set file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ..data.errors import ConfigurationError


def add_command(sub: Any) -> None:
    """Register ``loopwright eval`` on the CLI's subparsers."""
    command = sub.add_parser("eval", help="evaluate an agent on a set of cases; record cases; compare reports")
    verbs = command.add_subparsers(dest="eval_verb", required=True, parser_class=type(command))
    run = verbs.add_parser("run", help="run an eval set on an agent")
    run.add_argument("target", help="module:attr naming the Agent (or a function making it)")
    run.add_argument("set", help="the eval set: a .yaml or .json file")
    run.add_argument("--repeats", type=_at_least_one, default=1, help="runs of each case (default 1)")
    run.add_argument("--concurrency", type=_at_least_one, default=4, help="runs at once (default 4)")
    run.add_argument("--judge", default=None, metavar="MODULE:ATTR", help="the Model of judges that name none")
    run.add_argument("--json", action="store_true", help="print the report as JSON")
    run.add_argument("-o", "--output", default=None, help="write the HTML report here (trace pages beside it)")
    run.add_argument("--save", default=None, metavar="REPORT.json", help="save the report as JSON (for compare)")
    run.add_argument("--no-replay", action="store_true", help="recorded cases run on the agent's own model")
    record = verbs.add_parser("record", help="turn stored runs into eval cases")
    record.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="runs of the store")
    record.add_argument("--store", required=True, metavar="URL", help="the run store (sqlite:///runs.db, ...)")
    record.add_argument("-o", "--output", required=True, help="the set file to write (.yaml or .json)")
    record.add_argument("--name", default="recorded", help="the set's name")
    compare = verbs.add_parser("compare", help="compare two saved reports case by case")
    compare.add_argument("before", help="report a (JSON, from eval run --save)")
    compare.add_argument("after", help="report b")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    verbs.add_parser("schema", help="print the JSON schema of an eval set file")
    command.set_defaults(handler=eval_main)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def eval_main(args: argparse.Namespace) -> int:
    verb = args.eval_verb
    try:
        if verb == "run":
            return _run(args)
        if verb == "record":
            return _record(args)
        if verb == "compare":
            return _compare(args)
        from ..eval import eval_set_schema

        print(json.dumps(eval_set_schema(), indent=2))
        return 0
    except (ConfigurationError, LookupError, OSError) as exc:
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        for line in message.splitlines():
            print(f"loopwright eval {verb}: {line}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from ..eval import EvalSet, evaluate
    from ..eval.base import resolve
    from ..machines.verify import load_target
    from ..runtime.agent import Agent

    eval_set = EvalSet.load(args.set)
    agent = load_target(args.target)
    if not isinstance(agent, Agent):
        raise LookupError(f"{args.target} is a LoopMachine; an eval needs the Agent (its model and tools)")
    judge = resolve(args.judge) if args.judge else None
    report = asyncio.run(
        evaluate(
            agent,
            eval_set,
            repeats=args.repeats,
            concurrency=args.concurrency,
            judge=judge,
            replay=not args.no_replay,
            progress=None if not args.json else False,
        )
    )
    try:
        _write(report, args, agent)
    except BrokenPipeError:  # `... --json | head`: the reader left; not an error (loopwright's main says so)
        raise
    except (ValueError, OSError) as exc:  # (a value JSON cannot hold, an encoding that cannot hold the text)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        print(f"loopwright eval run: writing the report failed ({detail})", file=sys.stderr)
        return 1
    return 0 if report.passed else 1


def _write(report: Any, args: argparse.Namespace, agent: Any) -> None:
    """The report where it was asked for: ``--save``, ``-o``, and standard output."""
    if args.save:
        report.save(args.save)
    if args.output:
        _write_html(report, Path(args.output), agent)
    if args.json:
        sys.stdout.write(report.model_dump_json() + "\n")
    else:
        print(report.summary())
        if args.output:
            print(f"wrote {args.output}")
    sys.stdout.flush()


def _write_html(report: Any, path: Path, agent: Any) -> None:
    """The HTML report and, beside it in ``NAME-runs/``, each run's trace page."""
    from ..eval.html import write_report_html
    from .trace_page import write_trace_page

    folder = path.with_name(f"{path.stem}-runs")
    links: dict[str, str] = {}
    for case in report.cases:
        for run in case.runs:
            for run_id in run.run_ids:
                events = [e for e in run.events if e.run_id == run_id]
                if events:
                    write_trace_page(events, folder / f"{run_id}.html", machine=agent)
                    links[run_id] = f"{folder.name}/{run_id}.html"
    write_report_html(report, path, links)


def _record(args: argparse.Namespace) -> int:
    from ..data.events import EVENT_ADAPTER
    from ..eval import EvalSet, ResponseCheck, TrajectoryCheck, case_from_events
    from .runs_cli import open_cli_store

    async def read() -> list[list[bytes]]:
        store = await open_cli_store(args.store, read_only=True)
        try:
            return [await store.events(run_id) for run_id in args.run_ids]
        finally:
            await store.close()

    cases = []
    for run_id, raw in zip(args.run_ids, asyncio.run(read()), strict=True):
        if not raw:
            raise LookupError(
                f"no events of run {run_id!r} in {args.store}; `loopwright runs list --store URL` lists them"
            )
        cases.append(case_from_events([EVENT_ADAPTER.validate_json(line) for line in raw]))
    recorded = EvalSet(
        name=args.name,
        description=f"recorded from {args.store}",
        cases=cases,
        evaluators=[TrajectoryCheck(match="exact"), ResponseCheck(match="exact")],
    )
    path = recorded.save(args.output)
    print(f"wrote {path}: {len(cases)} case{'s' if len(cases) != 1 else ''} ({', '.join(c.name for c in cases)})")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ..eval import EvalReport
    from ..eval.compare import compare

    try:
        before, after = EvalReport.load(args.before), EvalReport.load(args.after)
    except ValidationError as exc:
        raise ConfigurationError(
            f"not an eval report (save one with `eval run --save`): {exc.errors()[0]['msg']}"
        ) from None
    found = compare(before, after)
    if args.json:
        sys.stdout.write(json.dumps([row._asdict() for row in found], indent=1) + "\n")
    else:
        print(f"{args.before} -> {args.after}")
        for row in found:
            print(f"  {row.change:<7} {row.case}: {row.detail}")
    return 1 if any(row.change == "worse" for row in found) else 0


__all__ = ["add_command", "eval_main"]
