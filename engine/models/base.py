"""The model protocol: one async method. Adapters translate provider types to ours."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..data.events import ModelRequest, ModelResponse


@runtime_checkable
class Model(Protocol):
    """Anything with ``async def complete(request) -> ModelResponse`` is a model.

    Raise :class:`loopwright.ModelError` for failures (``retryable=False`` for ones a retry
    cannot fix); any other exception fails the run at once with its message.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a reply as it streams in: visible text, or (``thought=True``) reasoning."""

    text: str
    thought: bool = False


@dataclass(frozen=True, slots=True)
class StreamToolInput:
    """A piece of a tool call's input JSON as it streams in (a ``tool_input_delta`` event)."""

    call_id: str
    name: str
    partial_json: str


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream: ``stream`` yields deltas, then exactly one final
    :class:`ModelResponse` equal to what ``complete`` would have returned."""

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | StreamToolInput | ModelResponse]: ...
