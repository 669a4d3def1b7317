"""Plain Python functions become tools.

The name is the function's, the description its docstring, the JSON schema comes from its type
hints (via pydantic), and arguments are validated by pydantic before the call. A parameter named
``ctx`` (or annotated ``RunContext``) receives the run context and is not part of the schema.

Sync tools run in a worker thread, so a slow or blocking one never stalls the event loop and
its timeout holds (the model is told it timed out; the thread cannot be stopped, so the call
may still complete: its late result is logged). Threads of timed-out calls never block fresh
calls: a call that finds no idle thread gets a new one. ``@tool(blocking=False)`` runs a quick
sync tool inline on the loop instead (cheaper; no timeout can cut it short).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import operator
import queue
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from types import FunctionType, MappingProxyType
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json, to_jsonable_python

from ..data.errors import ConfigurationError
from ..data.events import DocumentPart, ImagePart, ToolSpec, sniff_media_type
from ..data.values import MAX_DEPTH, MAX_INT_DIGITS, ValueTooLarge, clean_text, int_fits, storable
from .log import get_logger

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SIMPLE = (str, int, float, bool, type(None))
_PLAIN = (str, int, float, bool)


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
        self.plain: dict[str, type] | None = None
        """Each parameter's type, when every one is a plain ``str``, ``int``, ``float`` or
        ``bool`` (no constraint, no default): arguments of exactly those types need no
        validation (:meth:`validate`)."""
        self.input_model = self._build_input_model(param_docs, localns)
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        self.spec = ToolSpec(name=self.name, description=self.description, input_schema=schema)

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
            except _Carried as carried:
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


class ToolValueError(ValueError):
    """A tool returned a value that cannot become JSON; the message is written for the model."""


_CONTAINERS = (list, tuple, dict, set, frozenset)
_TEXT = (str, bytes, bytearray, memoryview)


def _bytes_text(value: bytes | bytearray | memoryview) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolValueError(
            f"returned a {type(value).__name__} value of {len(value)} bytes, neither UTF-8 text nor an image (PNG, "
            "JPEG, GIF, WebP) or a PDF; return str (decode the bytes), an ImagePart or a DocumentPart, or "
            "base64-encode other binary data into a str"
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
    """A tool's return value as JSON data a saved run can hold and read back. Pydantic models and
    dataclasses become dicts, the bytes of an image or a PDF its part (``ImagePart``/``DocumentPart``),
    other UTF-8 bytes their text, sets lists, other objects their ``str``, and lone surrogates in
    text U+FFFD (:mod:`loopwright.values`). A value that cannot become JSON (bytes that are not
    UTF-8, an iterator or generator anywhere in it, a cycle, an object whose ``str`` raises) or
    that a saved run could not read back (an int of more than ``MAX_INT_DIGITS`` digits, nesting
    deeper than ``MAX_DEPTH``) raises :class:`ToolValueError` naming its type."""
    kind = type(value)
    if kind is str:
        return clean_text(value)
    if kind in _SIMPLE:
        if kind is int and not int_fits(value):
            raise ToolValueError(f"returned an int of more than {MAX_INT_DIGITS} digits, {_UNREADABLE}; return a str")
        return value
    if isinstance(value, bytes | bytearray | memoryview):  # an image or a PDF becomes its part
        return _binary(bytes(value))
    lazy = _lazy(value)
    if lazy is not None:
        where = "returned" if type(value).__name__ == lazy else f"returned a {kind.__name__} that contains"
        raise ToolValueError(
            f"{where} a {lazy} (an iterator), which JSON cannot hold and which may never end; return a list instead"
        )
    try:
        try:
            plain = to_jsonable_python(value, fallback=_fallback)
        except UnicodeEncodeError:  # a key with a lone surrogate (pydantic writes keys as UTF-8)
            plain = to_jsonable_python(_keys_cleaned(value, MAX_DEPTH), fallback=_fallback)
        return storable(plain)
    except ToolValueError as exc:
        raise ToolValueError(f"returned a {kind.__name__} that contains {str(exc).removeprefix('returned ')}") from None
    except ValueTooLarge as exc:
        fix = "return it as a str" if str(exc).startswith("an int") else "flatten it, or return it as a str"
        raise ToolValueError(f"returned a {kind.__name__} holding {exc}, {_UNREADABLE}; {fix}") from None
    except Exception as exc:  # a cycle, nesting too deep, a __str__ that raises
        raise ToolValueError(
            f"returned a {kind.__name__}, which cannot become JSON ({type(exc).__name__}: {exc}); return plain "
            "data: str, numbers, lists and dicts of them, a pydantic model or a dataclass"
        ) from None


_UNREADABLE = "which a saved run could not read back"


def _keys_cleaned(value: Any, depth: int) -> Any:
    """``value`` with the text of its dicts' keys cleaned (:func:`~loopwright.values.clean_text`),
    models and dataclasses as dicts of their fields: what is left for ``to_jsonable_python``."""
    if depth < 0:
        raise ValueTooLarge(f"a {type(value).__name__} nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, BaseModel):
        value = value.model_dump()
    elif is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in fields(value)}
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: _keys_cleaned(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_keys_cleaned(v, depth - 1) for v in value]
    return value


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


def _binary(data: bytes) -> Any:
    kind = sniff_media_type(data)
    if kind == "application/pdf":
        return DocumentPart.from_bytes(data).model_dump(exclude_none=True)
    if kind is not None:
        return ImagePart.from_bytes(data).model_dump(exclude_none=True)
    return _bytes_text(data)


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
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a function: ``@tool`` or ``@tool(name=..., timeout_s=...)``.

    - ``requires_confirmation``: True, or a function of the validated arguments: such calls do
      not run until approved (the run suspends; ``Runner.resume`` with ``approve()``/``deny()``);
    - ``long_running``: the tool may return :class:`Pending`; the run waits for the result;
    - ``credentials``: the tool may raise :class:`CredentialRequired`; the run waits for it;
    - ``blocking=False``: a sync tool runs inline on the event loop (for quick, pure functions:
      it saves a thread hand-off, but nothing can time it out).

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


class RunView:
    """A read-only view of a run's state, for tools: attributes read as in
    :class:`~loopwright.RunState`, lists as tuples, dicts as read-only mappings; setting one is
    an error. A tool keeps its own data in ``ctx.state`` (the session state)."""

    __slots__ = ("_rs",)

    def __init__(self, rs: Any) -> None:
        object.__setattr__(self, "_rs", rs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._rs, name)
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, dict):
            return MappingProxyType(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"a tool cannot set run_state.{name}: the run's state is read-only in tools; keep the tool's data in "
            "ctx.state (the session state)"
        )

    def __repr__(self) -> str:
        return f"RunView({self._rs.run_id!r})"


class ToolContext:
    """What a tool's ``ctx`` parameter receives: ``run_id``, ``agent`` (the active agent),
    ``agents``, ``state`` (the session state: read and write it), ``credentials`` (supplied on
    resume), ``limits``, ``call_id`` and ``idempotency_key`` (stable across a crash and resume),
    and ``run_state`` (a read-only :class:`RunView`: a tool cannot rewind
    the run's counters or rewrite its history)."""

    __slots__ = ("_ctx", "run_state")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.run_state = RunView(ctx.run_state)

    @property
    def run_id(self) -> str:
        return str(self._ctx.run_id)

    @property
    def agent(self) -> Any:
        return self._ctx.agent

    @property
    def agents(self) -> Any:
        return self._ctx.agents

    @property
    def state(self) -> dict[str, Any]:
        return self._ctx.state  # type: ignore[no-any-return]

    @property
    def credentials(self) -> dict[str, Any]:
        return self._ctx.credentials  # type: ignore[no-any-return]

    @property
    def limits(self) -> Any:
        return self._ctx.limits

    @property
    def call_id(self) -> str | None:
        """The id of the tool call being run."""
        return self._ctx.call_id  # type: ignore[no-any-return]

    @property
    def idempotency_key(self) -> str:
        """``run_id:call_id``, the same across a crash and resume: pass it to payment or email
        APIs that take an idempotency key, so the call's work is done once."""
        return self._ctx.idempotency_key  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"ToolContext({self.run_id!r})"


_late_log = logging.getLogger("loopwright")
MAX_TOOL_THREADS = 256
"""At most this many sync tool calls run in threads at once (timed-out ones included)."""


class _Workers:
    """Worker threads for sync tools. A call takes an idle thread or starts a new one, so a
    thread still stuck in a timed-out call never delays a fresh call. Idle threads end after
    ``idle_s``; threads are daemons, so a stuck tool never keeps the process alive."""

    def __init__(self, idle_s: float = 30.0) -> None:
        self.idle_s = idle_s
        self._idle: list[queue.SimpleQueue[Any]] = []
        self._lock = threading.Lock()
        self.threads = 0

    def run(self, fn: Callable[..., Any], kwargs: dict[str, Any], name: str) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        job = (fn, kwargs, contextvars.copy_context(), loop, future, name)
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                if self.threads >= MAX_TOOL_THREADS:
                    raise RuntimeError(
                        f"{self.threads} sync tool calls are still running in threads (timed-out ones included); "
                        "this call was not started"
                    )
                self.threads += 1
                inbox = queue.SimpleQueue()
                threading.Thread(target=self._work, args=(inbox,), name=f"loopwright-tool-{self.threads}",
                                 daemon=True).start()  # fmt: skip
        inbox.put(job)
        return future

    def _work(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            try:
                fn, kwargs, context, loop, future, name = inbox.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # else a call has just taken it: its job is coming
                        self._idle.remove(inbox)
                        self.threads -= 1
                        return
                continue
            value: Any = None
            error: BaseException | None = None
            try:
                value = context.run(fn, **kwargs)
            except BaseException as exc:  # handed to the awaiting task (or logged if none waits)
                error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, value, error, name)
            except RuntimeError:  # the event loop has closed
                _late(name, value, error)
            del fn, kwargs, context, loop, future, value, error
            with self._lock:
                self._idle.append(inbox)


class _Carried(Exception):
    """A BaseException a sync tool raised, on its way from the thread to the awaiting call."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None, name: str) -> None:
    if future.cancelled():
        _late(name, value, error)
    elif error is not None:
        # a BaseException (GeneratorExit, SystemExit, KeyboardInterrupt) travels wrapped: the task
        # would throw it into the outermost coroutine, past every handler below it
        future.set_exception(error if isinstance(error, Exception) else _Carried(error))
    else:
        future.set_result(value)


def _late(name: str, value: Any, error: BaseException | None) -> None:
    """A sync tool finished after its call timed out (or its run ended): say so in the log."""
    try:
        what = f"raised {type(error).__name__}: {error}" if error is not None else f"returned {value!r}"
    except Exception:
        what = f"returned a {type(value).__name__}"
    what = what if len(what) <= 300 else what[:300] + "..."
    _late_log.warning("tool %r finished after it timed out; its result was not used: %s", name, what)
    logger = get_logger()
    if logger.enabled:
        logger.warning("tool_late_result", tool=name, result=what)


WORKERS = _Workers()
"""The worker threads of every sync tool call."""


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
