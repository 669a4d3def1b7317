"""The ``loopwright`` command: ``demo``, ``diagram``, ``check``, ``run``, ``trace``.

The top floor: the one module that prints and picks exit codes (0 ok, 1 the work failed, 2 a
bad argument). What it runs returns values or raises (:mod:`loopwright.machines.verify`,
:mod:`loopwright.machines.diagram`, the runner).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..data.events import Event
from ..data.result import RunResult
from ..data.values import clean_text
from ..loop.runner import Runner

if TYPE_CHECKING:
    from ..table.machine import LoopMachine
    from .live import EventLines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a clear message and a hint, exit 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nRun `{self.prog} --help` for the options.\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="loopwright", description="LLM agent loops as explicit, verifiable state machines.")
    parser.add_argument("--version", action="version", version=f"loopwright {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="run the bundled demo agent (no API key, no network)")
    demo.add_argument("--json", action="store_true", help="print the run's events as JSON lines")
    demo.add_argument(
        "--model",
        help="run on a real model: openai:MODEL, anthropic:MODEL, gemini:MODEL or a bare Claude id (needs its API key)",
    )
    demo.add_argument(
        "--base-url", default=None, help="an OpenAI-compatible server for --model openai:... (Chat Completions)"
    )
    demo.add_argument(
        "--delay",
        type=_positive_float,
        default=None,
        help="seconds each demo tool takes (default: 0.4 on a terminal, 0 otherwise)",
    )
    demo.add_argument(  # (clean_text: bytes the locale cannot decode arrive as lone surrogates, now U+FFFD)
        "--input", default=None, type=clean_text, help="the user's message (default: the demo's question)"
    )
    for option, what in (
        ("plan-react", "Plan-ReAct: plan, act, reason and answer under tags; only the answer is shown"),
        ("planner", "a structured plan, written first and updated after each act (plan_updated events)"),
        ("observer", "an observer that looks at the run every 2 passes (observed events)"),
        ("output-type", "a structured answer: RunResult.output is a validated TripAnswer"),
    ):
        demo.add_argument(f"--{option}", action="store_true", help=f"the trip agent with {what}")
    demo.add_argument(
        "--example",
        choices=["trip", "helpdesk"],
        default="trip",
        help="trip: one agent with tools; helpdesk: a dispatcher handing over to billing and sales agents",
    )

    diagram = sub.add_parser("diagram", help="regenerate diagrams/, or draw a run's trace on the machine")
    diagram.add_argument("--out", default=None, help="folder to write the diagrams to (default: diagrams/)")
    diagram.add_argument("--trace", default=None, help="events.jsonl of a run (from `loopwright demo --json`)")
    diagram.add_argument("--format", dest="fmt", default=None, help="mermaid, dot, svg or png")
    diagram.add_argument("--agent", dest="target", default=None, help="module:attr of an Agent or LoopMachine")

    check = sub.add_parser("check", help="verify an agent's machine: every run ends, no state is stuck")
    check.add_argument("target", help="module:attr naming an Agent or LoopMachine, e.g. myapp.agents:support")
    from . import (
        eval_command,
        run_command,
        serve_command,
        trace_page,
    )  # `run`, `trace`, `eval` and `serve` register themselves

    run_command.add_command(sub)
    eval_command.add_command(sub)
    trace_page.add_command(sub)
    serve_command.add_command(sub)

    from .runs_cli import add_runs_parser

    add_runs_parser(sub)  # loopwright runs list|show|resume|diagram --store URL
    worker = "run agents' runs from DBOS queues; `worker cancel`: cancel runs (pip install 'loopwright[dbos]')"
    sub.add_parser("worker", help=worker, add_help=False)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopwright")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `loopwright demo --json | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from .temporal_command import temporal_main, wants_temporal

    if wants_temporal(argv):  # loopwright worker|run|trace --temporal HOST:PORT ... (loopwright.integrations.temporal)
        _import_from_cwd()
        return temporal_main(argv)
    if argv[:1] == ["worker"]:  # loopwright worker --db URL --app module: its own parser (loopwright.integrations.dbos)
        _import_from_cwd()  # --app modules are found in the current folder, as `run` and `check` find theirs
        return _worker(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command in ("check", "diagram", "run", "trace", "runs", "serve", "eval"):
        _import_from_cwd()
    if getattr(args, "handler", None) is not None:  # a command its own module registered
        return int(args.handler(args))
    if args.command == "demo":
        return _demo(args)
    if args.command == "diagram":
        return _diagram(out_dir=args.out, trace=args.trace, fmt=args.fmt, target=args.target)
    if args.command == "runs":
        from .runs_cli import runs_main

        return runs_main(args)
    return _check(args.target)


def _import_from_cwd() -> None:
    """``module:attr`` targets are found in the current folder, as ``python -m``, pytest and
    uvicorn find them (a console script's ``sys.path`` starts at its own folder instead)."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def _in_this_project() -> bool:
    """The current folder is loopwright's own checkout (where ``diagrams/`` is regenerated)."""
    try:
        return 'name = "loopwright"' in Path("pyproject.toml").read_text()
    except OSError:
        return False


def _worker(argv: list[str]) -> int:
    try:
        from ..integrations.dbos.runner import worker_main
    except ImportError as exc:
        print(f"loopwright worker: {exc}", file=sys.stderr)
        return 2
    return worker_main(argv)


def _check(target: str) -> int:
    """``loopwright check module:attr``: print the verification report of the Agent's machine
    (or the LoopMachine) named by ``target``. Returns 0 when it holds every rule, 1 on any
    violation (or when the machine cannot even be built: its MachineError is printed), 2 when
    ``target`` names nothing usable (the message says why)."""
    from ..data.errors import MachineError
    from ..machines.verify import load_target, verify

    try:
        obj = load_target(target)
    except LookupError as exc:
        print(f"loopwright check: {exc.args[0]}", file=sys.stderr)
        return 2
    except MachineError as exc:
        print(f"loopwright check: {target}: the machine cannot be built: {exc}", file=sys.stderr)
        return 1
    report = verify(obj)
    print(report)
    return 0 if report.ok else 1


def _diagram(out_dir: str | None, trace: str | None, fmt: str | None, target: str | None) -> int:
    """``loopwright diagram [--out DIR] [--trace FILE] [--format FMT] [--agent module:attr]``.

    - No ``trace`` and no ``target``: regenerate the built-in variants' diagrams into ``out_dir``
      (default ``diagrams/``): ``NAME.md`` always and ``NAME.svg`` when Graphviz is installed (a
      note says when it is not); ``fmt`` writes only that format.
    - ``target`` and/or ``trace``: draw that machine (``target`` names an Agent or LoopMachine;
      without it, the built-in variant the trace ran on) in ``fmt`` (default mermaid), with the
      run's ``trace`` (a JSON-lines events file, ``-`` for standard input) overlaid, to standard
      output, or into ``out_dir`` as ``NAME.md`` / ``NAME-trace.md`` (or ``.svg`` ...).

    Returns 0 on success, 1 when the drawing cannot be made (e.g. Graphviz missing), 2 for a
    bad format, target or trace file (the message says which).
    """
    from ..data.errors import ConfigurationError
    from ..machines.diagram import FORMATS, load_trace, machine_for_target

    if fmt is not None and fmt not in FORMATS:
        print(f"loopwright diagram: unknown format {fmt!r}; use one of {', '.join(FORMATS)}", file=sys.stderr)
        return 2
    try:
        machine = machine_for_target(target)
        events = load_trace(trace) if trace is not None else None
    except (LookupError, ConfigurationError) as exc:
        print(f"loopwright diagram: {exc.args[0]}", file=sys.stderr)
        return 2
    if machine is None and events is None and out_dir is None and not _in_this_project():
        print(
            "loopwright diagram: with no --agent or --trace, it regenerates the built-in machines' diagrams, and "
            "writes them into ./diagrams/ only inside loopwright's own project; pass --out DIR to write them "
            "elsewhere, or --agent module:attr to draw your agent's machine to standard output",
            file=sys.stderr,
        )
        return 2
    try:
        if machine is None and events is None:
            _regenerate(out_dir, fmt)
        else:
            _draw(machine, events, out_dir, fmt or "mermaid")
    except ConfigurationError as exc:
        print(f"loopwright diagram: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


def _regenerate(out_dir: str | None, fmt: str | None) -> None:
    """Write the built-in variants' diagrams: ``fmt`` only, or mermaid and (with Graphviz) SVG."""
    from ..machines.diagram import DIAGRAMS_DIR, Format, dot_available, write_diagrams

    formats: list[Format] = [cast("Format", fmt)] if fmt is not None else ["mermaid"]
    if fmt is None and dot_available():
        formats.append("svg")
    for path in write_diagrams(out_dir or DIAGRAMS_DIR, formats=formats):
        print(f"wrote {path}")
    if fmt is None and "svg" not in formats:
        print("skipped the SVGs: Graphviz is not installed (pip install graphviz; apt-get install graphviz)")


def _draw(machine: LoopMachine | None, events: list[Event] | None, out_dir: str | None, fmt: str) -> None:
    """Draw one machine (None: the built-in variant the trace ran on), with the trace overlaid,
    to standard output or into ``out_dir``."""
    from ..machines.diagram import diagram, machine_of_trace, write_diagram

    machine = machine or machine_of_trace(events or [])
    if out_dir is not None:
        print(f"wrote {write_diagram(machine, out_dir, fmt, trace=events)}")
        return
    data = diagram(machine, fmt, trace=events)
    if isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)


def spec_model(spec: str, base_url: str | None, where: str) -> Any:
    """The model ``--model spec`` names, or None after a one-line error on standard error."""
    from ..data.errors import ConfigurationError
    from ..models.spec import model_with_key

    try:
        return model_with_key(spec, base_url)
    except ConfigurationError as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return None


def _demo(args: argparse.Namespace) -> int:
    from ..demo import DEMO_INPUT, DEMO_OPTIONS, HELPDESK_INPUT, demo_agent, helpdesk_agent
    from .live import EventLines

    live = not args.json and sys.stdout.isatty()
    delay = args.delay if args.delay is not None else (0.4 if live else 0.0)
    model = None
    if args.model:
        model = spec_model(args.model, args.base_url, "loopwright demo --model")
        if model is None:
            return 2
    elif args.base_url:
        print("loopwright demo: --base-url goes with --model openai:MODEL", file=sys.stderr)
        return 2
    if args.example == "helpdesk":
        if model is not None:
            print("--model runs the trip example; the helpdesk example is scripted only.", file=sys.stderr)
            return 2
        runner, text = Runner(helpdesk_agent(delay)), args.input or HELPDESK_INPUT
    else:
        options = [o for o in DEMO_OPTIONS if getattr(args, o.replace("-", "_"))]
        if "plan-react" in options and "planner" in options:
            print("an agent has one planner: choose --plan-react or --planner", file=sys.stderr)
            return 2
        runner, text = Runner(demo_agent(model, delay_s=delay, options=options)), args.input or DEMO_INPUT
    if args.input is not None and model is None:
        print(
            "loopwright demo: note: the demo's scripted model does not read --input; it gives its canned replies "
            "(to its own question). Add --model PROVIDER:MODEL to have a real model answer your input.",
            file=sys.stderr,
        )
    if args.json:
        lines = EventLines(sys.stdout)
        result = asyncio.run(_print_json(runner, text, lines))
        if lines.broken:
            print(
                f"loopwright demo: writing the events failed ({lines.why()}); the run went on: {result.outcome}",
                file=sys.stderr,
            )
            return 1
    else:
        from .live import run_live

        result = asyncio.run(run_live(runner, text, live=live))
    return 0 if result.outcome in ("final", "salvaged") else 1


async def _print_json(runner: Runner, text: str, lines: EventLines) -> RunResult:
    stream = runner.stream(text)
    event: Event
    async for event in stream:
        lines.write(event)
    return stream.result


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
