"""Claude (public): :class:`AnthropicModel` and its client hooks. The modules inside (mapping, options,
errors, clients, cuts, tools, facts) are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "AnthropicModel": ".model",
    "Client": ".model",
    "ClientFactory": ".model",
    "to_messages": ".model",
    "to_response": ".model",
    "to_system": ".model",
}

__all__ = [
    "AnthropicModel",
    "Client",
    "ClientFactory",
    "to_messages",
    "to_response",
    "to_system",
]

if TYPE_CHECKING:
    from .model import AnthropicModel as AnthropicModel
    from .model import Client as Client
    from .model import ClientFactory as ClientFactory
    from .model import to_messages as to_messages
    from .model import to_response as to_response
    from .model import to_system as to_system

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
