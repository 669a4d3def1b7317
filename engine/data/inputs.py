"""The user's input to a run: text, or a sequence of parts (text, images, documents).

``Runner.run("Describe this", ...)`` takes a ``str``; ``Runner.run(["What does this show?",
ImagePart.from_path("chart.png"), Path("report.pdf")])`` takes parts. :func:`user_input` checks
the input once, when the run is made, and turns it into what :class:`RunState` keeps: the
``str`` itself, or a tuple of :class:`TextPart`, :class:`ImagePart` and :class:`DocumentPart`.
Items of the sequence may be a ``str`` (text), one of those parts, a path (``pathlib.Path`` or
any ``os.PathLike``) or ``bytes`` of an image (PNG, JPEG, GIF, WebP) or a PDF.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any, TypeAlias

from .errors import ConfigurationError
from .events import DocumentPart, ImagePart, Part, TextPart, sniff_media_type

InputItem: TypeAlias = str | TextPart | ImagePart | DocumentPart | os.PathLike[str] | bytes
UserInput: TypeAlias = str | Sequence[InputItem]
"""What ``Runner.run``, ``run_sync``, ``stream`` and ``start`` take as the user's message."""

_TAKES = (
    "the input is a str, or a sequence of str, TextPart, ImagePart, DocumentPart, a path or bytes of an image or a PDF"
)


def user_input(value: Any) -> str | tuple[Part, ...]:
    """The user's input as a run keeps it; a :class:`ConfigurationError` saying what was wrong
    and what the input takes, for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"the user input must be a str or a sequence of parts, got {type(value).__name__}; "
            f"{_TAKES} (wrap a single part in a list)"
        )
    if not value:
        raise ConfigurationError(f"the user input is an empty sequence; {_TAKES}")
    return tuple(_part(item, index) for index, item in enumerate(value))


def _part(item: Any, index: int) -> Part:
    where = f"item {index} of the user input"
    if isinstance(item, str):
        return TextPart(text=item)
    if isinstance(item, TextPart):
        return item
    if isinstance(item, ImagePart):
        if item.url is None and item.file_id is None and (item.data is None or item.media_type is None):
            raise ConfigurationError(
                f"{where} is an ImagePart with neither a url, a file_id nor data and its media_type; "
                "make it with ImagePart.from_path(), ImagePart.from_bytes() or ImagePart(url=...)"
            )
        return item
    if isinstance(item, DocumentPart):
        if (
            item.url is None
            and item.text is None
            and item.file_id is None
            and (item.data is None or item.media_type is None)
        ):
            raise ConfigurationError(
                f"{where} is a DocumentPart with no url, text, file_id or data and its media_type; "
                "make it with DocumentPart.from_path(), DocumentPart(text=...) or "
                "DocumentPart(url=...)"
            )
        return item
    if isinstance(item, os.PathLike):
        path = pathlib.Path(item)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigurationError(
                f"{where}: cannot read the file {str(path)!r} ({exc.strerror or exc}); give the "
                "path of an existing image or PDF"
            ) from None
        return _binary(data, f"{where} (the file {str(path)!r})", title=path.name)
    if isinstance(item, bytes | bytearray):
        return _binary(bytes(item), where, title=None)
    kind = getattr(item, "type", None)
    what = f"a {type(item).__name__}" + (f" part ({kind!r})" if isinstance(kind, str) else "")
    raise ConfigurationError(f"{where} is {what}, which a user's message cannot carry; {_TAKES}")


def _binary(data: bytes, where: str, title: str | None) -> Part:
    kind = sniff_media_type(data)
    if kind == "application/pdf":
        return DocumentPart.from_bytes(data, title=title)
    if kind is not None:
        return ImagePart.from_bytes(data, kind)
    raise ConfigurationError(
        f"{where} is {len(data)} bytes of neither an image (PNG, JPEG, GIF, WebP) nor a PDF; "
        "give text as a str, and other files as DocumentPart(text=...)"
    )


def input_text(value: str | tuple[Part, ...]) -> str:
    """The input as one line of text for people (logs, the trace page): its text, and a
    bracketed word for each image or document."""
    if isinstance(value, str):
        return value
    words = []
    for part in value:
        if isinstance(part, TextPart):
            words.append(part.text)
        elif isinstance(part, ImagePart):
            words.append(f"[image {part.url}]" if part.url else f"[image {part.media_type}]")
        elif isinstance(part, DocumentPart):
            words.append(f"[document {part.title or part.url or part.media_type or 'text'}]")
    return " ".join(words)


__all__ = ["InputItem", "UserInput", "input_text", "user_input"]
