"""A streaming model's reply as the run's events: text and reasoning deltas (``text_delta``),
pieces of a tool call's input (``tool_input_delta``); its last item is the reply."""

from __future__ import annotations

from typing import Any

from ..data.errors import ModelError
from ..data.events import ModelRequest, TextDelta, ToolInputDelta
from ..models.base import StreamDelta, StreamToolInput
from .context import RunContext


async def streamed(stream: Any, request: ModelRequest, ctx: RunContext) -> Any:
    """A streaming model's reply: its deltas become events, its last item is the reply."""
    response: Any = None
    async for item in stream(request):
        if isinstance(item, StreamDelta):
            ctx.emit(TextDelta, text=item.text, thought=item.thought)
        elif isinstance(item, StreamToolInput):
            ctx.emit(ToolInputDelta, item.call_id, item.name, item.partial_json)
        else:
            response = item
    if response is None:
        raise ModelError("the model's stream ended without a final response", retryable=True)
    return response
