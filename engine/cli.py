"""The ``loopwright`` command: ``demo``, ``diagram``, ``check``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

from .events import Event
from .result import RunResult
from .runner import Runner


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
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="run the bundled demo agent (no API key, no network)")
    demo.add_argument("--json", action="store_true", help="print the run's events as JSON lines")
    demo.add_argument("--model", help="run on Claude with this model id (needs ANTHROPIC_API_KEY)")
    demo.add_argument(
        "--delay",
        type=_positive_float,
        default=None,
        help="seconds each demo tool takes (default: 0.4 on a terminal, 0 otherwise)",
    )
    demo.add_argument("--input", default=None, help="the user's message (default: the demo's question)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `loopwright demo --json | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    if args.command == "diagram":
        from .diagram import cli_diagram

        return int(cli_diagram(out_dir=args.out, trace=args.trace, fmt=args.fmt, target=args.target))
    from .verify import cli_check

    return int(cli_check(args.target))


def _demo(args: argparse.Namespace) -> int:
    from .demo import DEMO_INPUT, HELPDESK_INPUT, demo_agent, helpdesk_agent

    live = not args.json and sys.stdout.isatty()
    delay = args.delay if args.delay is not None else (0.4 if live else 0.0)
    model = None
    if args.model:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print(
                "loopwright demo --model needs an Anthropic API key: set ANTHROPIC_API_KEY "
                "(and ANTHROPIC_BASE_URL for a proxy), or drop --model to run on the scripted model.",
                file=sys.stderr,
            )
            return 2
        from .models.anthropic_model import AnthropicModel

        model = AnthropicModel(model=args.model, max_tokens=1024)
    if args.example == "helpdesk":
        if model is not None:
            print("--model runs the trip example; the helpdesk example is scripted only.", file=sys.stderr)
            return 2
        runner, text = Runner(helpdesk_agent(delay)), args.input or HELPDESK_INPUT
    else:
        runner, text = Runner(demo_agent(model, delay_s=delay)), args.input or DEMO_INPUT
    if args.json:
        result = asyncio.run(_print_json(runner, text))
    else:
        from .live import run_live

        result = asyncio.run(run_live(runner, text, live=live))
    return 0 if result.outcome in ("final", "salvaged") else 1


async def _print_json(runner: Runner, text: str) -> RunResult:
    stream = runner.stream(text)
    out = sys.stdout
    event: Event
    async for event in stream:
        out.write(event.model_dump_json() + "\n")
    out.flush()
    return stream.result


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
