"""Counting where the work happens: a model wrapper that counts the calls made *inside* the
model (and the tokens and cost its replies report), and tools that count their own runs.

A property that checks a budget against :class:`~loopwright.RunResult`'s own counters checks the
engine against itself; these count independently, so a budget that leaks across nesting
(a workflow's children, ``agent_tool``, transfers) shows::

    model = CountingModel(ScriptedModel([...]))
    tools = CountingTools()
    agent = Agent(name="a", model=model, tools=[tools.wrap(search)], limits=Limits(max_iterations=6))
    result = Runner(agent).run_sync("hi")
    assert model.passes <= 6 and tools.runs <= (agent.limits.max_tool_calls or tools.runs)

One :class:`CountingModel` (or one :class:`CountingTools`) may be shared by every agent of a tree:
the counts are the tree's.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

from ..data.events import ModelRequest, ModelResponse
from ..models.prices import cost_of
from ..runtime.tools import Tool


class CountingModel:
    """Wraps any model; counts what reaches it.

    - ``calls``: every call of ``complete`` (or ``stream``) made, failed ones included;
    - ``salvages``: those among them sent with ``tool_choice="none"`` (salvage's last call);
      ``passes`` is ``calls - salvages``;
    - ``input_tokens``, ``output_tokens``, ``total_tokens``: as the replies report them;
    - ``cost_usd``: what the replies cost (their ``usage.cost_usd``, else the price of the model
      named, as the engine prices them); None once a reply's cost is unknown.

    Every other attribute (``name``, ``model``, ...) is the wrapped model's.
    """

    def __new__(cls, model: Any) -> CountingModel:
        if cls is CountingModel and callable(getattr(model, "stream", None)):
            cls = _CountingStreamingModel  # a model that streams: counted as it streams
        return object.__new__(cls)

    def __init__(self, model: Any) -> None:
        self.inner = model
        self.calls = 0
        self.salvages = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd: Decimal | None = Decimal(0)
        self._lock = threading.Lock()

    @property
    def passes(self) -> int:
        """Calls made with tools allowed (every call but salvage's)."""
        return self.calls - self.salvages

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # (not set yet: no recursion)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _sent(self, request: ModelRequest) -> None:
        with self._lock:
            self.calls += 1
            if request.tool_choice == "none":
                self.salvages += 1

    def _got(self, response: ModelResponse) -> None:
        usage = response.usage
        cost = usage.cost_usd
        if cost is None and (usage.total_tokens or usage.requests):
            name = response.model or getattr(self.inner, "model", None)
            cost = cost_of(name, usage) if isinstance(name, str) else None
        with self._lock:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            if cost is None and (usage.total_tokens or usage.requests):
                self.cost_usd = None
            elif self.cost_usd is not None and cost is not None:
                self.cost_usd += cost

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self._sent(request)
        response: ModelResponse = await self.inner.complete(request)
        if isinstance(response, ModelResponse):
            self._got(response)
        return response

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *dir(self.inner)})


class _CountingStreamingModel(CountingModel):
    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self._sent(request)
        async for item in self.inner.stream(request):
            if isinstance(item, ModelResponse):
                self._got(item)
            yield item


class CountingTools:
    """Counts the runs of the tools it wraps, inside each tool (a call the engine answers
    without running it, past ``max_tool_calls`` or denied, is not counted).

    ``runs``: all runs; ``by_name``: runs per tool name. :meth:`wrap` makes a counting copy
    of a tool (a :class:`~loopwright.Tool`, e.g. an ``agent_tool``, or a plain function);
    :meth:`tool` is ``@tool`` with counting.
    """

    def __init__(self) -> None:
        self.runs = 0
        self.by_name: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _ran(self, name: str) -> None:
        with self._lock:
            self.runs += 1
            self.by_name[name] += 1

    def wrap(self, target: Tool | Callable[..., Any]) -> Tool:
        """A copy of ``target`` that counts each of its runs here."""
        original = target if isinstance(target, Tool) else Tool(target)
        fn, name = original.fn, original.name
        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                self._ran(name)
                return await fn(*args, **kwargs)

        else:

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                self._ran(name)
                return fn(*args, **kwargs)

        return Tool(
            wrapper,
            name=name,
            description=original.description,
            timeout_s=original.timeout_s,
            blocking=original.blocking,
            requires_confirmation=original.requires_confirmation,
            long_running=original.long_running,
            credentials=original.credentials,
            retries=original.retries,
            retry_on=original.retry_on,
            strict=original.spec.strict,
            provider=dict(original.spec.provider) or None,
        )

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """``@tools.tool`` (or ``@tools.tool(name=...)``): :func:`~loopwright.tool`, counted."""

        def make(f: Callable[..., Any]) -> Tool:
            return self.wrap(Tool(f, **options))

        return make if fn is None else make(fn)


__all__ = ["CountingModel", "CountingTools"]
