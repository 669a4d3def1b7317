"""A store lists the runs under a run (``children``), so a workflow's trace page finds every child
kept, a map's items after a gap too, in SQLite and PostgreSQL, and the dev UI's trace page over HTTP."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Agent, Runner, ScriptedModel, ToolCall, tool
from loopwright.cli.trace_page import stored_children, trace_page
from loopwright.data.errors import ConfigurationError
from loopwright.serve import app
from loopwright.stores import SQLiteStore, StoreWrapper
from loopwright.stores.base import Checkpoint, RunStore
from loopwright.workflows import MapAgent, SequentialAgent
from tests.cli.test_trace_page_workflows import blob, panel
from tests.serve.test_serve import wait_for
from tests.serve_agents import serving

ODD_IDS = ["a_b", "a_b.x", "a_b.x.1", "a_b.y_z", "aXb.no", "a_bb.no", "a_b2", "a%b.no", "A_B.no", "a_b"]
"""Run ids whose ``_`` and ``%`` a LIKE pattern would take as wildcards (``aXb.no``, ``A_B.no``)."""


def per_doc(on_error: str = "continue") -> MapAgent:
    return MapAgent(
        "per_doc",
        Agent(name="summariser", model=ScriptedModel([f"sum {n}" for n in range(4)])),
        over="docs",
        concurrency=1,
        on_error=on_error,  # type: ignore[arg-type]
    )


class RefusesOne(StoreWrapper):
    """A store that refuses to start the run ``refused``: it never gets a checkpoint."""

    def __init__(self, inner: RunStore, refused: str) -> None:
        super().__init__(inner)
        self.refused = refused

    async def save(self, checkpoint: Checkpoint, version: int, owner: str) -> int:
        if checkpoint.run_id == self.refused and version == 0:
            raise ConfigurationError(f"run {self.refused!r} refused before it started")
        return await super().save(checkpoint, version, owner)


class OwnStore:
    """A user's own store without ``children``: every call handed to ``inner`` but that one."""

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "children":
            raise AttributeError(name)
        return getattr(self.inner, name)


async def run_map(store: RunStore, docs: list[str]) -> None:
    result = await Runner(per_doc(), store=store).run("go", run_id="r1", state={"docs": docs})
    assert result.outcome == "final", result


def test_a_map_item_refused_before_it_started_hides_no_item_after_it(tmp_path: Path) -> None:
    """The fault: items were counted ``each.0, each.1, ...`` until the first missing one, so an
    item that never started hid every item after it."""

    async def go() -> tuple[dict[str, Any], str]:
        store = SQLiteStore(tmp_path / "runs.db")
        try:
            await run_map(RefusesOne(store, "r1.each.1"), ["a", "b", "c", "d"])
            found = await stored_children(store, "r1", per_doc())
            page = trace_page(await _events(store, "r1"), machine=per_doc(), children=found)
            return found, page
        finally:
            await store.close()

    found, page = asyncio.run(go())
    assert sorted(found) == ["r1.each.0", "r1.each.2", "r1.each.3"]
    assert sorted(blob(page, "lw-children")) == ["r1.each.0", "r1.each.2", "r1.each.3"]
    # each item under its own number; the one that never started has its panel saying so
    labels = {
        m[0]: m[1] for m in re.findall(r'id="lw-run-([^"]+)"[^>]*><summary><span class="lw-label">([^<]*)<', page)
    }
    assert labels == {f"r1.each.{n}": f"summariser · item {n}" for n in range(4)}
    assert "it never started" in panel(page, "r1.each.1")


async def _events(store: RunStore, run_id: str) -> list[Any]:
    from loopwright.data.events import EVENT_ADAPTER

    return [EVENT_ADAPTER.validate_json(raw) for raw in await store.events(run_id)]


def test_a_store_without_children_is_probed_as_before(tmp_path: Path) -> None:
    async def go() -> dict[str, Any]:
        store = SQLiteStore(tmp_path / "runs.db")
        try:
            await run_map(store, ["a", "b", "c"])
            own = OwnStore(store)
            assert not hasattr(own, "children")
            return await stored_children(own, "r1", per_doc())
        finally:
            await store.close()

    assert sorted(asyncio.run(go())) == ["r1.each.0", "r1.each.1", "r1.each.2"]


async def _keep(store: Any, run_ids: list[str]) -> None:
    """One checkpoint of each run (what ``children`` reads: the ids the store holds)."""
    for run_id in dict.fromkeys(run_ids):
        await store.save(Checkpoint(run_id, "a", "done", "final", 1, b"{}", b"{}"), 0, "me")


def under(run_ids: list[str], run_id: str) -> list[str]:
    return sorted({r for r in run_ids if r.startswith(run_id + ".")})


def test_children_are_the_runs_under_a_run_at_every_depth_whatever_their_ids_hold() -> None:
    async def go() -> None:
        store = SQLiteStore(":memory:")
        try:
            await _keep(store, ODD_IDS)
            assert await store.children("a_b") == ["a_b.x", "a_b.x.1", "a_b.y_z"]
            assert await StoreWrapper(store).children("a_b") == ["a_b.x", "a_b.x.1", "a_b.y_z"]
            assert await store.children("a%b") == ["a%b.no"]
            assert await store.children("a") == [] and await store.children("nothing") == []
        finally:
            await store.close()

    asyncio.run(go())


ID = st.text(alphabet="ab._%\\A", min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(run_ids=st.lists(ID, max_size=12), asked=ID)
def test_children_of_any_run_are_exactly_the_ids_starting_with_it_and_a_dot(run_ids: list[str], asked: str) -> None:
    async def go() -> list[str]:
        store = SQLiteStore(":memory:")
        try:
            await _keep(store, run_ids)
            return await store.children(asked)
        finally:
            await store.close()

    assert asyncio.run(go()) == under(run_ids, asked)


@pytest.mark.postgres
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run_ids=st.lists(ID, max_size=12), asked=ID)
def test_postgres_children_are_exactly_the_ids_starting_with_it_and_a_dot(
    pg_url: str, run_ids: list[str], asked: str
) -> None:
    from loopwright.stores.postgres import PostgresStore

    space = f"{uuid.uuid4().hex}-"  # (each example's runs apart from the others' in the one database)

    async def go() -> list[str]:
        store = PostgresStore(pg_url)
        try:
            await _keep(store, [space + r for r in run_ids])
            return [r.removeprefix(space) for r in await store.children(space + asked)]
        finally:
            await store.close()

    assert asyncio.run(go()) == under(run_ids, asked)


@pytest.mark.postgres
def test_postgres_finds_a_map_item_after_a_gap_and_odd_ids(pg_url: str) -> None:
    from loopwright.stores.postgres import PostgresStore

    async def go() -> dict[str, Any]:
        store = PostgresStore(pg_url)
        try:
            await _keep(store, ODD_IDS)
            assert await store.children("a_b") == ["a_b.x", "a_b.x.1", "a_b.y_z"]
            await run_map(RefusesOne(store, "r1.each.1"), ["a", "b", "c", "d"])
            return await stored_children(store, "r1", per_doc())
        finally:
            await store.close()

    assert sorted(asyncio.run(go())) == ["r1.each.0", "r1.each.2", "r1.each.3"]


@tool
def put_docs(ctx: Any) -> str:
    """Put the documents to summarise in state."""
    ctx.state["docs"] = ["a", "b"]
    return "two documents"


def release() -> SequentialAgent:
    """A workflow to serve: a step that puts two documents in state, then a map over them."""
    plan = Agent(name="plan", tools=[put_docs], model=ScriptedModel([[ToolCall(name="put_docs", args={})], "plan: go"]))
    return SequentialAgent("release", steps=[plan, per_doc()])


@pytest.mark.slow
def test_the_dev_ui_trace_page_of_a_workflow_run_holds_its_childrens_panels(tmp_path: Path) -> None:
    """The fault: ``GET /runs/{id}/trace`` drew a workflow's page without its children."""
    asgi = app([release()], store=f"sqlite:///{tmp_path / 'runs.db'}", trace_page=trace_page)
    with serving(asgi) as base, httpx.Client(base_url=base, timeout=20) as client:
        started = client.post("/runs", json={"agent": "release", "input": "ship it", "run_id": "w1"})
        assert started.status_code == 202, started.text
        wait_for(client, "w1", "final")
        got = client.get("/runs/w1/trace")
    assert got.status_code == 200, got.text
    page = got.text
    assert "kept in a store" not in page
    kids = ["w1.per_doc", "w1.per_doc.each.0", "w1.per_doc.each.1", "w1.plan"]
    assert sorted(blob(page, "lw-children")) == kids
    for run_id in kids:
        assert f'id="lw-run-{run_id}"' in page, run_id
    assert "sum 1" in panel(page, "w1.per_doc.each.1")
