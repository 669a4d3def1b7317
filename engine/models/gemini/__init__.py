"""Gemini (public): :class:`GeminiModel`. The modules inside (mapping, options, errors, replies) are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "CURRENT": ".model",
    "GeminiModel": ".model",
    "KNOWN": ".model",
}

__all__ = [
    "CURRENT",
    "KNOWN",
    "GeminiModel",
]

if TYPE_CHECKING:
    from .model import CURRENT as CURRENT
    from .model import KNOWN as KNOWN
    from .model import GeminiModel as GeminiModel

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
