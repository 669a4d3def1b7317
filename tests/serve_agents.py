"""Agents for the serve tests, the browser test, the CLI test and bench/bench_serve.py: models that
answer from the request (so one agent serves any number of runs), and a uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loopwright import Agent, Limits, ModelRequest, ModelResponse, TextPart, ToolCall, Usage, tool

ONE = Usage(requests=1)


@tool(requires_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


def _last_text(request: ModelRequest) -> str:
    last = request.messages[-1]
    return "".join(getattr(p, "text", "") for p in last.parts if p.type == "text")


def support_reply(request: ModelRequest) -> ModelResponse:
    """refund X -> a refund call (it waits for approval); look up X -> a lookup; after a tool's
    answer -> "done: <answer>"; anything else -> "you said: <text>"."""
    last = request.messages[-1]
    answers = [p for p in last.parts if p.type == "tool_result"]
    if answers:
        return ModelResponse(parts=(TextPart(text=f"done: {answers[0].content}"),), stop_reason="end_turn", usage=ONE)
    text = _last_text(request)
    for word, name in (("refund", "refund"), ("look up", "lookup")):
        found = re.search(rf"{word} (\w+)", text)
        if found:
            call = ToolCall(name=name, args={"order": found.group(1)})
            return ModelResponse(parts=(call,), stop_reason="tool_use", usage=ONE)
    return ModelResponse(parts=(TextPart(text=f"you said: {text}"),), stop_reason="end_turn", usage=ONE)


def slow_model(delay: float, rounds: int) -> Any:
    """A model that takes ``delay`` s a call and looks an order up ``rounds`` times before answering."""

    async def reply(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(delay)
        calls = sum(1 for m in request.messages for p in m.parts if p.type == "tool_result")
        if calls < rounds:
            return ModelResponse(
                parts=(ToolCall(name="lookup", args={"order": str(calls)}),), stop_reason="tool_use", usage=ONE
            )
        return ModelResponse(parts=(TextPart(text=f"looked up {calls}"),), stop_reason="end_turn", usage=ONE)

    return reply


from loopwright import ScriptedModel  # noqa: E402

support = Agent(name="support", model=ScriptedModel(support_reply), tools=[refund, lookup])
"""The agent the CLI test serves (``tests.serve_agents:support``)."""


def slow_agent(name: str = "slow", delay: float = 0.05, rounds: int = 3) -> Agent:
    limits = Limits(max_iterations=rounds + 5)
    return Agent(name=name, model=ScriptedModel(slow_model(delay, rounds)), tools=[lookup], limits=limits)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(asgi: Any, **config: Any) -> Iterator[str]:
    """Run ``asgi`` on uvicorn on 127.0.0.1 in a thread; its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
