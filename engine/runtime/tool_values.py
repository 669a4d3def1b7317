"""A tool's return value as JSON data a saved run can hold, and as the text the model is shown.

:func:`to_json_value` turns what a tool returned into plain JSON data (pydantic models and
dataclasses as dicts, image and PDF bytes as their parts) or raises :class:`ToolValueError`
naming what could not become JSON; :func:`capped` cuts a long result to the run's limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json, to_jsonable_python

from ..data.events import DocumentPart, ImagePart, sniff_media_type
from ..data.values import MAX_DEPTH, MAX_INT_DIGITS, ValueTooLarge, clean_text, int_fits, storable

_SIMPLE = (str, int, float, bool, type(None))


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
    text U+FFFD (:mod:`loopwright.data.values`). A value that cannot become JSON (bytes that are not
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
    """``value`` with the text of its dicts' keys cleaned (:func:`~loopwright.data.values.clean_text`),
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
