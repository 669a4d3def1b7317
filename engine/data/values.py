"""What a saved run can hold and read back: the one place its values' limits are kept.

A run's values (tool results, model text, tool call arguments) are written as UTF-8 JSON, by
``RunState.to_json`` and by every store, and read back by JSON parsers that refuse some of what
Python holds. So a value is made storable as it enters the run, the same way with and
without a store, and never refused later, when the run is saved or loaded:

- a lone surrogate (``"a\\ud800b"``: Python holds it, UTF-8 cannot) becomes U+FFFD, and a
  high surrogate followed by a low one becomes the character they encode;
- an int of more than :data:`MAX_INT_DIGITS` digits is refused (Python's own ``int``/``str``
  limit, which ``json.loads`` applies, and pydantic's JSON parser's);
- a value nested more than :data:`MAX_DEPTH` containers deep is refused (pydantic's JSON parser
  stops at 200 levels, and a value sits a few levels down in a saved state).

:func:`storable` says what is refused (:class:`ValueTooLarge`); a tool's value becomes an error
result the model reads (:func:`loopwright.runtime.tools.to_json_value`), a model's reply a malformed one.
"""

from __future__ import annotations

import re
from typing import Any

from .parts import ModelResponse, ProviderPart, TextPart, ThoughtPart, ToolCall

MAX_DEPTH = 100
"""Containers (lists, dicts) a value may nest: a saved run reads back up to 200 levels."""
MAX_INT_DIGITS = 4300
"""Decimal digits an int may have (Python's default ``sys.get_int_max_str_digits()``)."""
_INT_LIMIT: int = 10**MAX_INT_DIGITS
INT_BITS = _INT_LIMIT.bit_length() - 1
"""An int of at most this many bits (``value.bit_length()``) has at most MAX_INT_DIGITS digits."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class ValueTooLarge(ValueError):
    """A value a saved run could not read back; the message says what (``"an int of more than ..."``)."""


def clean_text(text: str) -> str:
    """``text`` as UTF-8 can hold it: each lone surrogate replaced by U+FFFD, a surrogate pair
    joined into its character (``text`` itself when it holds none: the usual case costs a scan)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def int_fits(value: int) -> bool:
    """Whether ``value`` has at most :data:`MAX_INT_DIGITS` digits."""
    return value.bit_length() <= INT_BITS or -_INT_LIMIT < value < _INT_LIMIT


def storable(value: Any) -> Any:
    """JSON data (dicts, lists, str, numbers, bools, None, as ``to_jsonable_python`` makes it)
    as a saved run holds it and reads it back: its text cleaned (:func:`clean_text`; ``value``
    itself when nothing changed). Raises :class:`ValueTooLarge` for an int of more than
    MAX_INT_DIGITS digits or nesting deeper than MAX_DEPTH."""
    if is_storable(value, MAX_DEPTH):  # the usual case: a look, nothing built
        return value
    return _storable(value, MAX_DEPTH)


def is_storable(value: Any, depth: int = MAX_DEPTH) -> bool:  # noqa: C901, PLR0912 (scalars written out: the hot path)
    """Whether :func:`storable` keeps ``value`` as it is (False: it must be cleaned, or it is
    refused); a look at each item, nothing built."""
    kind = type(value)
    if kind is str:
        return value.isascii() or _SURROGATE.search(value) is None
    if kind is int:
        bits: int = value.bit_length()
        return bits <= INT_BITS
    if kind is dict or kind is list:
        if not depth:
            return False
        if kind is dict:
            for key in value:
                if type(key) is str and not key.isascii() and _SURROGATE.search(key) is not None:
                    return False
            value = value.values()
        for item in value:  # (a loop: all() would add a generator's frame per container)
            kind = type(item)
            if kind is int:  # (the scalars' cases written out: no frame per item)
                if item.bit_length() > INT_BITS:
                    return False
            elif kind is str:
                if not item.isascii() and _SURROGATE.search(item) is not None:
                    return False
            elif kind is float or kind is bool or item is None:
                continue
            elif not is_storable(item, depth - 1):
                return False
        return True
    return kind is not tuple  # float, bool, None (and a tuple: storable makes it a list)


def _storable(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return clean_text(value)
    if kind is int:
        if not int_fits(value):
            raise ValueTooLarge(f"an int of more than {MAX_INT_DIGITS} digits")
        return value
    if kind is dict or kind is list:
        if not depth:
            raise ValueTooLarge(f"a {kind.__name__} nested more than {MAX_DEPTH} levels deep")
        if kind is list:
            return [_storable(item, depth - 1) for item in value]
        return {clean_text(k) if type(k) is str else k: _storable(v, depth - 1) for k, v in value.items()}
    if kind is tuple:  # (JSON data holds lists; a tuple is kept as one)
        return tuple(_storable(list(value), depth))
    return value


def storable_reply(response: ModelResponse) -> ModelResponse:
    """``response`` as a saved run holds it, the same with and without a store: lone surrogates
    in its text, thoughts, calls and provider blocks replaced by U+FFFD (see above;
    ``response`` itself when it holds none). A call's arguments or a provider block that a saved
    run could not read back (too deep, an int too long) raise :class:`ValueTooLarge`."""
    parts = response.parts
    new: list[Any] | None = None
    for i, part in enumerate(parts):
        kind = type(part)
        fields = part.__dict__
        if kind is ToolCall:
            ident, name, args = fields["id"], fields["name"], fields["args"]
            if ident.isascii() and name.isascii() and is_storable(args):
                continue
            part = part.model_copy(update={"id": clean_text(ident), "name": clean_text(name), "args": storable(args)})
        elif kind is TextPart or kind is ThoughtPart:
            text = fields["text"]
            if text.isascii() or (cleaned := clean_text(text)) is text:
                continue
            part = part.model_copy(update={"text": cleaned})
        elif kind is ProviderPart:
            text, block = fields["text"], fields["block"]
            if text.isascii() and is_storable(block):
                continue
            part = part.model_copy(update={"text": clean_text(text), "block": storable(block)})
        else:
            continue
        if new is None:
            new = list(parts)
        new[i] = part
    return response if new is None else response.model_copy(update={"parts": tuple(new)})
