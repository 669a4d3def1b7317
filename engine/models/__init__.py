"""Model adapters (public): the protocol every adapter implements, the scripted model, prices.

One package per provider: :mod:`loopwright.models.anthropic`, :mod:`loopwright.models.openai`,
:mod:`loopwright.models.gemini`. The other modules here (``base``, ``scripted``, ``clients``,
``http_errors``, ``prices``, ``spec``) are private: what the adapters share. ``build_reply`` and
its kin (``build_text``, ``build_thought``, ``build_call``, ``build_usage``) are the fast
constructor adapters use for replies they make from an SDK's typed objects: the same pydantic
objects, not validated again (``docs/guide/running.md``, "Performance").
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
    "build_call": "..data.reply_builder",
    "build_reply": "..data.reply_builder",
    "build_text": "..data.reply_builder",
    "build_thought": "..data.reply_builder",
    "build_usage": "..data.reply_builder",
    "register_price": ".prices",
}

__all__ = [
    "MAX_RETRY_AFTER_S",
    "Model",
    "ScriptedModel",
    "StreamDelta",
    "StreamingModel",
    "build_call",
    "build_reply",
    "build_text",
    "build_thought",
    "build_usage",
    "cost_of",
    "model_from_spec",
    "model_with_key",
    "parse_spec",
    "register_price",
]

if TYPE_CHECKING:
    from ..data.reply_builder import build_call as build_call
    from ..data.reply_builder import build_reply as build_reply
    from ..data.reply_builder import build_text as build_text
    from ..data.reply_builder import build_thought as build_thought
    from ..data.reply_builder import build_usage as build_usage
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
