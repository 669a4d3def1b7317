"""What a harness for the adapter conformance kit (:mod:`.adapter_kit`) is: the
:class:`AdapterHarness` protocol, the neutral :class:`Reply`, :class:`Call` and :class:`Failure`
values it scripts its fake server with, and :func:`dead_port` for the server that is down.

Server quirks (:data:`QUIRKS`): a :class:`Reply` may ask its fake server to send it the way some
real server does (``Reply(..., quirks=("calls_without_ids",))``). A harness that scripts quirks
has two more methods (:class:`QuirkHarness`): ``cannot_send(quirk)`` (None when its server sends
that quirk; else why the quirk cannot occur on its API, which the kit reports as the case not
applying, never as a pass) and ``returned_reasoning(body)`` (the reasoning a request carries back).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..data.events import Usage
from ..models.base import Model


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted reply."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


QUIRKS: dict[str, str] = {
    "calls_without_index": "streamed tool calls without an index (Gemini's OpenAI endpoint)",
    "calls_at_one_index": "every streamed tool call at the same index (Ollama)",
    "calls_without_ids": "tool calls without an id (vLLM, LiteLLM; the Gemini API)",
    "object_arguments": "tool call arguments as a JSON object, not a string",
    "no_usage": "a reply without usage (a server that ignores stream_options)",
    "reasoning_required": "reasoning sent with a tool call that the next request must carry back, or the server "
    "refuses it (DeepSeek's reasoning_content, OpenAI's reasoning items, Claude's signed thinking, Gemini's "
    "thought signatures)",
}
"""The server quirks a :class:`Reply` may ask for, each with what real servers send it."""


class NotApplicable(Exception):
    """A check's quirk cannot occur on the harness's API: the check does not apply (its message
    says why); pytest reports it as skipped, :func:`~.adapter_checks.check_adapter` lists it."""


@dataclass(frozen=True)
class Reply:
    """A reply for the fake server to send, in no wire format: the harness translates it.

    ``input_tokens`` counts the input that was not read from a cache, ``cached_tokens`` what
    was (a protocol whose input count includes the cached part adds them up); ``cut``: the
    reply was cut by the output limit (``max_tokens`` / ``length`` / ``incomplete``);
    ``reasoning``: reasoning sent with the reply, in the form the API has for it (a thought and
    its signature, an encrypted item, ``reasoning_content``), which ``returned_reasoning`` reads
    back as this same text; ``quirks``: names of :data:`QUIRKS` the server sends it with."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    cut: bool = False
    input_tokens: int = 10
    cached_tokens: int = 0
    output_tokens: int = 5
    reasoning: str = ""
    quirks: tuple[str, ...] = ()

    @property
    def usage(self) -> Usage:
        """The usage the adapter must report for this reply."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cached_tokens,
            requests=1,
        )


@dataclass(frozen=True)
class Failure:
    """An HTTP error for the fake server to send: ``status``, its ``Retry-After`` (seconds;
    None: no header), or (``context_window``) the server's own "the prompt is too long" 400."""

    status: int
    retry_after: float | None = None
    context_window: bool = False
    message: str = "scripted failure"


@runtime_checkable
class AdapterHarness(Protocol):
    """What the kit needs to test one adapter against a fake server of its wire protocol."""

    name: str
    """Shown in failure messages (``"OpenAIModel (chat)"``)."""

    def make_model(self) -> Model:
        """A new adapter pointed at the fake server (with a test key), the SDK's retries off."""
        ...

    def make_unreachable_model(self) -> Model:
        """A new adapter pointed at ``http://127.0.0.1:<port>`` where nothing listens
        (:func:`dead_port` finds one)."""
        ...

    def script(self, *items: Reply | Failure) -> None:
        """Queue the server's next replies, in its wire format (a reply is sent as a stream
        when the request asks for one)."""
        ...

    def requests(self) -> list[dict[str, Any]]:
        """The request bodies the server received, oldest first."""
        ...

    def answered_ids(self, body: dict[str, Any]) -> list[str]:
        """The call ids of the tool results in a request body, in the order they appear."""
        ...

    def clear(self) -> None:
        """Forget the received requests and any scripted reply left (the kit calls it before each check)."""
        ...


def dead_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@runtime_checkable
class QuirkHarness(AdapterHarness, Protocol):
    """A harness whose fake server can send replies the way other servers do (:data:`QUIRKS`)."""

    def cannot_send(self, quirk: str) -> str | None:
        """None when the server sends ``quirk``; else why it cannot occur on this API (shown
        when the kit's case for it does not apply)."""
        ...

    def returned_reasoning(self, body: dict[str, Any]) -> list[str]:
        """The reasoning a request body carries back (each as the ``Reply.reasoning`` text it
        was sent as), in order."""
        ...
