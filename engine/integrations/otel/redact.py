"""Secrets kept out of traces: :func:`redact_secrets`, the default redactor of
:class:`~loopwright.integrations.otel.Tracing` (it needs no OpenTelemetry)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"
Redactor = Callable[[Any], Any]

_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|api[_-]?key|authorization|credential|cookie", re.I)
_SECRET_TEXT = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{12,}"),  # API keys (Anthropic, OpenAI, Stripe...)
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),  # JWTs
    re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),  # e-mail addresses
]


def redact_secrets(value: Any) -> Any:
    """The default redactor: values under keys that name a secret (password, token, api_key,
    authorization...) and text that looks like a key, a bearer token, a JWT or an e-mail address
    become ``[REDACTED]``. Walks dicts, lists and strings; returns a redacted copy."""
    if isinstance(value, str):
        for pattern in _SECRET_TEXT:
            value = pattern.sub(REDACTED, value)
        return value
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else redact_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(v) for v in value]
    return value
