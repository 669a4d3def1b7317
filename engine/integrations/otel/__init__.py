"""OpenTelemetry GenAI spans for every run (public; the otel extra). The modules inside are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "CONTENT_ENV": ".tracing",
    "REDACTED": ".tracing",
    "RunTrace": ".tracing",
    "Tracing": ".tracing",
    "instrument": ".tracing",
    "redact_secrets": ".tracing",
    "uninstrument": ".tracing",
}

__all__ = [
    "CONTENT_ENV",
    "REDACTED",
    "RunTrace",
    "Tracing",
    "instrument",
    "redact_secrets",
    "uninstrument",
]

if TYPE_CHECKING:
    from .tracing import CONTENT_ENV as CONTENT_ENV
    from .tracing import REDACTED as REDACTED
    from .tracing import RunTrace as RunTrace
    from .tracing import Tracing as Tracing
    from .tracing import instrument as instrument
    from .tracing import redact_secrets as redact_secrets
    from .tracing import uninstrument as uninstrument

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
