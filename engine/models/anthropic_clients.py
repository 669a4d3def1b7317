"""Per-event-loop clients of :class:`~loopwright.models.anthropic_model.AnthropicModel`: the
``anthropic`` client types it accepts, and :class:`PerLoopClients`, the part of the model that picks
the client for the running event loop. A given client is used as given (its SDK retries turned off)
and bound to the first loop that uses it; otherwise one client is made per event loop (by the
factory, or ``AsyncAnthropic()`` from the environment's credentials) and closed when that loop shuts
down its async generators, or by ``aclose``. Part of the Anthropic adapter, so it may import
``anthropic``.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import TypeAlias

import anthropic

from ..data.errors import ConfigurationError, ModelError

Client: TypeAlias = (
    "anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex"
    " | anthropic.AsyncAnthropicBedrockMantle"
)
ClientFactory: TypeAlias = Callable[[], Client]
Owned: TypeAlias = "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Client, AsyncGenerator[None, None]]]"
"""The clients loopwright made, one per event loop, each with the generator that closes it."""

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


class PerLoopClients:
    """The client half of ``AnthropicModel``: which client serves the running event loop."""

    max_retries: int
    _given: Client | None
    _factory: ClientFactory | None
    _given_loop: weakref.ReferenceType[asyncio.AbstractEventLoop] | None
    _given_sdk: Client | None
    _own: Owned

    def _init_clients(self, client: Client | ClientFactory | None) -> None:
        """Take ``client`` (a client, a factory or None) as given to the constructor."""
        self._given = None
        self._factory = None
        if client is None or is_client(client):
            self._given = client  # type: ignore[assignment]
        elif callable(client):
            self._factory = client
        else:
            raise ConfigurationError(
                f"client must be an anthropic async client (AsyncAnthropic, AsyncAnthropicBedrock, "
                f"AsyncAnthropicVertex, AsyncAnthropicBedrockMantle) or a function that returns one, "
                f"got {type(client).__name__}"
            )
        self._given_loop = None
        self._given_sdk = None
        self._own = weakref.WeakKeyDictionary()

    async def client(self) -> Client:
        """The client for the running event loop (see the class docstring)."""
        loop = asyncio.get_running_loop()
        if self._given is not None:
            return self._given_client(loop)
        own = self._own.get(loop)
        if own is not None:
            return own[0]
        for closed in [other for other in self._own if other.is_closed()]:
            del self._own[closed]  # a loop closed without shutting down its async generators
        client = self._make_client()
        closer = close_with_loop(client, loop, weakref.ref(self._own))
        # a started async generator is finalised by its loop when the loop shuts down (asyncio.run
        # and run_sync do): that closes the client, and its sockets, inside the loop that opened them
        await closer.__anext__()
        self._own[loop] = (client, closer)
        return client

    def _given_client(self, loop: asyncio.AbstractEventLoop) -> Client:
        bound = self._given_loop() if self._given_loop is not None else None
        if bound is None and self._given_loop is None:
            self._given_loop = weakref.ref(loop)
        elif bound is not loop:
            raise ModelError(
                "the client given to AnthropicModel was first used in another event loop (each run_sync "
                "and asyncio.run starts a new one) and its connections belong to that loop. Pass a factory "
                "instead, AnthropicModel(..., client=lambda: anthropic.AsyncAnthropic(...)) (loopwright makes "
                "one client per event loop and closes it), or run everything in one event loop",
                retryable=False,
            )
        if self._given_sdk is None:
            assert self._given is not None
            self._given_sdk = self._given.with_options(max_retries=self.max_retries)
        return self._given_sdk

    def _make_client(self) -> Client:
        try:
            if self._factory is not None:
                client = self._factory()
                if not is_client(client):
                    raise ModelError(
                        f"the client factory returned {type(client).__name__}, not an anthropic async client",
                        retryable=False,
                    )
                return client.with_options(max_retries=self.max_retries)
            client = anthropic.AsyncAnthropic(max_retries=self.max_retries)
        except anthropic.AnthropicError as exc:  # a profile named or configured but unusable
            raise ModelError(f"the Anthropic credentials could not be loaded: {exc}", retryable=False) from exc
        if all(getattr(client, name, None) is None for name in ("api_key", "auth_token", "credentials")):
            raise ModelError(MISSING_KEY, retryable=False)
        return client

    async def aclose(self) -> None:
        """Close the client loopwright made for the running event loop (it is also closed when
        the loop shuts down). A client you passed in stays yours to close."""
        own = self._own.pop(asyncio.get_running_loop(), None)
        if own is not None:
            await own[1].aclose()  # the closer's finally closes the client


def is_client(value: object) -> bool:
    """Whether ``value`` is one of the ``anthropic`` async clients the model accepts."""
    return isinstance(value, CLIENT_TYPES)


async def close_with_loop(
    client: Client, loop: asyncio.AbstractEventLoop, owned: weakref.ReferenceType[Owned]
) -> AsyncGenerator[None, None]:
    """Suspended until its loop shuts down its async generators (or ``aclose``), then closes
    ``client`` and drops the loop's entry from ``owned``: the entry holds this generator, whose
    finalizer holds the loop, so an entry left behind would keep the closed loop and its client
    alive as long as the model (200 ``run_sync`` calls: 200 loops)."""
    try:
        yield
    finally:
        entries = owned()
        if entries is not None and entries.get(loop, (None,))[0] is client:
            del entries[loop]
        with contextlib.suppress(Exception):
            await client.close()
