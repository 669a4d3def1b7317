"""loopwright against a minimal hand-written asyncio loop doing the same work.

(a) engine overhead per loop iteration: a scripted model replies K times with one call of a
    no-op tool, then with text; K = 10 and 100. Microseconds per iteration (one model call,
    one tool call) for both loops, their ratio, and K=100 / K=10 (flat = no re-walk of history).
(b) 10,000 concurrent runs in one event loop, K = 5, the model awaits 50 ms per call: wall
    time of both and their ratio, and resident memory per run (peak RSS growth / runs). Each
    (b) measurement runs in a fresh child process of this script, so memory one phase freed
    cannot hide another's growth.

Usage:  python bench/bench_loop.py            (all; about a minute on 2 cores)
        python bench/bench_loop.py --quick    (fewer repeats, 2,000 runs for (b))
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, tool


# ---------------------------------------------------------------- the hand-written loop
async def hand_loop(model: Any, tools: dict[str, Any], text: str) -> str:
    history: list[dict[str, Any]] = [{"role": "user", "text": text}]
    while True:
        reply = await model(history)
        history.append(reply)
        calls = reply.get("tool_calls")
        if not calls:
            return str(reply["text"])
        results = await asyncio.gather(*(tools[c["name"]](**c["args"]) for c in calls))
        history.append(
            {"role": "user", "results": [{"id": c["id"], "content": r} for c, r in zip(calls, results, strict=True)]}
        )


async def noop_fn(i: int) -> int:
    return i


def hand_script(k: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"role": "assistant", "tool_calls": [{"id": f"c{i}", "name": "noop", "args": {"i": i}}]} for i in range(k)
    ]
    return [*replies, {"role": "assistant", "text": "done"}]


def hand_model(script: list[dict[str, Any]], delay_s: float = 0.0) -> Any:
    """Stateless: the reply is chosen by the history's length, so one model serves every run."""

    async def model(history: list[dict[str, Any]]) -> dict[str, Any]:
        if delay_s:
            await asyncio.sleep(delay_s)
        return script[len(history) // 2]

    return model


# ---------------------------------------------------------------- the same work on loopwright
@tool
async def noop(i: int) -> int:
    """Does nothing."""
    return i


def lw_script(k: int) -> list[ModelResponse]:
    replies = [ModelResponse(parts=(ToolCall(name="noop", args={"i": i}),), stop_reason="tool_use") for i in range(k)]
    return [*replies, ModelResponse(parts=(TextPart(text="done"),), stop_reason="end_turn")]


class ByHistoryModel:
    """Stateless like the hand loop's: the reply is chosen by the history's length."""

    def __init__(self, script: list[ModelResponse], delay_s: float) -> None:
        self.script = script
        self.delay_s = delay_s

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.script[len(request.messages) // 2]


def lw_agent(k: int, delay_s: float = 0.0) -> Agent:
    model = ByHistoryModel(lw_script(k), delay_s) if delay_s else ScriptedModel(lw_script(k))
    return Agent(name="bench", model=model, tools=[noop], limits=Limits(max_iterations=k + 1))


# ---------------------------------------------------------------- (a) overhead per iteration
async def overhead(k: int, repeats: int) -> dict[str, float]:
    hand: list[float] = []
    lw: list[float] = []
    tools = {"noop": noop_fn}
    for _ in range(repeats):
        model = hand_model(hand_script(k))
        started = time.perf_counter()
        await hand_loop(model, tools, "go")
        hand.append((time.perf_counter() - started) / (k + 1))
        runner = Runner(lw_agent(k))
        started = time.perf_counter()
        result = await runner.run("go")
        lw.append((time.perf_counter() - started) / (k + 1))
        assert result.outcome == "final" and result.iterations == k + 1
    return {
        "hand_us": statistics.median(hand) * 1e6,
        "loopwright_us": statistics.median(lw) * 1e6,
        "hand_best_us": min(hand) * 1e6,
        "loopwright_best_us": min(lw) * 1e6,
    }


# ---------------------------------------------------------------- (b) concurrency and memory
def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def concurrent(which: str, runs: int, k: int, delay_s: float) -> dict[str, float]:
    gc.collect()
    baseline = rss_kib()
    peak = baseline
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kib())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    if which == "hand":
        tools = {"noop": noop_fn}
        model = hand_model(hand_script(k), delay_s)
        outs: list[Any] = await asyncio.gather(*(hand_loop(model, tools, "go") for _ in range(runs)))
        assert all(o == "done" for o in outs)
    else:
        runner = Runner(lw_agent(k, delay_s))  # one agent, one runner, one machine for every run
        outs = await asyncio.gather(*(runner.run("go") for _ in range(runs)))
        assert all(o.outcome == "final" and o.iterations == k + 1 for o in outs)
    wall = time.perf_counter() - started
    peak = max(peak, rss_kib())
    done.set()
    await sampler
    return {"wall_s": wall, "kib_per_run": (peak - baseline) / runs}


def child(which: str, runs: int, k: int, delay_s: float) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", which, str(runs), str(k), str(delay_s)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        which, runs, k, delay = args.child
        print(json.dumps(asyncio.run(concurrent(which, int(runs), int(k), float(delay)))))
        return

    repeats = 30 if args.quick else 200
    runs = 2_000 if args.quick else 10_000
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"(a) engine overhead per iteration: median of {repeats} runs (best run), the two loops interleaved")
    results = {}
    for k in (10, 100):
        asyncio.run(overhead(k, 5))  # warm-up
        r = results[k] = asyncio.run(overhead(k, repeats))
        print(
            f"  K={k:<4} hand {r['hand_us']:6.1f} ({r['hand_best_us']:5.1f}) us   "
            f"loopwright {r['loopwright_us']:6.1f} ({r['loopwright_best_us']:5.1f}) us   "
            f"ratio {r['loopwright_us'] / r['hand_us']:4.1f}x ({r['loopwright_best_us'] / r['hand_best_us']:3.1f}x)"
        )
    flat = results[100]["loopwright_best_us"] / results[10]["loopwright_best_us"]
    print(f"  loopwright K=100 / K=10 (best runs): {flat:.2f}x (flat in history length when close to 1)")

    print(f"(b) {runs:,} concurrent runs, K=5, model awaits 50 ms per call (each in a fresh process)")
    hand = child("hand", runs, 5, 0.05)
    lw = child("loopwright", runs, 5, 0.05)
    print(f"  hand        wall {hand['wall_s']:6.2f} s   {hand['kib_per_run']:6.1f} KiB/run")
    print(f"  loopwright  wall {lw['wall_s']:6.2f} s   {lw['kib_per_run']:6.1f} KiB/run")
    print(f"  wall ratio {lw['wall_s'] / hand['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
