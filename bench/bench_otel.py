"""What tracing costs per loop iteration: bench_loop.py's part (a) run (one model call, one tool
call per iteration, K = 10 and 100), under three settings (the first two interleaved run by run):

  off        no tracing installed
  no-provider  ``loopwright.integrations.otel.instrument()`` with no tracer provider set (the API's default):
             must cost nothing per iteration (the run gets no per-run observer, builds no event)
  sdk        ``instrument()`` on an SDK TracerProvider whose processor drops every span (the cost
             of building the spans themselves, for information); sdk-lean the same with
             ``transition_events=False``

Usage:  python bench/bench_otel.py [--repeats 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_loop
from loopwright.integrations.otel import Tracing
from loopwright.runtime.observers import INSTRUMENTS

SETTINGS = ("off", "no-provider", "sdk", "sdk-lean")


def _provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    return provider


async def one(setting: str, k: int, tracings: dict[str, Any]) -> float:
    """One run under ``setting``: its Tracing (made once, as ``instrument()`` makes it) is installed
    for every runner, as ``instrument()`` installs it."""
    tracing = tracings.get(setting)
    if tracing is not None:
        INSTRUMENTS.add(tracing)
    try:
        return await bench_loop.time_lw(k)
    finally:
        if tracing is not None:
            INSTRUMENTS.remove(tracing)


async def measure(k: int, repeats: int, tracings: dict[str, Any]) -> dict[str, dict[str, float]]:
    """off and no-provider interleaved run by run (order alternating); then sdk on its own, so
    its garbage does not land on the two that are compared."""
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for i in range(repeats):
        pair = ("off", "no-provider") if i % 2 == 0 else ("no-provider", "off")
        for setting in pair:
            times[setting].append(await one(setting, k, tracings))
    for setting in ("sdk", "sdk-lean"):
        for _ in range(repeats):
            times[setting].append(await one(setting, k, tracings))
    return {s: {"median_us": statistics.median(t) * 1e6, "best_us": min(t) * 1e6} for s, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args()
    provider = _provider()
    tracings = {
        "no-provider": Tracing(),
        "sdk": Tracing(tracer_provider=provider),
        "sdk-lean": Tracing(tracer_provider=provider, transition_events=False),
    }
    out: dict[str, Any] = {}
    print(f"us per iteration, {args.repeats} runs of each setting, interleaved: median (best)")
    for k in (10, 100):
        asyncio.run(measure(k, 5, tracings))  # warm-up
        r = out[f"K={k}"] = asyncio.run(measure(k, args.repeats, tracings))
        cells = "   ".join(f"{s} {r[s]['median_us']:6.1f} ({r[s]['best_us']:5.1f})" for s in SETTINGS)
        ratio = r["no-provider"]["median_us"] / r["off"]["median_us"]
        print(f"  K={k:<4} {cells}   no-provider / off: {ratio:4.3f}x")
        r["no_provider_over_off"] = {"median": ratio}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
