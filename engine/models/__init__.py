"""Model adapters (public): the protocol every adapter implements, the scripted model, prices.

One package per provider: :mod:`loopwright.models.anthropic`, :mod:`loopwright.models.openai`,
:mod:`loopwright.models.gemini`. The other modules here (``base``, ``scripted``, ``clients``,
``http_errors``, ``prices``, ``spec``) are private: what the adapters share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "MAX_RETRY_AFTER_S": ".http_errors",
    "cost_of": ".prices",
    "model_from_spec": ".spec",
    "parse_spec": ".spec",
    "model_with_key": ".spec",
    "Model": ".base",
    "ScriptedModel": ".scripted",
    "StreamDelta": ".base",
    "StreamingModel": ".base",
    "register_price": ".prices",
}

__all__ = [
    "MAX_RETRY_AFTER_S",
    "Model",
    "ScriptedModel",
    "StreamDelta",
    "StreamingModel",
    "cost_of",
    "model_from_spec",
    "model_with_key",
    "parse_spec",
    "register_price",
]

if TYPE_CHECKING:
    from .base import Model as Model
    from .base import StreamDelta as StreamDelta
    from .base import StreamingModel as StreamingModel
    from .http_errors import MAX_RETRY_AFTER_S as MAX_RETRY_AFTER_S
    from .prices import cost_of as cost_of
    from .prices import register_price as register_price
    from .scripted import ScriptedModel as ScriptedModel
    from .spec import model_from_spec as model_from_spec
    from .spec import model_with_key as model_with_key
    from .spec import parse_spec as parse_spec

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
