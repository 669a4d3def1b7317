"""Guards that block on marker words, for the row-coverage scenarios of the guardrails machine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loopwright import Agent, ModelError, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall
from loopwright.data.errors import TokenBudgetError
from loopwright.features import Block, Guardrail
from loopwright.testing import scripted


def block_in(text: str, ctx: Any) -> Block | None:
    return Block("no BLOCK-IN here") if "BLOCK-IN" in text else None


async def block_parallel(text: str, ctx: Any) -> Block | None:
    await asyncio.sleep(0)
    return Block("no BLOCK-PAR here") if "BLOCK-PAR" in text else None


def block_out(text: str, ctx: Any) -> Block | None:
    return Block("no BLOCK-OUT in answers") if "BLOCK-OUT" in text else None


def block_13(call: ToolCall, ctx: Any) -> Block | None:
    return Block("13 is unlucky") if 13 in call.args.values() else None


GUARDED: dict[str, Any] = {
    "input_guards": [block_in, Guardrail(block_parallel, parallel=True)],
    "output_guards": [Guardrail(block_out, retries=1)],
    "tool_guards": [block_13],
}
"""An agent's guard options that every row of the guardrails machine can be driven through."""


def guard_scenarios(
    make: Callable[..., Agent], call: Callable[..., list[ToolCall]], done: str, out: list[Callable[[], None]]
) -> list[str]:
    """The guardrails machine's own scenarios (into ``out``); the states to cancel in."""

    def run(agent: Agent, script: list[Any] | None, text: str = "go", outcome: str = "blocked") -> None:
        result = Runner(agent if script is None else scripted(agent, script)).run_sync(text)
        assert result.outcome == outcome, (result.outcome, result.trace)

    def hang_later(agent: Agent) -> Agent:
        """The first call asks for a tool; the second never answers (the deadline ends it)."""
        calls: list[int] = []

        async def model(request: ModelRequest) -> ModelResponse:
            calls.append(1)
            if len(calls) == 1:
                return ModelResponse(parts=tuple(call()), stop_reason="tool_use")
            await asyncio.sleep(5)
            raise AssertionError("unreachable")

        return agent.replace(model=ScriptedModel(model))  # type: ignore[arg-type]

    name = "guardrails"
    long_then_call = ModelResponse(parts=(TextPart(text="word " * 8000), *call()), stop_reason="tool_use")
    cut = ModelResponse(parts=(TextPart(text="half an ans"),), stop_reason="max_tokens")
    out += [
        # the core's reason rows, on a pass after the first (the first is guard_first's)
        lambda: run(make(name, max_model_retries=1), [call(), ModelError("busy", status=529), done], outcome="final"),
        lambda: run(
            make(name, max_model_retries=0), [call(), ModelError("bad", status=400, retryable=False)], outcome="failed"
        ),
        lambda: run(make(name), [call(), TokenBudgetError("too big"), "ok"], outcome="salvaged"),
        lambda: run(make(name, salvage=False), [call(), TokenBudgetError("too big")], outcome="limit"),
        lambda: run(  # failed for good on the second pass: the fallback model answers
            make(name, max_model_retries=0).replace(fallback_models=[ScriptedModel(["ok"])]),
            [call(), ModelError("busy", status=529)],
            outcome="final",
        ),
        lambda: run(  # the second request (a long first reply in its history) would overspend: not sent
            make(name, max_cost_usd=0.002).replace(model=ScriptedModel([long_then_call, done], name="claude-opus-4-6")),
            None,
            outcome="limit",
        ),
        lambda: run(hang_later(make(name, timeout_s=0.2)), None, outcome="limit"),
        lambda: run(make(name), [cut, done], outcome="final"),  # a reply cut short: postprocess -> decide
        lambda: run(make(name), ["never"], "BLOCK-IN"),
        lambda: run(make(name), ["never"], "BLOCK-PAR"),
        lambda: run(make(name), ["BLOCK-OUT", done], outcome="final"),  # retried with the message, then passes
        lambda: run(make(name), ["BLOCK-OUT", "BLOCK-OUT"]),  # the retry spent: blocked
        lambda: run(make(name, max_iterations=1), [call(), "BLOCK-OUT"]),  # a salvaged answer blocked
        lambda: run(make(name), [call(a=13), done]),  # a tool call blocked
    ]
    return ["guard_input", "guard_first", "guard_output"]
