"""Adapter + engine overhead against the bare SDK: a K=10 tool loop (ten replies with a tool call,
then a text answer) through ``OpenAIModel`` (Responses and Chat) and ``AnthropicModel``, each
against its fake server over real HTTP (tests/fake_openai.py, tests/fake_claude.py), beside the
same HTTP calls made with the SDK alone in the same process (a hand loop: call, read the tool
calls, run the tool, append the results). The two loops alternate run by run in one event loop;
the figure is the ratio of median wall times (target: at most 1.15). ``*_raw`` rows: the bare loop
sending its body as ``extra_body`` as OpenAIModel does (skipping the SDK's walk of typed
arguments), which isolates the engine's and the adapter's own cost.

    .venv/bin/python bench/bench_adapters.py [--repeats 30] [--k 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anthropic
import openai
from tests import fake_claude as fc
from tests import fake_openai as fo

from loopwright import Agent, AnthropicModel, Limits, Runner, tool
from loopwright.models.openai import OpenAIModel

fc._Handler.disable_nagle_algorithm = True  # as fake_openai's: no 40 ms delayed-ACK stall per reply (this process only)
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def lookup_impl(q: str) -> str:
    return f"found {q}"


@tool
async def lookup(q: str) -> str:
    """Look something up (async: run inline, as the bare loops call it; a sync tool would run in a thread)."""
    return lookup_impl(q)


def agent(model: Any) -> Agent:
    return Agent(name="bench", model=model, tools=[lookup], limits=Limits(max_iterations=100, max_model_retries=0))


# ---------------------------------------------------------------- the bare SDK loops


async def bare_responses(client: openai.AsyncOpenAI, prompt: str, raw: bool = False) -> str:
    tools = [{"type": "function", "name": "lookup", "description": "Look something up.", "parameters": SCHEMA}]
    items: list[Any] = [{"role": "user", "content": prompt}]
    while True:
        if raw:  # the body as extra_body, as OpenAIModel sends it: no SDK walk of the typed arguments
            body = {"input": items, "tools": tools, "store": False}
            reply = await client.responses.create(model="gpt-5.5", extra_body=body)
        else:
            reply = await client.responses.create(model="gpt-5.5", input=items, tools=tools, store=False)  # type: ignore[arg-type]
        calls = [o for o in reply.output if o.type == "function_call"]
        if not calls:
            return reply.output_text
        items += [
            {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in calls
        ]
        items += [
            {"type": "function_call_output", "call_id": c.call_id, "output": lookup_impl(**json.loads(c.arguments))}
            for c in calls
        ]


async def bare_chat(client: openai.AsyncOpenAI, prompt: str, raw: bool = False) -> str:
    tools = [
        {"type": "function", "function": {"name": "lookup", "description": "Look something up.", "parameters": SCHEMA}}
    ]
    messages: list[Any] = [{"role": "user", "content": prompt}]
    while True:
        if raw:
            body = {"messages": messages, "tools": tools}
            reply = await client.chat.completions.create(model="gpt-5.5", messages=(), extra_body=body)
        else:
            reply = await client.chat.completions.create(model="gpt-5.5", messages=messages, tools=tools)  # type: ignore[arg-type]
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.to_dict())
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": lookup_impl(**args)})


async def bare_claude(client: anthropic.AsyncAnthropic, prompt: str) -> str:
    tools = [{"name": "lookup", "description": "Look something up.", "input_schema": SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": prompt}]
    while True:  # AnthropicModel streams every call: so does this loop
        async with client.messages.stream(model="claude-test", max_tokens=1024, messages=messages, tools=tools) as s:  # type: ignore[arg-type]
            reply = await s.get_final_message()
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": lookup_impl(**b.input)}  # type: ignore[arg-type]
                    for b in calls
                ],
            }
        )


# ---------------------------------------------------------------- timing


def openai_script(k: int) -> list[Any]:
    return [fo.response(fo.function_call(f"call_{n}", "lookup", {"q": f"q{n}"})) for n in range(k)] + [
        fo.response(fo.text("done"))
    ]


def claude_script(k: int) -> list[Any]:
    return [
        fc.message(fc.tool_use(f"toolu_{n}", "lookup", {"q": f"q{n}"}), stop_reason="tool_use") for n in range(k)
    ] + [fc.message(fc.text("done"))]


async def race(
    script: Callable[[], list[Any]],
    fake: Any,
    engine: Callable[[], Awaitable[Any]],
    bare: Callable[[], Awaitable[Any]],
    repeats: int,
) -> dict[str, float]:
    times: dict[str, list[float]] = {"engine": [], "bare": []}
    for n in range(repeats + 2):  # two warm-up rounds
        order = [("engine", engine), ("bare", bare)]
        if n % 2:
            order.reverse()
        for name, go in order:
            fake.script[:] = script()
            started = time.perf_counter()
            await go()
            took = time.perf_counter() - started
            if n >= 2:
                times[name].append(took)
    engine_ms, bare_ms = statistics.median(times["engine"]) * 1e3, statistics.median(times["bare"]) * 1e3
    return {"engine_ms": round(engine_ms, 2), "bare_ms": round(bare_ms, 2), "ratio": round(engine_ms / bare_ms, 3)}


async def main(repeats: int, k: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"k": k, "repeats": repeats, "python": sys.version.split()[0]}
    with fo.FakeOpenAI() as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        for api, bare in (("responses", bare_responses), ("chat", bare_chat)):
            runner = Runner(agent(OpenAIModel("gpt-5.5", api=api, client=client)))  # type: ignore[arg-type]

            async def engine(r: Runner = runner) -> Any:
                result = await r.run("go")
                assert result.outcome == "final" and result.iterations == k + 1, result.error
                return result

            figures[f"openai_{api}"] = await race(
                lambda: openai_script(k), fake, engine, lambda b=bare: b(client, "go"), repeats
            )
            figures[f"openai_{api}_raw"] = await race(
                lambda: openai_script(k), fake, engine, lambda b=bare: b(client, "go", raw=True), repeats
            )
        await client.close()
    with fc.FakeClaude() as claude:
        aclient = anthropic.AsyncAnthropic(base_url=claude.base_url, api_key="k", max_retries=0)
        runner = Runner(agent(AnthropicModel("claude-test", max_tokens=1024, client=aclient, cache=None)))

        async def claude_engine() -> Any:
            result = await runner.run("go")
            assert result.outcome == "final", result.error
            return result

        figures["anthropic"] = await race(
            lambda: claude_script(k), claude, claude_engine, lambda: bare_claude(aclient, "go"), repeats
        )
        await aclient.close()
    figures["target_met"] = all(
        figures[name]["ratio"] <= 1.15 for name in ("openai_responses", "openai_chat", "anthropic")
    )
    # *_raw: the bare loop sending its body as extra_body too (the SDK's argument walk skipped, as
    # OpenAIModel does): the engine's and the adapter's own cost alone, reported beside the target
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result = asyncio.run(main(args.repeats, args.k))
    for name in ("openai_responses", "openai_responses_raw", "openai_chat", "openai_chat_raw", "anthropic"):
        f = result[name]
        print(
            f"{name:21} loopwright {f['engine_ms']:8.2f} ms   bare SDK {f['bare_ms']:8.2f} ms   ratio {f['ratio']:.3f}"
        )
    met = "met" if result["target_met"] else "NOT met"
    print(f"K={result['k']}, {result['repeats']} runs each, medians; target ratio <= 1.15: {met}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
