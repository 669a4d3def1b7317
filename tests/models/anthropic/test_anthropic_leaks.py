"""AnthropicModel's own per-loop clients leave nothing behind: after many ``run_sync`` calls no
closed event loop, no ``AsyncAnthropic`` and no unclosed socket stays alive (fake Claude over HTTP)."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, Limits, Runner, RunResult
from loopwright.models.anthropic.facts import CURRENT
from tests import ROOT
from tests.fake_claude import FakeClaude, message, text

pytestmark = pytest.mark.slow  # fresh interpreters and 200-run loops


RUNS = 200


def _environment(fake: FakeClaude) -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.base_url}


def run_sync(model: AnthropicModel) -> RunResult:
    return Runner(Agent(name="a", model=model, limits=Limits(retry_backoff_s=0))).run_sync("hi")


def alive(kind: type) -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, kind))


def test_200_run_sync_calls_keep_no_event_loop_and_no_client_alive(env: FakeClaude) -> None:
    model = AnthropicModel(CURRENT)
    env.script += [message(text("ok"))] * (RUNS + 1)
    assert run_sync(model).output == "ok"  # warm up: imports, the server's first thread
    loops, clients = alive(asyncio.AbstractEventLoop), alive(anthropic.AsyncAnthropic)
    for _ in range(RUNS):
        assert run_sync(model).outcome == "final"
    extra_loops = alive(asyncio.AbstractEventLoop) - loops
    extra_clients = alive(anthropic.AsyncAnthropic) - clients
    print(f"\nafter {RUNS} run_sync calls: +{extra_loops} event loops, +{extra_clients} AsyncAnthropic alive")
    assert (extra_loops, extra_clients) == (0, 0)
    # the first run's loop and client are gone too: nothing of a finished run stays
    assert alive(anthropic.AsyncAnthropic) == 0


_RSS_CHILD = """\
from loopwright import Agent, AnthropicModel, Limits, Runner
import gc, os

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

runner = Runner(Agent(name="a", model=AnthropicModel("claude-sonnet-5-5"), limits=Limits(retry_backoff_s=0)))
for _ in range(50):  # warm up: imports, allocator arenas, caches
    runner.run_sync("hi")
gc.collect()
before = rss_mib()
for _ in range(200):
    assert runner.run_sync("hi").outcome == "final"
gc.collect()
print(before, rss_mib())
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads RSS from /proc")
def test_rss_stays_flat_over_200_run_sync_calls_in_a_fresh_interpreter(env: FakeClaude) -> None:
    """Measured in a child: in pytest's own process, memory another test freed hides a leak."""
    env.script += [message(text("ok"))] * 250
    done = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD], capture_output=True, text=True, env=_environment(env), cwd=ROOT, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = map(float, done.stdout.split())
    print(f"\nRSS {before:.1f} MiB -> {after:.1f} MiB over 200 run_sync calls ({after - before:+.1f} MiB)")
    assert after - before < 16  # a loop and a client kept alive was ~0.8 MiB a run: 160 MiB


def test_aclose_then_loop_end_closes_once_and_a_new_loop_gets_a_new_client(env: FakeClaude) -> None:
    env.script += [message(text("one")), message(text("two")), message(text("three"))]
    model = AnthropicModel(CURRENT)
    seen: list[Any] = []

    async def go(close: bool) -> None:
        client = await model.client()
        assert await model.client() is client  # one client per loop
        seen.append(client)
        if close:
            await model.aclose()
            assert client.is_closed()
            assert await model.client() is not client  # a closed client is not handed out again
            seen.append(await model.client())

    asyncio.run(go(close=True))
    asyncio.run(go(close=False))
    assert len({id(c) for c in seen}) == 3 and all(c.is_closed() for c in seen)


def test_a_loop_closed_without_shutting_down_its_generators_is_not_kept_either(env: FakeClaude) -> None:
    model = AnthropicModel(CURRENT)
    loop = asyncio.new_event_loop()
    client = loop.run_until_complete(model.client())
    loop.close()  # by hand, without loop.shutdown_asyncgens(): the client's closer never ran
    loops = alive(asyncio.AbstractEventLoop)
    asyncio.run(model.client())  # the next loop's client drops the closed loop's entry
    del loop, client
    assert alive(asyncio.AbstractEventLoop) == loops - 1 and alive(anthropic.AsyncAnthropic) == 0


_CHILD = """\
from loopwright import Agent, AnthropicModel, Limits, Runner

model = AnthropicModel("claude-sonnet-5-5")
runner = Runner(Agent(name="a", model=model, limits=Limits(retry_backoff_s=0)))
for _ in range(50):
    assert runner.run_sync("hi").output == "ok"
import asyncio, gc
gc.collect()
assert not [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)], "an event loop is kept alive"
print("done")
"""


def _child(env: FakeClaude, loop: str = "") -> subprocess.CompletedProcess[str]:
    env.script += [message(text("ok"))] * 50
    code = _CHILD
    if loop == "uvloop":  # the same child under uvloop's event loop policy
        policy = "import asyncio, uvloop\nasyncio.set_event_loop_policy(uvloop.EventLoopPolicy())\n"
        code = _CHILD.replace("\nmodel =", f"\n{policy}model =", 1)
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
        capture_output=True,
        text=True,
        env=_environment(env),
        cwd=ROOT,
        timeout=240,
    )


def test_50_run_sync_runs_leave_no_unclosed_resource_in_a_fresh_interpreter(env: FakeClaude) -> None:
    done = _child(env)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-3000:]
    assert "ResourceWarning" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]


def test_the_same_under_uvloop(env: FakeClaude) -> None:
    pytest.importorskip("uvloop")
    done = _child(env, loop="uvloop")
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-3000:]
    assert "ResourceWarning" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]
