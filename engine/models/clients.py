"""Per-event-loop SDK clients, for every provider adapter: :class:`PerLoopClients` is the part of a
model that picks the client for the running event loop. A client given to the model is used as
given (made ready by the adapter: its SDK retries turned off) and bound to the first loop that
uses it; a second loop gets a clear, non-retryable error. Otherwise one client is made per event
loop (by the user's factory, or the adapter's default from the environment's credentials) and
closed when that loop shuts down its async generators (``asyncio.run`` and ``run_sync`` do), or
by ``aclose``. Entries of loops that closed are dropped, so a model used from many loops keeps no
loop, and no client, alive.

An adapter subclasses ``PerLoopClients[ItsClient]``, calls :meth:`~PerLoopClients._init_clients`
from its constructor and fills in the hooks (what counts as a client, how one is made ready,
made by default and closed, and the words its errors use). No SDK import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar

from ..data.errors import ConfigurationError, ModelError

C = TypeVar("C")
Owned: TypeAlias = "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, AsyncGenerator[None, None]]]"
"""The clients loopwright made, one per event loop, each with the generator that closes it."""


class PerLoopClients(Generic[C]):
    """Which client serves the running event loop (see the module docstring)."""

    _client_kinds: ClassVar[str]
    """The clients the model takes, for the constructor's error (``"an openai.AsyncOpenAI (or ...)"``)."""
    _client_kind: ClassVar[str]
    """A client in a few words, for a factory that returned something else."""
    _factory_example: ClassVar[str]
    """How to pass a factory (``"OpenAIModel(..., client=lambda: openai.AsyncOpenAI(...))"``)."""
    _client_errors: ClassVar[tuple[type[Exception], ...]] = ()
    """The SDK's errors that making a client may raise; :meth:`_client_error` words them."""

    _given: C | None
    _factory: Callable[[], C] | None
    _given_loop: weakref.ReferenceType[asyncio.AbstractEventLoop] | None
    _given_ready: C | None
    _own: Owned

    # ------------------------------------------------------------------ the adapter's hooks

    @staticmethod
    def _is_client(value: object) -> bool:
        """Whether ``value`` is a client of the adapter's SDK."""
        raise NotImplementedError

    def _ready(self, client: C) -> C:
        """A given or factory-made client as the model uses it (its SDK retries off)."""
        return client

    def _default_client(self) -> C:
        """A client made from the environment's credentials (ready to use)."""
        raise NotImplementedError

    def _client_error(self, exc: Exception) -> ModelError:
        """What one of :attr:`_client_errors`, raised while making a client, comes to."""
        return ModelError(f"the client could not be made: {exc}", retryable=False)

    @staticmethod
    def _closing(client: Any) -> Awaitable[object]:
        """Close ``client`` (the SDKs' async clients spell it ``close``)."""
        result: Awaitable[object] = client.close()
        return result

    # ------------------------------------------------------------------ the shared part

    def _init_clients(self, client: C | Callable[[], C] | None) -> None:
        """Take ``client`` (a client, a factory or None) as given to the constructor."""
        self._given = None
        self._factory = None
        if client is None or self._is_client(client):
            self._given = client  # type: ignore[assignment]
        elif callable(client):
            self._factory = client
        else:
            raise ConfigurationError(
                f"client must be {self._client_kinds} or a function that returns one, got {type(client).__name__}"
            )
        self._given_loop = None
        self._given_ready = None
        self._own = weakref.WeakKeyDictionary()

    async def client(self) -> C:
        """The client for the running event loop (see the module docstring)."""
        loop = asyncio.get_running_loop()
        if self._given is not None:
            return self._given_client(loop)
        own = self._own.get(loop)
        if own is not None:
            made: C = own[0]
            return made
        for closed in [other for other in self._own if other.is_closed()]:
            del self._own[closed]  # a loop closed without shutting down its async generators
        client = self._make_client()
        closer = close_with_loop(client, loop, weakref.ref(self._own), self._closing)
        # a started async generator is finalised by its loop when the loop shuts down (asyncio.run
        # and run_sync do): that closes the client, and its sockets, inside the loop that opened them
        await closer.__anext__()
        self._own[loop] = (client, closer)
        return client

    def _given_client(self, loop: asyncio.AbstractEventLoop) -> C:
        bound = self._given_loop() if self._given_loop is not None else None
        if self._given_loop is None:
            self._given_loop = weakref.ref(loop)
        elif bound is not loop:
            raise ModelError(
                f"the client given to {type(self).__name__} was first used in another event loop (each run_sync "
                "and asyncio.run starts a new one) and its connections belong to that loop. Pass a factory "
                f"instead, {self._factory_example} (loopwright makes one client per event loop and closes it), "
                "or run everything in one event loop",
                retryable=False,
            )
        if self._given_ready is None:
            assert self._given is not None
            self._given_ready = self._ready(self._given)
        return self._given_ready

    def _make_client(self) -> C:
        try:
            if self._factory is None:
                return self._default_client()
            made = self._factory()
            if not self._is_client(made):
                raise ModelError(
                    f"the client factory returned {type(made).__name__}, not {self._client_kind}", retryable=False
                )
            return self._ready(made)
        except self._client_errors as exc:
            raise self._client_error(exc) from exc

    async def aclose(self) -> None:
        """Close the client loopwright made for the running event loop (it is also closed when
        the loop shuts down). A client you passed in stays yours to close."""
        own = self._own.pop(asyncio.get_running_loop(), None)
        if own is not None:
            await own[1].aclose()  # the closer's finally closes the client


async def close_with_loop(
    client: Any,
    loop: asyncio.AbstractEventLoop,
    owned: weakref.ReferenceType[Owned],
    closing: Callable[[Any], Awaitable[object]],
) -> AsyncGenerator[None, None]:
    """Suspended until its loop shuts down its async generators (or ``aclose``), then closes
    ``client`` (by ``closing``) and drops the loop's entry from ``owned``: the entry holds this
    generator, whose finalizer holds the loop, so an entry left behind would keep the closed loop
    and its client alive as long as the model (200 ``run_sync`` calls: 200 loops)."""
    try:
        yield
    finally:
        entries = owned()
        if entries is not None and entries.get(loop, (None,))[0] is client:
            del entries[loop]
        with contextlib.suppress(Exception):
            await closing(client)
