"""A K=10 tool loop on Gemini, through GeminiModel and the engine, beside the same HTTP calls made
with the bare google-genai SDK in the same process (issue 26's target: adapter + engine <= 1.15x
the bare SDK loop's wall time).

Both loops talk to the same fake Gemini server (tests/fake_gemini.py, a real HTTP server on
127.0.0.1 in a thread of this process) and send the same requests: K replies with one function
call each, then a final text; the tool returns a short string. Runs alternate (order swapped every
round) inside one event loop, so both reuse one HTTP client; the figures are the median and best
wall time per run and the ratio of medians, and the process CPU time per run (less moved by a
loaded machine than wall time).

    .venv/bin/python bench/bench_gemini.py                 # 40 rounds
    .venv/bin/python bench/bench_gemini.py --rounds 100 --k 10 --json gemini.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from google import genai
from google.genai import types as genai_types
from tests.fake_gemini import MODEL, FakeGemini, call, reply, text

from loopwright import Agent, Limits, Runner, tool
from loopwright.models.gemini import GeminiModel

SYSTEM = "You look things up, one key at a time."


@tool
def lookup(key: str) -> str:
    """The value stored under a key."""
    return f"value of {key}"


def script(fake: FakeGemini, k: int) -> None:
    fake.script += [reply(call("lookup", {"key": f"k{i}"}, id_=f"fc_{i}")) for i in range(k)]
    fake.script.append(reply(text("All looked up.")))


async def bare_loop(client: Any, k: int) -> str:
    """The same calls with the SDK alone: send, run the function calls, answer them, repeat."""
    declaration = {
        "name": "lookup",
        "description": "The value stored under a key.",
        "parameters_json_schema": lookup.spec.input_schema,
    }
    config = {
        "system_instruction": SYSTEM,
        "tools": [{"function_declarations": [declaration]}],
        "automatic_function_calling": {"disable": True},
        "http_options": {"retry_options": {"attempts": 1}},
    }
    contents: list[Any] = [{"role": "user", "parts": [{"text": "Look up k0 to k9."}]}]
    for _ in range(k + 1):
        response = await client.models.generate_content(model=MODEL, contents=contents, config=config)
        content = response.candidates[0].content
        contents.append(content)
        calls = [p.function_call for p in content.parts if p.function_call]
        if not calls:
            return str(response.text)
        answers = [
            {"function_response": {"id": c.id, "name": c.name, "response": {"result": lookup.fn(**c.args)}}}
            for c in calls
        ]
        contents.append({"role": "user", "parts": answers})
    raise AssertionError("the loop did not end")


async def measure(rounds: int, k: int) -> dict[str, Any]:
    with FakeGemini() as fake:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = GeminiModel(MODEL, api_key="bench", base_url=fake.base_url)
        agent = Agent(
            name="bench", model=model, static_instruction=SYSTEM, tools=[lookup], limits=Limits(max_iterations=k + 5)
        )
        runner = Runner(agent)
        http = genai_types.HttpOptions(base_url=fake.base_url, retry_options=genai_types.HttpRetryOptions(attempts=1))
        client = genai.Client(api_key="bench", http_options=http).aio

        async def engine_run() -> tuple[float, float]:
            script(fake, k)
            started, cpu = time.perf_counter(), time.process_time()
            result = await runner.run("Look up k0 to k9.")
            elapsed = time.perf_counter() - started, time.process_time() - cpu
            assert result.outcome == "final" and result.output == "All looked up.", result.error
            return elapsed

        async def bare_run() -> tuple[float, float]:
            script(fake, k)
            started, cpu = time.perf_counter(), time.process_time()
            output = await bare_loop(client, k)
            elapsed = time.perf_counter() - started, time.process_time() - cpu
            assert output == "All looked up."
            return elapsed

        for _ in range(3):  # warm-up: imports, connections, pydantic's deferred builds
            await engine_run()
            await bare_run()
        engine_both: list[tuple[float, float]] = []
        bare_both: list[tuple[float, float]] = []
        for n in range(rounds):
            if n % 2:
                engine_both.append(await engine_run())
                bare_both.append(await bare_run())
            else:
                bare_both.append(await bare_run())
                engine_both.append(await engine_run())
        assert len(fake.requests) == (2 * rounds + 6) * (k + 1)
        await model.aclose()
        await client.aclose()
    engine, bare = [w for w, _ in engine_both], [w for w, _ in bare_both]
    engine_cpu, bare_cpu = [c for _, c in engine_both], [c for _, c in bare_both]
    paired = statistics.median(e / b for e, b in zip(engine, bare, strict=True))
    result = {
        "k": k,
        "rounds": rounds,
        "engine_ms": {"median": statistics.median(engine) * 1e3, "best": min(engine) * 1e3},
        "bare_ms": {"median": statistics.median(bare) * 1e3, "best": min(bare) * 1e3},
        "ratio_of_medians": statistics.median(engine) / statistics.median(bare),
        "ratio_of_bests": min(engine) / min(bare),
        "median_paired_ratio": paired,
        "cpu_ms": {
            "engine_median": statistics.median(engine_cpu) * 1e3,
            "bare_median": statistics.median(bare_cpu) * 1e3,
        },
        "cpu_ratio_of_medians": statistics.median(engine_cpu) / statistics.median(bare_cpu),
    }
    result["target_met"] = result["ratio_of_medians"] <= 1.15
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(measure(args.rounds, args.k))
    e, b = result["engine_ms"], result["bare_ms"]
    print(f"K={args.k}, {args.rounds} rounds, python {sys.version.split()[0]}")
    print(f"  GeminiModel + engine: median {e['median']:.1f} ms, best {e['best']:.1f} ms")
    print(f"  bare google-genai:    median {b['median']:.1f} ms, best {b['best']:.1f} ms")
    print(
        f"  ratio of medians {result['ratio_of_medians']:.3f}, of bests {result['ratio_of_bests']:.3f}, "
        f"median paired {result['median_paired_ratio']:.3f} (target <= 1.15: "
        f"{'met' if result['target_met'] else 'NOT met'})"
    )
    c = result["cpu_ms"]
    print(
        f"  process CPU per run (this process, the fake server's thread included): GeminiModel + engine "
        f"{c['engine_median']:.1f} ms, bare {c['bare_median']:.1f} ms, ratio {result['cpu_ratio_of_medians']:.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
