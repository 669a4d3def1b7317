"""OpenAI (public): :class:`OpenAIModel` (Responses and Chat Completions, any OpenAI-compatible server).
The modules inside (mapping, options, errors, chat, responses, shared) are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "CURRENT": ".model",
    "Client": ".model",
    "ClientFactory": ".model",
    "KNOWN_MODELS": ".model",
    "OpenAIModel": ".model",
}

__all__ = [
    "CURRENT",
    "KNOWN_MODELS",
    "Client",
    "ClientFactory",
    "OpenAIModel",
]

if TYPE_CHECKING:
    from .model import CURRENT as CURRENT
    from .model import KNOWN_MODELS as KNOWN_MODELS
    from .model import Client as Client
    from .model import ClientFactory as ClientFactory
    from .model import OpenAIModel as OpenAIModel

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
