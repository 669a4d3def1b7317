"""Model adapters: the protocol, and the scripted model."""

from .base import Model, StreamDelta, StreamingModel
from .scripted import ScriptedModel

__all__ = ["Model", "ScriptedModel", "StreamDelta", "StreamingModel"]
