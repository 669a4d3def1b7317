"""What the three SDK adapters (Anthropic, OpenAI, Gemini) share beyond their clients: the
:class:`~loopwright.models.Model` protocol's two methods, both driven by one ``_call`` that yields
stream deltas (when asked) and ends with the reply. An adapter subclasses ``SdkModel[ItsClient]``
(per-loop clients come with it, see :mod:`.clients`) and writes ``_call``. No SDK import here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

from ..data.events import ModelRequest, ModelResponse
from .base import StreamDelta, StreamToolInput
from .clients import PerLoopClients

C = TypeVar("C")


class SdkModel(PerLoopClients[C]):
    """A model adapter over a provider's SDK (see the module docstring)."""

    trusted_replies = True
    """Its replies are built from the SDK's typed objects or the API's own JSON (the engine skips
    the check it gives replies of models it does not know)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response: ModelResponse | None = None
        async for item in self._call(request, deltas=False):
            if isinstance(item, ModelResponse):
                response = item
        assert response is not None  # _call ends with a response or raises
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | StreamToolInput | ModelResponse]:
        async for item in self._call(request, deltas=True):
            yield item

    def _call(
        self, request: ModelRequest, *, deltas: bool
    ) -> AsyncIterator[StreamDelta | StreamToolInput | ModelResponse]:
        """The call: stream deltas when ``deltas`` (and the SDK streams), then the reply, last."""
        raise NotImplementedError
