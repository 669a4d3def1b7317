"""Per-event-loop clients of :class:`~loopwright.models.anthropic.AnthropicModel`: the
``anthropic`` client types it accepts, and :class:`AnthropicClients`, the ``anthropic`` side of
:class:`~loopwright.models.clients.PerLoopClients` (which owns the per-loop logic for every
adapter). A given client is used as given (its SDK retries turned off) and bound to the first loop
that uses it; otherwise one client is made per event loop (by the factory, or ``AsyncAnthropic()``
from the environment's credentials) and closed when that loop shuts down its async generators, or
by ``aclose``. Part of the Anthropic adapter, so it may import ``anthropic``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import anthropic

from ...data.errors import ModelError
from ..sdk import SdkModel

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


class AnthropicClients(SdkModel[Client]):
    """The client half of ``AnthropicModel``: the ``anthropic`` side of :class:`PerLoopClients`."""

    max_retries: int
    _client_kinds = (
        "an anthropic async client (AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex, "
        "AsyncAnthropicBedrockMantle)"
    )
    _client_kind = "an anthropic async client"
    _factory_example = "AnthropicModel(..., client=lambda: anthropic.AsyncAnthropic(...))"
    _client_errors = (anthropic.AnthropicError,)

    @staticmethod
    def _is_client(value: object) -> bool:
        return is_client(value)

    def _ready(self, client: Client) -> Client:
        return client.with_options(max_retries=self.max_retries)

    def _default_client(self) -> Client:
        client = anthropic.AsyncAnthropic(max_retries=self.max_retries)
        if all(getattr(client, name, None) is None for name in ("api_key", "auth_token", "credentials")):
            raise ModelError(MISSING_KEY, retryable=False)
        return client

    def _client_error(self, exc: Exception) -> ModelError:  # a profile named or configured but unusable
        return ModelError(f"the Anthropic credentials could not be loaded: {exc}", retryable=False)


def is_client(value: object) -> bool:
    """Whether ``value`` is one of the ``anthropic`` async clients the model accepts."""
    return isinstance(value, CLIENT_TYPES)
