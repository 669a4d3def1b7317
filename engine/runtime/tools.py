"""Plain Python functions become tools.

The name is the function's, the description its docstring, the JSON schema comes from its type
hints (via pydantic), and arguments are validated by pydantic before the call. A parameter named
``ctx`` (or annotated ``RunContext``) receives the run context and is not part of the schema.

Sync tools run in a worker thread, so a slow or blocking one never stalls the event loop and
its timeout holds (the model is told it timed out; the thread cannot be stopped, so the call
may still complete: its late result is logged). Threads of timed-out calls never block fresh
calls: a call that finds no idle thread gets a new one. ``@tool(blocking=False)`` runs a quick
sync tool inline on the loop instead (cheaper; no timeout can cut it short).

This module is the tool's definition: :class:`Tool`, :func:`tool`, :func:`as_tool`. Beside it:
what a tool returns becomes JSON (:mod:`.tool_values`), what a tool sees of its run
(:mod:`.tool_context`), the threads sync tools run in (:mod:`.tool_threads`); their public names
are importable from here as before.
"""

from __future__ import annotations

import inspect
import operator
import re
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType
from typing import Any, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..data.errors import ConfigurationError
from ..data.events import ToolSpec
from .tool_context import RunView, ToolContext
from .tool_threads import MAX_TOOL_THREADS, WORKERS, Carried
from .tool_values import CUT_NOTE, ToolValueError, capped, to_json_value

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_PLAIN = (str, int, float, bool)


class ArgumentsError(Exception):
    """The model's arguments did not validate; the message is written for the model."""


class RetryTool(Exception):
    """Raised by a tool of ``@tool(retries=N)``: the call failed in a way the model can fix.
    The model reads the message (say what to change) and may call again, at most N times in a
    row, charged to ``Limits.max_tool_retries``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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


def _retry_options(name: str, retries: object, retry_on: object) -> tuple[int, tuple[type[Exception], ...]]:
    if type(retries) is not int or retries < 0:
        raise ConfigurationError(f"tool {name!r}: retries must be a whole number >= 0, got {retries!r}")
    found = (retry_on,) if isinstance(retry_on, type) else retry_on
    if not isinstance(found, tuple | list) or not all(
        isinstance(c, type) and issubclass(c, Exception) and not issubclass(c, RetryTool) for c in found
    ):
        raise ConfigurationError(
            f"tool {name!r}: retry_on takes exception classes (e.g. retry_on=(TimeoutError, ConnectionError)), "
            f"got {retry_on!r}"
        )
    if found and not retries:
        raise ConfigurationError(f"tool {name!r}: retry_on={retry_on!r} needs retries=N (how many times to try again)")
    return retries, tuple(found)


def _is_ctx_param(param: inspect.Parameter, hint: Any) -> bool:
    if param.name == "ctx":
        return True
    hint = get_origin(hint) or hint  # (``RunContext[MyDeps]``: the class it parametrises)
    return getattr(hint, "__name__", None) in ("RunContext", "ToolContext")


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
        "plain",
        "requires_confirmation",
        "retries",
        "retry_on",
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
        blocking: bool = True,
        localns: dict[str, Any] | None = None,
        requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
        long_running: bool = False,
        credentials: bool = False,
        retries: int = 0,
        retry_on: tuple[type[Exception], ...] = (),
        strict: bool | None = None,
        provider: dict[str, dict[str, Any]] | None = None,
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
        self.retries, self.retry_on = _retry_options(self.name, retries, retry_on)
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
        self.plain: dict[str, type] | None = None
        """Each parameter's type, when every one is a plain ``str``, ``int``, ``float`` or
        ``bool`` (no constraint, no default): arguments of exactly those types need no
        validation (:meth:`validate`)."""
        self.input_model = self._build_input_model(param_docs, localns)
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        if strict not in (None, True, False):
            raise ConfigurationError(f"tool {self.name!r}: strict must be True, False or None, got {strict!r}")
        self.spec = ToolSpec(
            name=self.name, description=self.description, input_schema=schema, strict=strict, provider=provider or {}
        )

    def _build_input_model(self, param_docs: dict[str, str], localns: dict[str, Any] | None) -> type[BaseModel]:
        try:
            hints = get_type_hints(self.fn, localns=localns, include_extras=True)  # (Annotated constraints kept)
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
            if param.name not in hints:
                raise ConfigurationError(
                    f"tool {self.name!r}: parameter {param.name!r} has no type annotation, so the model would not "
                    f"know what to send; annotate it, e.g. `{param.name}: str` (`{param.name}: Any` takes anything)"
                )
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hint, Field(default, description=param_docs.get(param.name)))
        model_name = "".join(part.capitalize() for part in re.split(r"[_-]", self.name)) + "Args"
        plain = {name: hint for name, (hint, info) in fields.items() if hint in _PLAIN and info.is_required()}
        if len(plain) == len(fields):
            self.plain = plain
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
        plain = self.plain
        if plain is not None and type(args) is dict and len(args) == len(plain):
            for name, value in args.items():
                if plain.get(name) is not type(value):
                    break
            else:  # every parameter, each of exactly its type: what validation would give back
                return args.copy()
        try:
            # the validator itself (not model_validate's wrapper); the instance is thrown away, so
            # its __dict__ is the caller's to keep and change (invoke adds ``ctx`` to it)
            return self.input_model.__pydantic_validator__.validate_python(args).__dict__  # type: ignore[no-any-return]
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
            try:
                return await WORKERS.run(self.fn, kwargs, self.name)
            except Carried as carried:
                raise carried.error from None
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):  # a sync function that returned a coroutine
            return await result
        return result

    @classmethod
    def _of(cls, fn: Callable[..., Any], fields: dict[str, Any]) -> Tool:
        """A Tool of ``fn`` with ``fields`` (every slot but ``fn``), built without reading ``fn``."""
        made = cls.__new__(cls)
        made.fn = fn
        for key, value in fields.items():
            setattr(made, key, value)
        return made

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


_COPIED = tuple(slot for slot in Tool.__slots__ if slot != "fn")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    blocking: bool = True,
    requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
    long_running: bool = False,
    credentials: bool = False,
    retries: int = 0,
    retry_on: tuple[type[Exception], ...] = (),
    strict: bool | None = None,
    provider: dict[str, dict[str, Any]] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    blocking: bool = True,
    requires_confirmation: bool | Callable[[dict[str, Any]], bool] = False,
    long_running: bool = False,
    credentials: bool = False,
    retries: int = 0,
    retry_on: tuple[type[Exception], ...] = (),
    strict: bool | None = None,
    provider: dict[str, dict[str, Any]] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a function: ``@tool`` or ``@tool(name=..., timeout_s=...)``.

    - ``requires_confirmation``: True, or a function of the validated arguments: such calls do
      not run until approved (the run suspends; ``Runner.resume`` with ``approve()``/``deny()``);
    - ``long_running``: the tool may return :class:`Pending`; the run waits for the result;
    - ``credentials``: the tool may raise :class:`CredentialRequired`; the run waits for it;
    - ``blocking=False``: a sync tool runs inline on the event loop (for quick, pure functions:
      it saves a thread hand-off, but nothing can time it out).
    - ``retries=N``: the tool may raise :class:`RetryTool` ("what to fix"), and arguments that do
      not validate are sent back the same way: the model may call again, at most N times in a
      row; ``retry_on=(SomeError, ...)``: those exceptions are transient, and act calls the tool
      again itself (at most N times, after ``Limits.retry_delay``). Every retry is charged to
      ``Limits.max_tool_retries`` and is a ``tool_retried`` event.
    - ``strict=True``: the provider holds the model's arguments to the schema exactly (strict tool
      use; ``Agent(strict_tools=True)`` makes it every tool's default); ``provider``: extra fields
      of the tool's definition per provider, e.g. ``{"anthropic": {"defer_loading": True}}``.

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
            retries=retries,
            retry_on=retry_on,
            strict=strict,
            provider=provider,
        )

    return wrap


_MADE: weakref.WeakKeyDictionary[FunctionType, tuple[list[Any], dict[str, Any]]] = weakref.WeakKeyDictionary()
"""What ``as_tool`` made of each plain function: the function's shape when it was made, and the
Tool's fields but ``fn`` (so the entry does not keep the function alive; it goes with it)."""


_END = object()  # closes each variable-length part of a shape


def _shape(fn: FunctionType) -> list[Any] | None:
    """Everything ``Tool(fn)`` reads of ``fn``, to be compared member by member by identity: its
    code (parameters, async or not), name, docstring, defaults, annotations, attributes
    (``__signature__``, ``__wrapped__``, markers), the same of the function it wraps; None when
    it wraps something other than a function."""
    shape: list[Any] = []
    f: Any = fn
    while True:
        shape += (f.__code__, f.__name__, f.__doc__, f.__defaults__, getattr(f, "__type_params__", None))
        for mapping in (f.__kwdefaults__ or {}, f.__annotations__, f.__dict__):
            for pair in mapping.items():
                shape += pair
            shape.append(_END)
        f = f.__dict__.get("__wrapped__")
        if f is None:
            return shape
        if type(f) is not FunctionType:
            return None


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    """``obj`` if it is a Tool, else ``Tool(obj)``. A plain function is made a Tool once: a later
    call with the same function, unchanged since, copies that Tool (its input model, its spec)
    instead of building a pydantic model again, so an app may build an Agent per request.

    A change to the function (its docstring, annotations, defaults, name, code or attributes, or
    those of the function it ``functools.wraps``) makes it again. Not seen (as with ``@tool``,
    which reads them once too): a module global that a string annotation names, rebound later,
    and a mutable default changed in place. Other callables (bound methods, partials) are made
    each time."""
    if type(obj) is not FunctionType:
        return obj if isinstance(obj, Tool) else Tool(obj)
    shape = _shape(obj)
    if shape is None:
        return Tool(obj)
    made = _MADE.get(obj)
    if made is not None and len(made[0]) == len(shape) and all(map(operator.is_, made[0], shape)):
        return Tool._of(obj, made[1])
    new = Tool(obj)
    _MADE[obj] = (shape, {key: getattr(new, key) for key in _COPIED})
    return new


__all__ = [
    "CUT_NOTE",
    "MAX_TOOL_THREADS",
    "WORKERS",
    "ArgumentsError",
    "Pending",
    "RetryTool",
    "RunView",
    "Tool",
    "ToolContext",
    "ToolValueError",
    "as_tool",
    "capped",
    "to_json_value",
    "tool",
]
