"""Reply construction per adapter (issue 38): the µs (and the Python frames, load-independent)
it takes each SDK adapter to turn one reply of its provider (one tool call, usage) into a
:class:`~loopwright.ModelResponse` — Anthropic from the SDK's ``Message``, OpenAI from the
Responses and the Chat Completions JSON, Gemini from the SDK's ``GenerateContentResponse`` — in
two builds, paired: fresh processes alternating A B, B A, ... (each the best of several timed
repeats of CPU time), the ratio B/A per pair and its median. Then, in one process, alternating,
the construction alone (one call, usage, the reply) as the adapters made it before (validated)
and as they make it now (:mod:`loopwright.models.from_wire`), which load cannot blur as much.

    python bench/bench_replies.py --tree /tmp/main-tree main      # a build of main (bench_paired's)
    python bench/bench_replies.py --a /tmp/main-tree --b .        # main's code against this tree
    python bench/bench_replies.py --child                        # one process's figures, as JSON
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ARGS = '{"a": 1, "b": 2}'
ANTHROPIC = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 1, "b": 2}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
}  # fmt: skip
RESPONSES = {
    "id": "resp_01", "object": "response", "model": "gpt-5.5", "status": "completed",
    "output": [{"type": "function_call", "id": "fc_01", "call_id": "call_01", "name": "add", "arguments": ARGS,
                "status": "completed"}],
    "usage": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17, "input_tokens_details": {"cached_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 0}},
}  # fmt: skip
CHAT = {
    "id": "chatcmpl-01", "object": "chat.completion", "model": "gpt-5.5",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "call_01", "type": "function",
                                 "function": {"name": "add", "arguments": ARGS}}]}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
              "prompt_tokens_details": {"cached_tokens": 0}},
}  # fmt: skip
GEMINI = {
    "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"id": "call_01", "name": "add",
                    "args": {"a": 1, "b": 2}}}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
    "modelVersion": "gemini-2.5-flash", "responseId": "resp_01",
}  # fmt: skip


def conversions() -> dict[str, Callable[[], Any]]:
    """Each adapter's conversion of one reply, as the adapter makes it (its SDK objects made once)."""
    import anthropic.types
    from google.genai import types as genai_types

    from loopwright.models.anthropic import to_response
    from loopwright.models.gemini import replies
    from loopwright.models.openai.chat import from_chat
    from loopwright.models.openai.responses import from_responses

    message = anthropic.types.Message.model_validate(ANTHROPIC)
    reply = genai_types.GenerateContentResponse.model_validate(GEMINI)

    def gemini() -> Any:  # (GeminiModel._read's body)
        candidate = reply.candidates[0]  # type: ignore[index]
        raw = (candidate.content.parts if candidate.content else None) or ()
        return replies.to_response(
            replies.read_parts(raw, "gemini-2.5-flash"),
            replies.finish_name(candidate.finish_reason),
            reply.usage_metadata,
            model=reply.model_version or "gemini-2.5-flash",
            response_id=reply.response_id,
            safety=candidate.safety_ratings,
            finish_message=candidate.finish_message,
        )

    return {
        "anthropic": lambda: to_response(message),
        "openai_responses": lambda: from_responses(RESPONSES),
        "openai_chat": lambda: from_chat(CHAT),
        "gemini": gemini,
    }


def frames(convert: Callable[[], Any]) -> int:
    """Python frames one conversion enters (``sys.setprofile``), the caller's lambda included."""
    counts: collections.Counter[str] = collections.Counter()

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            counts["py"] += 1

    sys.setprofile(prof)
    try:
        convert()
    finally:
        sys.setprofile(None)
    return counts["py"]


def child(number: int, repeats: int) -> dict[str, Any]:
    import loopwright

    out: dict[str, Any] = {"file": loopwright.__file__}
    for name, convert in conversions().items():
        reply = convert()
        assert reply.tool_calls and reply.tool_calls[0].args == {"a": 1, "b": 2}, (name, reply)
        for _ in range(200):
            convert()
        best = min(timeit.repeat(convert, number=number, repeat=repeats, timer=time.process_time)) / number
        out[name] = {"us": best * 1e6, "frames": frames(convert)}
    return out


def construction(number: int, repeats: int, rounds: int = 5) -> dict[str, float]:
    """µs (CPU) to build one tool call, its usage (Anthropic's seven counts) and the reply:
    validated (the adapters before) against :mod:`loopwright.models.from_wire`, alternating in one process."""
    from loopwright import ModelResponse, ToolCall, Usage
    from loopwright.models import from_wire

    counts = {"input_tokens": 12, "output_tokens": 5, "cache_read_tokens": 0, "cache_creation_tokens": 0,
              "requests": 1, "cache_creation_1h_tokens": 0, "server_tool_uses": 0}  # fmt: skip

    def validated() -> ModelResponse:
        parts = [ToolCall(id="toolu_01", name="add", args={"a": 1, "b": 2})]
        usage = Usage(**counts)
        return ModelResponse(parts=tuple(parts), stop_reason="tool_use", model="m", usage=usage, details={"id": "x"})

    def built() -> ModelResponse:
        parts = [from_wire.call("toolu_01", "add", {"a": 1, "b": 2})]
        return from_wire.reply(parts, "tool_use", "m", from_wire.usage(**counts), {"id": "x"})

    assert validated() == built()
    times: dict[str, list[float]] = {"validated": [], "from_wire": []}
    for _ in range(rounds):
        for name, make in (("validated", validated), ("from_wire", built)):
            best = min(timeit.repeat(make, number=number, repeat=repeats, timer=time.process_time)) / number
            times[name].append(best * 1e6)
    return {name: min(values) for name, values in times.items()} | {
        "frames_validated": frames(validated),
        "frames_from_wire": frames(built),
    }


def spawn(build: str, number: int, repeats: int) -> dict[str, Any]:
    from bench_paired import in_build

    return in_build(build, __file__, ["--child", "--number", str(number), "--repeats", str(repeats)])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", nargs=2, metavar=("DEST", "COMMIT"), help="make a build of COMMIT at DEST, and stop")
    parser.add_argument("--a", default=".", help="build A (a tree made with --tree; '.': as installed)")
    parser.add_argument("--b", default=".", help="build B")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--number", type=int, default=2000, help="conversions a timed repeat")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats a process (the best is its figure)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.number, args.repeats)))
        return
    if args.tree:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_paired import make_tree

        make_tree(args.tree[1], Path(args.tree[0]))
        return
    print(f"load average {os.getloadavg()}")
    pairs = []
    for i in range(args.pairs):
        order = (("a", args.a), ("b", args.b)) if i % 2 == 0 else (("b", args.b), ("a", args.a))
        pairs.append({name: spawn(build, args.number, args.repeats) for name, build in order})
    for adapter in ("anthropic", "openai_responses", "openai_chat", "gemini"):
        a = [p["a"][adapter]["us"] for p in pairs]
        b = [p["b"][adapter]["us"] for p in pairs]
        paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
        print(
            f"{adapter:<17} µs a reply (median, best): A {statistics.median(a):6.2f} {min(a):6.2f}  "
            f"B {statistics.median(b):6.2f} {min(b):6.2f}  "
            f"B/A paired median {paired:5.3f}  ({', '.join(f'{y / x:.3f}' for x, y in zip(a, b, strict=True))})  "
            f"frames A {pairs[0]['a'][adapter]['frames']} B {pairs[0]['b'][adapter]['frames']}"
        )
    print(f"  A from {pairs[0]['a']['file']}\n  B from {pairs[0]['b']['file']}")
    if args.b == ".":
        print("construction alone, in one process (µs, frames):", json.dumps(construction(args.number, args.repeats)))


if __name__ == "__main__":
    main()
