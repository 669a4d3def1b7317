"""ScriptedModel: a deterministic model for tests, demos and benchmarks.

Its replies are cleaned as every adapter's are (:func:`loopwright.data.values.storable_reply`:
a lone surrogate becomes U+FFFD), so a scripted run holds what a saved run, a JSON feed and a
report can write."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from ..data.errors import ConfigurationError, ScriptExhaustedError
from ..data.events import ModelRequest, ModelResponse, ToolCall, Usage
from ..data.reply_builder import build_reply, build_text
from ..data.values import ValueTooLarge, storable_reply

ScriptItem: TypeAlias = str | Sequence[ToolCall] | ModelResponse | BaseException
"""One reply of a script: a text reply, a tool-use reply (its calls), a reply, or an exception
to raise. The one ``ScriptItem`` (``loopwright.testing.ScriptItem`` is this same alias)."""
ReplyFunction: TypeAlias = Callable[[ModelRequest], "ModelResponse | Awaitable[ModelResponse]"]

_ONE_REQUEST = Usage(requests=1)


def to_response(item: object, position: int | None = None) -> ModelResponse | BaseException:
    """Turn one script item into the reply it stands for (or the error to raise), cleaned as the
    adapters' replies are (lone surrogates become U+FFFD)."""
    where = "" if position is None else f" (item {position})"
    if isinstance(item, BaseException):
        return item
    if isinstance(item, ModelResponse):
        return _cleaned(item, where)
    if isinstance(item, str):
        return _cleaned(build_reply((build_text(item),), _ONE_REQUEST, "end_turn"), where)  # (the fast constructor)
    if isinstance(item, list | tuple) and item and all(isinstance(c, ToolCall) for c in item):
        return _cleaned(build_reply(tuple(item), _ONE_REQUEST, "tool_use"), where)
    raise ConfigurationError(
        f"ScriptedModel cannot use {item!r}{where}: a script item is a str (a text reply), a "
        "non-empty list of ToolCall (a tool-use reply), a ModelResponse, or an exception to raise"
    )


def _cleaned(reply: ModelResponse, where: str) -> ModelResponse:
    try:
        return storable_reply(reply)
    except ValueTooLarge as exc:
        raise ConfigurationError(
            f"ScriptedModel cannot use a reply{where} holding {exc}: a saved run could not read it back"
        ) from None


class ScriptedModel:
    """Replays a script of replies, one per call, or answers with a function of the request.

    >>> ScriptedModel(["hello"])                              # one text reply
    >>> ScriptedModel([[ToolCall(name="add", args={"a": 1})], "done"])
    >>> ScriptedModel(lambda request: ModelResponse(...))     # sync or async function

    Items that are exceptions are raised (use :class:`loopwright.ModelError` to test retries).
    Asking for more replies than the script holds raises :class:`ScriptExhaustedError`.
    Every request received is kept in ``requests``, as it was sent (its messages as they were
    then: a request's ``messages`` is the run's history itself, which goes on growing).
    """

    def __init__(self, script: Sequence[ScriptItem] | ReplyFunction, *, name: str = "scripted") -> None:
        self.name = name
        self._seen: list[tuple[ModelRequest, int]] = []
        self._function: ReplyFunction | None = None
        self.instant = not callable(script)
        """Replies from a list: each answered at once (the engine bounds and checks no such call)."""
        self._replies: list[ModelResponse | BaseException] = []
        if callable(script):
            self._function = script
        elif isinstance(script, str):
            raise ConfigurationError(
                "ScriptedModel takes a list of replies; wrap a single text reply in a list: "
                f"ScriptedModel([{script!r}])"
            )
        else:
            self._replies = [to_response(item, i) for i, item in enumerate(script)]
        self._next = 0

    @property
    def script(self) -> list[ModelResponse | BaseException]:
        """The replies this model was given (empty for a function-backed model)."""
        return list(self._replies)

    @property
    def requests(self) -> list[ModelRequest]:
        """The requests received, each with the messages it was sent with."""
        return [
            r if len(r.messages) == n else r.model_copy(update={"messages": list(r.messages[:n])})
            for r, n in self._seen
        ]

    @property
    def remaining(self) -> int:
        """Replies not yet used (0 for a function-backed model)."""
        return len(self._replies) - self._next

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self._seen.append((request, len(request.messages)))
        if self._function is not None:
            reply = self._function(request)
            if inspect.isawaitable(reply):
                reply = await reply
            if not isinstance(reply, ModelResponse):
                raise ConfigurationError(
                    f"ScriptedModel's function returned {type(reply).__name__}; it must return a ModelResponse"
                )
            return storable_reply(reply)
        if self._next >= len(self._replies):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} ran out of script: it was asked for reply "
                f"{self._next + 1} but holds {len(self._replies)}; add replies to the script, or "
                "end it with a text reply so the agent stops"
            )
        item = self._replies[self._next]
        self._next += 1
        if isinstance(item, BaseException):
            raise item
        return item
