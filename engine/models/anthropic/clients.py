"""The ``anthropic`` client types :class:`~loopwright.models.anthropic.AnthropicModel` accepts
(:func:`is_client`), and what it says when no credentials are found. The model's own per-loop
client logic is the shared :class:`~loopwright.models.clients.PerLoopClients`: a given client is
used as given (its SDK retries turned off) and bound to the first loop that uses it; otherwise one
client is made per event loop (by the factory, or ``AsyncAnthropic()`` from the environment's
credentials) and closed when that loop shuts down its async generators, or by ``aclose``. Part of
the Anthropic adapter, so it may import ``anthropic``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import anthropic

Client: TypeAlias = (
    "anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex"
    " | anthropic.AsyncAnthropicBedrockMantle"
)
ClientFactory: TypeAlias = Callable[[], Client]

MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set (and no other Anthropic credentials were found): export "
    "ANTHROPIC_API_KEY=<your key> (and ANTHROPIC_BASE_URL for a proxy) and run again, or pass "
    "AnthropicModel(client=anthropic.AsyncAnthropic(api_key=...))"
)
CLIENT_TYPES: tuple[type, ...] = tuple(
    kind
    for kind in (
        anthropic.AsyncAnthropic,
        anthropic.AsyncAnthropicBedrock,
        anthropic.AsyncAnthropicVertex,
        getattr(anthropic, "AsyncAnthropicBedrockMantle", None),  # (Bedrock's Messages API endpoint; newer SDKs)
    )
    if kind is not None
)


def is_client(value: object) -> bool:
    """Whether ``value`` is one of the ``anthropic`` async clients the model accepts."""
    return isinstance(value, CLIENT_TYPES)
