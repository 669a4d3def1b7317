"""Plain Python functions become tools.

The name is the function's, the description its docstring, the JSON schema comes from its type
hints (via pydantic), and arguments are validated by pydantic before the call. A parameter named
``ctx`` (or annotated ``RunContext``) receives the run context and is not part of the schema.

Sync tools run inline on the event loop (they are usually quick); mark a slow or blocking one
``@tool(blocking=True)`` to run it in a worker thread, where a timeout can also cut it short.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json, to_jsonable_python

from .errors import ConfigurationError
from .events import ToolSpec

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SIMPLE = (str, int, float, bool, type(None))


class ArgumentsError(Exception):
    """The model's arguments did not validate; the message is written for the model."""


@dataclass(frozen=True, slots=True)
class Pending:
    """Returned by a long-running tool (``@tool(long_running=True)``): the call's result is not
    ready; the run suspends until it is supplied with ``Runner.resume``."""

    detail: str = ""


def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (the text before an ``Args:`` section) and per-parameter descriptions."""
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            m = _ARG_LINE.match("    " + line if not line.startswith(" ") else line)
            if line and not line.startswith(" ") and line.rstrip().endswith(":"):
                in_args = False  # the next section (Returns:, Raises:) starts
            elif m and (not line.startswith("        ")):
                current = m.group(1).lstrip("*")
                params[current] = m.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
            continue
        description.append(line)
    return "\n".join(description).strip(), params


def _is_ctx_param(param: inspect.Parameter, hint: Any) -> bool:
    if param.name == "ctx":
        return True
    return getattr(hint, "__name__", None) == "RunContext"


class Tool:
    """A callable the model may ask for. Build one with :func:`tool` (or pass a plain function
    in ``Agent(tools=[...])``, which wraps it)."""

    __slots__ = (
        "blocking",
        "credentials",
        "ctx_param",
        "description",
        "fn",
        "input_model",
        "is_async",
        "long_running",
        "name",
        "requires_confirmation",
        "spec",
        "timeout_s",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        blocking: bool = False,
        localns: dict[str, Any] | None = None,
        requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
        long_running: bool = False,
        credentials: bool = False,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(f"a tool must be a function; got {fn!r}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.match(self.name):
            raise ConfigurationError(
                f"tool name {self.name!r} is not allowed: use letters, digits, '_' or '-' "
                "(at most 64, not starting with a digit); pass name=... to @tool"
            )
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigurationError(f"tool {self.name!r}: timeout_s must be positive, got {timeout_s}")
        self.timeout_s = timeout_s
        self.blocking = blocking
        self.requires_confirmation = requires_confirmation
        self.long_running = long_running
        self.credentials = credentials
        self.is_async = inspect.iscoroutinefunction(fn)
        doc_description, param_docs = _split_docstring(fn.__doc__ or "")
        self.description = description if description is not None else doc_description
        if not self.description:
            raise ConfigurationError(
                f"tool {self.name!r} has no description: give the function a docstring that "
                "tells the model what it does, or pass description=... to @tool"
            )
        self.ctx_param: str | None = None
        self.input_model = self._build_input_model(param_docs, localns)
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        self.spec = ToolSpec(name=self.name, description=self.description, input_schema=schema)

    def _build_input_model(self, param_docs: dict[str, str], localns: dict[str, Any] | None) -> type[BaseModel]:
        try:
            hints = get_type_hints(self.fn, localns=localns)
        except Exception as exc:  # unresolvable forward reference
            raise ConfigurationError(f"tool {self.name!r}: cannot read its type hints ({exc})") from exc
        fields: dict[str, Any] = {}
        for param in inspect.signature(self.fn).parameters.values():
            hint = hints.get(param.name, Any)
            if _is_ctx_param(param, hint):
                self.ctx_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ConfigurationError(
                    f"tool {self.name!r}: parameter {param.name!r} is *args, **kwargs or "
                    "positional-only; tools take named parameters only, so the model can fill them"
                )
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hint, Field(default, description=param_docs.get(param.name)))
        model_name = "".join(part.capitalize() for part in re.split(r"[_-]", self.name)) + "Args"
        return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)

    @property
    def can_wait(self) -> bool:
        """Calls of this tool may suspend the run (confirmation, credentials, long-running)."""
        return bool(self.requires_confirmation) or self.long_running or self.credentials

    def needs_confirmation(self, kwargs: dict[str, Any]) -> bool:
        """Whether this call (its validated arguments) must be approved before it runs."""
        rule = self.requires_confirmation
        return bool(rule(kwargs)) if callable(rule) else bool(rule)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The validated keyword arguments, or :class:`ArgumentsError` saying what was wrong."""
        try:
            return dict(self.input_model.model_validate(args).__dict__)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                + (f" (got {err['input']!r})" if err["type"] not in ("missing", "extra_forbidden") else "")
                for err in exc.errors(include_url=False)
            )
            raise ArgumentsError(f"invalid arguments for tool {self.name!r}: {problems}") from None

    async def invoke(self, kwargs: dict[str, Any], ctx: Any) -> Any:
        """Call the function with validated ``kwargs`` (and ``ctx`` if it takes one)."""
        if self.ctx_param is not None:
            kwargs[self.ctx_param] = ctx
        if self.is_async:
            return await self.fn(**kwargs)
        if self.blocking:
            return await asyncio.to_thread(self.fn, **kwargs)
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):  # a sync function that returned a coroutine
            return await result
        return result

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


class ToolValueError(ValueError):
    """A tool returned a value that cannot become JSON; the message is written for the model."""


_CONTAINERS = (list, tuple, dict, set, frozenset)
_TEXT = (str, bytes, bytearray, memoryview)


def _bytes_text(value: bytes | bytearray | memoryview) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolValueError(
            f"returned a {type(value).__name__} value of {len(value)} bytes, not UTF-8 text; a tool result is "
            "JSON: return str (decode the bytes), or base64-encode binary data into a str"
        ) from None


def _lazy(value: Any) -> str | None:
    """The type name of an iterator found in ``value`` (JSON conversion would drain it, and an
    endless one would never end), or None. Containers are walked once each (cycles are left to
    the conversion, which names them)."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _SIMPLE or kind in _TEXT:
            continue
        if kind in _CONTAINERS or isinstance(item, _CONTAINERS):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
            if isinstance(item, dict):
                stack.extend(item.keys())
        elif isinstance(item, Iterator):
            return kind.__name__
    return None


def _fallback(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytes_text(value)
    return str(value)


def to_json_value(value: Any) -> Any:
    """A tool's return value as JSON data. Pydantic models and dataclasses become dicts, UTF-8
    bytes their text, sets lists, and other objects their ``str``. A value that cannot become
    JSON (bytes that are not UTF-8, an iterator or generator anywhere in it, a cycle, nesting
    too deep, an object whose ``str`` raises) raises :class:`ToolValueError` naming its type."""
    kind = type(value)
    if kind in _SIMPLE:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytes_text(value)
    lazy = _lazy(value)
    if lazy is not None:
        where = "returned" if type(value).__name__ == lazy else f"returned a {kind.__name__} that contains"
        raise ToolValueError(
            f"{where} a {lazy} (an iterator), which JSON cannot hold and which may never end; return a list instead"
        )
    try:
        return to_jsonable_python(value, fallback=_fallback)
    except ToolValueError as exc:
        raise ToolValueError(f"returned a {kind.__name__} that contains {str(exc).removeprefix('returned ')}") from None
    except Exception as exc:  # a cycle, nesting too deep, a __str__ that raises
        raise ToolValueError(
            f"returned a {kind.__name__}, which cannot become JSON ({type(exc).__name__}: {exc}); return plain "
            "data: str, numbers, lists and dicts of them, a pydantic model or a dataclass"
        ) from None


CUT_NOTE = "\n[... cut: the result was {size} characters, more than max_tool_result_chars={cap}]"


def capped(content: Any, cap: int | None) -> Any:
    """``content`` as it goes to the model: whole when it fits in ``cap`` characters (as JSON
    text, for structured data); else its first ``cap`` characters and a note saying so."""
    if cap is None:
        return content
    if type(content) is str:
        if len(content) <= cap:
            return content
        text = content
    elif type(content) in _SIMPLE:
        return content
    else:
        text = to_json(content).decode()
        if len(text) <= cap:
            return content
    return text[:cap] + CUT_NOTE.format(size=len(text), cap=cap)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    blocking: bool = False,
    requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
    long_running: bool = False,
    credentials: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    blocking: bool = False,
    requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
    long_running: bool = False,
    credentials: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a function: ``@tool`` or ``@tool(name=..., timeout_s=...)``.

    - ``requires_confirmation``: True, or a function of the validated arguments: such calls do
      not run until approved (the run suspends; ``Runner.resume`` with ``approve()``/``deny()``);
    - ``long_running``: the tool may return :class:`Pending`; the run waits for the result;
    - ``credentials``: the tool may raise :class:`CredentialRequired`; the run waits for it.

    Type hints may name classes local to the function that applies the decorator."""
    localns = dict(sys._getframe(1).f_locals)
    if fn is not None:
        return Tool(fn, localns=localns)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            timeout_s=timeout_s,
            blocking=blocking,
            localns=localns,
            requires_confirmation=requires_confirmation,
            long_running=long_running,
            credentials=credentials,
        )

    return wrap


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    return obj if isinstance(obj, Tool) else Tool(obj)
