"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from loopwright import Agent, Limits, ScriptedModel, tool
from loopwright.data.events import Event
from tests import ROOT

if TYPE_CHECKING:
    from loopwright.models.openai import OpenAIModel
    from tests.fake_openai import FakeOpenAI

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@tool
def boom(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


def agent(script: Any, *, tools: Any = (add, slow, boom), **limits: Any) -> Agent:
    limits.setdefault("retry_backoff_s", 0)
    return Agent(name="tester", model=ScriptedModel(script), instruction="Test.", tools=tools, limits=Limits(**limits))


# ------------------------------------------------------------------ `loopwright serve` as a subprocess

LOOPWRIGHT = (sys.executable, "-m", "loopwright")
"""The command a user types, as this interpreter runs it."""


def serve_process(
    *args: str, env: dict[str, str] | None = None, command: Sequence[str] = LOOPWRIGHT, stdout: Any = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``loopwright serve *args`` started from the repository's root (its modules importable:
    ``tests.serve_agents:support``), ``env`` added to this process's; stdout and stderr piped."""
    return subprocess.Popen(
        [*command, "serve", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_up(proc: subprocess.Popen[str], url: str, timeout_s: float = 30.0) -> httpx.Response:
    """GET ``url`` until the server ``proc`` answers it (its first answer); fails, with the
    server's stderr, if the process exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return httpx.get(url)
        except httpx.ConnectError:
            assert proc.poll() is None, proc.stderr and proc.stderr.read()
            assert time.monotonic() < deadline, f"the server did not answer {url} within {timeout_s} s"
            time.sleep(0.1)


@contextmanager
def serving_cli(*args: str, port: int, ready: str = "/agents", **kw: Any) -> Iterator[subprocess.Popen[str]]:
    """``loopwright serve *args --port port`` (:func:`serve_process`; ``kw`` too), once it answers
    ``ready``; stopped on the way out (SIGTERM, then SIGKILL after 20 s) unless it has exited already."""
    proc = serve_process(*args, "--port", str(port), **kw)
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}{ready}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # (held by something: do not leave it behind)
            proc.kill()
            proc.wait(timeout=20)


# ------------------------------------------------------------------ OpenAIModel on tests/fake_openai.py


def openai_on(fake: FakeOpenAI, name: str = "local-model", **kw: Any) -> OpenAIModel:
    """An :class:`OpenAIModel` named ``name`` whose SDK client talks to ``fake`` over HTTP (``kw``:
    the model's options, e.g. ``api="chat"``)."""
    import openai

    from loopwright.models.openai import OpenAIModel

    url = fake.base_url
    return OpenAIModel(name, client=lambda: openai.AsyncOpenAI(base_url=url, api_key="k"), **kw)


def one_tool_agent(model: Any, one: Any, **limits: Any) -> Agent:
    """An agent of ``model`` with the tool ``one``, no model retries and no back-off (``limits`` on top)."""
    return Agent(name="a", model=model, tools=[one], limits=Limits(max_model_retries=0, retry_backoff_s=0, **limits))


def frames_entered(make: Callable[[], object]) -> Counter[str]:
    """The Python frames ``make()`` enters, by ``file:function``, counted with ``sys.setprofile``
    on a second call (the first warms caches: an ``isinstance`` against an ABC fills its own)."""
    make()
    seen: Counter[str] = Counter()

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen[f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"] += 1

    sys.setprofile(prof)
    try:
        make()
    finally:
        sys.setprofile(None)
    return seen
