"""A remote A2A agent as a loopwright tool: :func:`a2a_tool` reads the remote's card and sends
the model's text as a message with the SDK's client; the tool's result is the remote's answer
(its artifacts' text, then its final message's). Whatever goes wrong (the remote is down, answers
garbage or a JSON-RPC error, wants input, fails) is an :class:`A2AToolError` naming the URL: an
error result the model reads, never a crash of the run.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ...data.errors import ConfigurationError, LoopwrightError
from ...runtime.tool_context import ToolContext
from ...runtime.tools import Tool

MISSING = "a2a_tool needs the A2A SDK: pip install 'loopwright[a2a]'"


class A2AToolError(LoopwrightError, RuntimeError):
    """A call to a remote A2A agent did not give an answer: the result is an error the model reads."""


_WANTS = ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED")
_FAILED = ("TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED")


def _text_of(parts: Any) -> list[str]:
    """The text of parts: text parts as they are, data parts as JSON."""
    from a2a.helpers.proto_helpers import get_data_parts

    out = [p.text for p in parts if p.HasField("text")]
    out += [json.dumps(d) for d in get_data_parts(parts)]
    return out


def answer_of(url: str, response: Any) -> str:
    """The remote's answer in a ``StreamResponse`` (the task's artifacts and status message, or
    a message), or :class:`A2AToolError` saying why there is none."""
    from a2a.types import TaskState

    if response.HasField("message"):
        return "\n".join(_text_of(response.message.parts))
    if not response.HasField("task"):
        raise A2AToolError(f"the A2A agent at {url} answered neither a task nor a message")
    task = response.task
    state = TaskState.Name(task.status.state)
    said = _text_of(task.status.message.parts) if task.status.HasField("message") else []
    if state in _WANTS:
        asks = " ".join(said) or "(it did not say what)"
        raise A2AToolError(
            f"the A2A agent at {url} needs more input before it can answer (task {task.id}, "
            f"{state.removeprefix('TASK_STATE_').lower()}): {asks}"
        )
    if state in _FAILED:
        why = " ".join(said) or "(it gave no reason)"
        raise A2AToolError(
            f"the A2A agent at {url} ended task {task.id} {state.removeprefix('TASK_STATE_').lower()}: {why}"
        )
    if state != "TASK_STATE_COMPLETED":
        raise A2AToolError(f"the A2A agent at {url} did not finish task {task.id} (it is {state}); ask again later")
    texts = [t for artifact in task.artifacts for t in _text_of(artifact.parts)] + said
    return "\n".join(texts)


async def ask(url: str, text: str, timeout_s: float) -> str:
    """Send ``text`` to the A2A agent at ``url`` and wait (at most ``timeout_s``) for its answer."""
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    last: Any = None
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            client = await create_client(url, client_config=ClientConfig(httpx_client=http, streaming=False))
            async for response in client.send_message(SendMessageRequest(message=message)):
                last = response
    except (Exception, TimeoutError) as exc:
        what = str(exc) or type(exc).__name__
        raise A2AToolError(
            f"the A2A agent at {url} could not be reached or answered badly ({type(exc).__name__}: {what})"
        ) from None
    if last is None:
        raise A2AToolError(f"the A2A agent at {url} answered nothing")
    return answer_of(url, last)


def a2a_tool(url: str, *, name: str, description: str | None = None, timeout_s: float | None = None) -> Tool:
    """A tool that asks the A2A agent at ``url`` (its card at ``/.well-known/agent-card.json``):
    the model sends its request as text, the result is the remote's answer. ``name``: the
    tool's name for the model; ``description``: what the model is told (default: a sentence
    naming the remote); ``timeout_s``: the call's bound (default: the run's
    ``Limits.tool_timeout_s``)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"a2a_tool() takes the remote agent's http(s) URL, got {url!r}")
    try:
        import a2a.client  # noqa: F401  (the SDK the calls use: missing, say what to install now)
    except ImportError:
        raise ConfigurationError(MISSING) from None

    async def call(ctx: ToolContext[Any], request: str) -> str:
        """Send a request to the remote agent.

        Args:
            request: what the remote agent should do, in plain words
        """
        bound = timeout_s or float(getattr(ctx.limits, "tool_timeout_s", None) or 300.0)
        return await ask(url, request, bound)

    said = description or f"Ask the remote agent {name!r} (an A2A agent at {url}) and get its answer."
    return Tool(call, name=name, description=said, timeout_s=timeout_s)
