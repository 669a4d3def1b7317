"""a2a_tool against real servers: an agent served by the A2A SDK's own server pieces
(DefaultRequestHandler with a tiny AgentExecutor), a loopwright agent served by a2a_app that
waits for an approval, a port nobody listens on, and a server that answers garbage."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState, TaskStatus
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from loopwright import Agent, Limits, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall
from loopwright.integrations.a2a import a2a_app, a2a_tool
from tests import ROOT
from tests.integrations.a2a.conftest import serving_at
from tests.integrations.a2a.test_a2a_server import support
from tests.serve_agents import free_port


class Pricing(AgentExecutor):
    """The remote: prices whatever it is asked about (an artifact, then a final message)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.add_artifact([new_text_part(f"price of {context.get_user_input()}: 42 EUR")], name="price")
        await updater.complete(updater.new_agent_message([new_text_part("priced")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def pricing_app(url: str, executor: AgentExecutor | None = None) -> Starlette:
    card = AgentCard(
        name="pricing",
        description="Prices things.",
        version="0.1.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="price", name="price", description="Prices a thing.", tags=["price"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor or Pricing(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


RELEASE = threading.Event()
"""Lets the stuck remote answer (the test sets it when done, so the server stops at once)."""


class Stuck(Pricing):
    """A remote that does not answer until RELEASE is set."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await asyncio.to_thread(RELEASE.wait, 30)
        await super().execute(context, event_queue)


def caller(remote: Any, request: str, **limits: Any) -> Agent:
    """An agent that calls ``remote`` once with ``request`` and answers with what it got back."""

    def reply(req: Any) -> Any:
        results = [p for p in req.messages[-1].parts if p.type == "tool_result"]
        if results:
            r = results[0]
            text = f"{'ERROR ' if r.is_error else ''}{r.content}"
            return ModelResponse(parts=(TextPart(text=text),), stop_reason="end_turn")
        return ModelResponse(parts=(ToolCall(name=remote.name, args={"request": request}),), stop_reason="tool_use")

    return Agent(name="caller", model=ScriptedModel(reply), tools=[remote], limits=Limits(**limits))


def test_a2a_tool_gets_the_answer_of_an_agent_served_by_the_sdk() -> None:
    with serving_at(pricing_app) as url:
        result = Runner(caller(a2a_tool(url, name="pricing"), "a teapot")).run_sync("price a teapot")
    assert result.outcome == "final"
    assert result.output == "price of a teapot: 42 EUR\npriced"


def test_a_remote_waiting_for_input_is_an_error_result_saying_what_it_asks(tmp_path: Path) -> None:
    make = lambda url: a2a_app(support, store=f"sqlite:///{tmp_path / 'runs.db'}", url=url)  # noqa: E731
    with serving_at(make) as url:
        result = Runner(caller(a2a_tool(url, name="support"), "refund Z9")).run_sync("go")
    assert result.outcome == "final"
    assert result.output is not None and result.output.startswith("ERROR ")
    assert f"the A2A agent at {url} needs more input" in result.output
    assert 'refund({"order": "Z9"}) waits for a confirmation' in result.output


def test_a_remote_that_is_down_is_an_error_result_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    result = Runner(caller(a2a_tool(url, name="gone"), "anything")).run_sync("go")
    assert result.outcome == "final"
    assert result.output is not None and result.output.startswith("ERROR ")
    assert f"the A2A agent at {url} could not be reached" in result.output


def test_a_remote_answering_garbage_is_an_error_result_naming_the_url() -> None:
    async def garbage(request: Any) -> PlainTextResponse:
        return PlainTextResponse("<html>not an agent</html>")

    make = lambda url: Starlette(routes=[Route("/{path:path}", garbage, methods=["GET", "POST"])])  # noqa: E731
    with serving_at(make) as url:
        result = Runner(caller(a2a_tool(url, name="junk"), "anything")).run_sync("go")
    assert result.outcome == "final"
    assert result.output is not None and result.output.startswith("ERROR ")
    assert f"the A2A agent at {url} could not be reached or answered badly" in result.output


def test_the_call_is_bounded_by_the_runs_tool_timeout() -> None:
    RELEASE.clear()
    try:
        with serving_at(lambda url: pricing_app(url, Stuck())) as url:
            agent = caller(a2a_tool(url, name="pricing"), "a kettle", tool_timeout_s=0.5)
            result = Runner(agent).run_sync("price a kettle")
            RELEASE.set()
    finally:
        RELEASE.set()
    assert result.outcome == "final"
    assert result.output is not None and result.output.startswith("ERROR ") and "0.5" in result.output, result.output


def test_without_the_extra_a2a_says_what_to_install() -> None:
    hide = "import sys; sys.modules['a2a'] = None; "
    app = hide + "from loopwright.integrations.a2a import a2a_app"
    done = subprocess.run([sys.executable, "-c", app], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "pip install 'loopwright[a2a]'" in done.stderr
    tool = hide + "from loopwright.integrations.a2a import a2a_tool; a2a_tool('http://x/', name='x')"
    done = subprocess.run([sys.executable, "-c", tool], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "pip install 'loopwright[a2a]'" in done.stderr


def test_a2a_tool_refuses_a_url_that_is_not_http() -> None:
    import pytest

    from loopwright import ConfigurationError

    with pytest.raises(ConfigurationError, match="http"):
        a2a_tool("ftp://example.com/", name="x")
