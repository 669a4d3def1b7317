"""A client that reads slowly holds at most its buffer, is dropped with a "resume from
Last-Event-ID" hint, and neither slows the run nor costs the other clients an event."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from loopwright.serve import app
from loopwright.serve.hub import END, Item
from loopwright.serve.service import Service
from loopwright.stores import SQLiteStore
from tests.serve_agents import serving, slow_agent


def test_a_stalled_client_is_dropped_and_the_run_and_a_prompt_client_go_on(tmp_path: Path) -> None:
    async def main() -> tuple[list[int], list[Any], float, float]:
        store = SQLiteStore(tmp_path / "runs.db")
        service = Service([slow_agent(delay=0.001, rounds=20)], store, buffer=64)
        run_id = await service.start("slow", "go", None)
        prompt = service.follow(run_id, 0)
        stalled = service.follow(run_id, 0)
        first = await anext(stalled)  # it reads one batch, then nothing while the run goes on
        assert isinstance(first, list) and isinstance(first[0], Item)
        seen: list[int] = []
        t0 = time.monotonic()
        async for got in prompt:
            if isinstance(got, list):
                seen += [item.seq for item in got]
        took = time.monotonic() - t0
        hub = service.hubs.get(run_id)
        assert hub is None or all(len(s.queue) <= 64 for s in hub.subscribers)  # bounded, whatever it missed
        rest = [item async for item in stalled]
        alone = await service.start("slow", "go", None)  # the same run with no client at all
        t1 = time.monotonic()
        async for _ in service.follow(alone, 10**9):
            pass
        took_alone = time.monotonic() - t1
        await service.close()
        await store.close()
        return seen, rest, took, took_alone

    seen, rest, took, took_alone = asyncio.run(main())
    assert seen == list(range(1, len(seen) + 1)) and len(seen) > 64  # the prompt client got every event in order
    assert rest == ["dropped"]  # the stalled one: dropped, with nothing after
    assert took < took_alone * 3 + 0.5  # the stalled client did not slow the run down


def test_over_http_a_dropped_client_is_told_where_to_resume_and_resuming_misses_nothing(tmp_path: Path) -> None:
    asgi = app([slow_agent(delay=0, rounds=15)], store=f"sqlite:///{tmp_path / 'runs.db'}", buffer=2)
    with serving(asgi) as base, httpx.Client(base_url=base, timeout=20) as c:
        run_id = c.post("/runs", json={"input": "go"}).json()["run_id"]
        got: list[int] = []
        drops = []
        for _ in range(200):
            last = got[-1] if got else 0
            with c.stream("GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": str(last)}) as response:
                event = None
                ended = False
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        got.append(int(line[4:]))
                    elif line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "dropped":
                        drops.append(json.loads(line[6:]))
                    elif line.startswith("data: ") and event == "end":
                        ended = True
            if ended:
                break
        assert got == list(range(1, len(got) + 1))
        assert drops, "a buffer of 2 events should have dropped the client during the run's bursts"
        hint = drops[0]
        assert f"resume from Last-Event-ID: {hint['last_event_id']}" in hint["message"]
        assert c.get(f"/runs/{run_id}").json()["outcome"] == "final"


def test_end_follows_the_last_event_of_a_run_that_ended() -> None:
    assert END == "end"
