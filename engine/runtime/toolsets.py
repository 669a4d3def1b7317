"""Toolsets: tools that come from somewhere else (an MCP server), listed when a run starts.

A :class:`Toolset` goes in ``Agent(tools=[...])`` beside plain tools. It is opened (once per
runner, or per ``async with toolset:``), lists its tools as loopwright :class:`~loopwright.Tool`
objects, and says when that list changed (:attr:`Toolset.version`); it is closed with the runner.
:class:`~loopwright.integrations.mcp.McpToolset` is one.

An agent with toolsets sees their tools through :class:`LiveTools`: its ``tools`` mapping and its
``tool_specs`` are the plain tools and, after them, each toolset's current tools (a toolset that
changed is merged again on the next read). An agent without toolsets pays nothing: its ``tools``
is the plain mapping it always was. Under ``Agent(strict_tools=True)`` a toolset's tools are strict
like the agent's own (:func:`strict_default`; a tool's own ``strict`` wins), and so are the tools
``prepare_tools`` returns.

:func:`schema_tool` makes a Tool of a JSON schema and an async function, for toolsets whose tools
are described by a schema rather than by a Python signature: the schema goes to the model as it is.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from types import FunctionType
from typing import Any, Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict, create_model

from ..data.errors import ConfigurationError, LoopwrightError
from ..data.events import ToolSpec
from .tools import ArgumentsError, Tool


class ToolsetError(LoopwrightError, ConnectionError):
    """A toolset could not be opened or listed (its server did not start, could not be
    reached, or went away for good); the message names the server and what it said."""


@runtime_checkable
class Toolset(Protocol):
    """Tools from elsewhere, for ``Agent(tools=[...])``.

    - ``name``: names the toolset in messages;
    - ``can_wait``: some of its tools may suspend the run (they need a confirmation), so the
      agent's machine gets the waiting feature;
    - ``open()`` / ``close()``: counted: the first open connects, the last close disconnects
      (``async with toolset:`` does both);
    - ``list_tools()``: its tools (connecting again if it must), listed once and cached until
      the source says the list changed;
    - ``tools`` and ``version``: the tools as last listed (empty before the first listing) and a
      number that grows each time that list changes (the list-changed signal).
    """

    name: str
    can_wait: bool

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def list_tools(self) -> Sequence[Tool]: ...

    @property
    def tools(self) -> Sequence[Tool]: ...

    @property
    def version(self) -> int: ...


_ANY_ARGS = create_model("ToolsetArgs", __config__=ConfigDict(extra="allow"))
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(name: str, prefix: str = "") -> str:
    """``prefix + name`` as a name the model's API takes: letters, digits, ``_`` and ``-``
    (others become ``_``), at most 64 characters, not starting with a digit."""
    safe = _UNSAFE.sub("_", prefix + name)
    if not safe or safe[0].isdigit():
        safe = "_" + safe
    return safe[:64]


async def _template() -> None:
    """A tool with every option at its default."""


_DEFAULTS = Tool(_template)


class SchemaTool(Tool):
    """A tool described by a JSON schema (sent to the model as it is) and run by an async
    function of the arguments. Arguments are checked only for shape (an object holding the
    required keys): the tool's owner (an MCP server) validates the rest and says what is wrong."""

    __slots__ = ("required", "source")

    def __init__(
        self,
        name: str,
        description: str,
        schema: Mapping[str, Any],
        call: Callable[..., Awaitable[Any]],
        *,
        source: str,
        timeout_s: float | None = None,
        requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
    ) -> None:
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigurationError(f"tool {name!r}: timeout_s must be positive, got {timeout_s}")
        for slot in Tool.__slots__:  # every field a Tool has, at its default (then those set here)
            setattr(self, slot, getattr(_DEFAULTS, slot))
        self.fn = call
        self.name = name
        self.description = description or f"the tool {name} of {source}"
        self.timeout_s = timeout_s
        self.blocking = False
        self.requires_confirmation = requires_confirmation
        self.long_running = False
        self.credentials = False
        self.is_async = True
        self.ctx_param = None
        self.plain = None
        self.input_model: type[BaseModel] = _ANY_ARGS
        input_schema = dict(schema) if schema else {"type": "object", "properties": {}}
        self.spec = ToolSpec(name=name, description=self.description, input_schema=input_schema)
        required = input_schema.get("required")
        self.required: tuple[str, ...] = tuple(r for r in required if isinstance(r, str)) if required else ()
        self.source = source

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise ArgumentsError(f"invalid arguments for tool {self.name!r}: send an object, got {args!r:.100}")
        missing = [key for key in self.required if key not in args]
        if missing:
            raise ArgumentsError(f"invalid arguments for tool {self.name!r}: missing {', '.join(missing)}")
        return dict(args)

    def __repr__(self) -> str:
        return f"SchemaTool({self.name!r}, from {self.source})"


def schema_tool(
    name: str,
    description: str,
    schema: Mapping[str, Any],
    call: Callable[..., Awaitable[Any]],
    *,
    source: str = "a toolset",
    timeout_s: float | None = None,
    requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
) -> Tool:
    """A Tool named ``name`` whose arguments are described by the JSON ``schema`` and whose call
    is ``await call(**arguments)`` (bounded by the tool timeout like any tool's)."""
    return SchemaTool(
        name,
        description,
        schema,
        call,
        source=source,
        timeout_s=timeout_s,
        requires_confirmation=requires_confirmation,
    )


def is_toolset(item: object) -> TypeGuard[Toolset]:
    """``item`` is a toolset (not a tool or a function): it lists tools and can be opened."""
    return type(item) is not FunctionType and not isinstance(item, Tool) and hasattr(item, "list_tools")


class LiveTools(Mapping[str, Tool]):
    """An agent's tools when it has toolsets: its plain tools, then each toolset's tools as last
    listed, merged again whenever a toolset's :attr:`~Toolset.version` moves. A name that two
    sources give is kept from the first (:meth:`check` raises on it when a run starts)."""

    __slots__ = ("_key", "_merged", "_specs", "agent", "plain", "strict", "toolsets")

    def __init__(
        self, agent: str, plain: Mapping[str, Tool], toolsets: Sequence[Toolset], *, strict: bool = False
    ) -> None:
        self.agent = agent
        self.plain = dict(plain)
        self.toolsets = tuple(toolsets)
        self.strict = strict
        self._key: tuple[int, ...] | None = None
        self._merged: dict[str, Tool] = self.plain
        self._specs: tuple[ToolSpec, ...] = ()

    def _current(self) -> dict[str, Tool]:
        key = tuple([ts.version for ts in self.toolsets])
        if key != self._key:
            merged = dict(self.plain)
            for ts in self.toolsets:
                for t in ts.tools:
                    merged.setdefault(t.name, t)
            specs = (t.spec for t in merged.values())
            self._merged, self._key = merged, key
            self._specs = strict_default(specs) if self.strict else tuple(specs)
        return self._merged

    def __getitem__(self, name: str) -> Tool:
        return self._current()[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._current().get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __contains__(self, name: object) -> bool:
        return name in self._current()

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is offered: every tool's spec. A toolset never listed raises (the run
        would otherwise go on without its tools): a runner lists them when a run starts."""
        for ts in self.toolsets:
            if ts.version < 0:
                raise ToolsetError(
                    f"agent {self.agent!r}: toolset {ts.name!r} has not listed its tools; runs started with "
                    "runner.run/stream/resume list them; for runner.start, `await runner.open_toolsets()` first"
                )
        self._current()
        return self._specs

    def check(self) -> None:
        """A name given by two sources raises :class:`ConfigurationError` naming both and the fix."""
        seen = {name: "its own tools" for name in self.plain}
        for ts in self.toolsets:
            for t in ts.tools:
                if t.name in seen:
                    raise ConfigurationError(
                        f"agent {self.agent!r}: the tool name {t.name!r} comes from {seen[t.name]} and from "
                        f"toolset {ts.name!r}; give the toolset a prefix (prefix='{_short(ts.name)}_') or a "
                        "tool_filter that leaves it out"
                    )
                seen[t.name] = f"toolset {ts.name!r}"


def strict_default(specs: Iterable[ToolSpec], known: Sequence[ToolSpec] = ()) -> tuple[ToolSpec, ...]:
    """``specs`` with ``strict=True`` where a tool left it open (``Agent(strict_tools=True)``; a
    tool's own ``strict=False`` stays). A spec that is one of ``known`` (the agent's own specs,
    already defaulted) but for ``strict`` is that one, so the model adapter's per-spec cache of
    definitions keeps hitting when ``prepare_tools`` returns the agent's ``Tool`` objects."""
    by_name = {k.name: k for k in known}
    made: list[ToolSpec] = []
    for spec in specs:
        if spec.strict is None:
            same = by_name.get(spec.name)
            if (
                same is not None
                and same.input_schema is spec.input_schema
                and same.provider is spec.provider
                and same.description == spec.description
                and same.strict is not None
            ):
                spec = same
            else:
                spec = spec.model_copy(update={"strict": True})
        made.append(spec)
    return tuple(made)


def _short(name: str) -> str:
    return tool_name(name.split()[0].rsplit("/", 1)[-1].split(".")[0])[:16] or "ts"


class LiveSpecs:
    """``Agent.tool_specs`` of an agent with toolsets (a non-data descriptor: an agent without
    toolsets holds its own tuple, which wins, so it pays nothing)."""

    def __get__(self, agent: Any, owner: type | None = None) -> tuple[ToolSpec, ...]:
        if agent is None:
            raise AttributeError("tool_specs")
        tools = agent.tools
        if not isinstance(tools, LiveTools):  # (an agent mid-construction)
            raise AttributeError("tool_specs")
        return tools.specs


__all__ = [
    "LiveSpecs",
    "LiveTools",
    "SchemaTool",
    "Toolset",
    "ToolsetError",
    "is_toolset",
    "schema_tool",
    "strict_default",
    "tool_name",
]
