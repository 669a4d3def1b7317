"""structlog helpers. Nothing is configured at import (structlog is not even imported until
logging is turned on): as a library loopwright is quiet.

:func:`loopwright.configure_logging` (in :mod:`loopwright.runtime.observers`, which installs the
observer that writes the records) calls :func:`make_logger` here. Values that look like
secrets, and keys named like secrets, are redacted before any output.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

LogFormat = Literal["console", "json", "structlog", "off"]

_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|credential)", re.I)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,}|ghp_[A-Za-z0-9]{8,}|AKIA[0-9A-Z]{12,})"
)
REDACTED = "[redacted]"


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return _SECRET_VALUE.sub(REDACTED, value)
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else _redact_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


def redact_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: replaces secret-looking keys and values with ``[redacted]``."""
    for key in list(event_dict):
        if _SECRET_KEY.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _redact_value(event_dict[key])
    return event_dict


class _Quiet:
    """The default logger: every method is a no-op and ``enabled`` is False, so the runner
    skips building records altogether."""

    enabled = False

    def info(self, *_args: Any, **_kw: Any) -> None:
        return None

    debug = warning = error = info


class _Redacting:
    """Hands records to the application's structlog configuration, secrets redacted first."""

    enabled = True

    def __init__(self, logger: Any) -> None:
        self._logger = logger

    def _emit(self, method: str, event: str, kw: dict[str, Any]) -> None:
        getattr(self._logger, method)(event, **redact_secrets(None, method, kw))

    def debug(self, event: str, **kw: Any) -> None:
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        self._emit("error", event, kw)


_logger: Any = _Quiet()


def get_logger() -> Any:
    """The logger loopwright writes to (a no-op until :func:`configure_logging`)."""
    return _logger


def logging_enabled() -> bool:
    return bool(getattr(_logger, "enabled", True))


def make_logger(fmt: LogFormat, *, level: str = "info", stream: TextIO | None = None) -> Any:
    """The logger for ``fmt`` (``console``/``json``: loopwright's own; ``structlog``: the app's
    configuration, secrets redacted; ``off``: quiet), and make it the one loopwright writes to."""
    global _logger
    if fmt == "off":
        _logger = _Quiet()
        return _logger
    import structlog  # only when logging is turned on: it is a slow import

    if fmt == "structlog":
        _logger = _Redacting(structlog.get_logger("loopwright"))
        return _logger
    if fmt not in ("console", "json"):
        raise ValueError(f"unknown log format {fmt!r}; use 'console', 'json', 'structlog' or 'off'")
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use debug, info, warning or error")
    _logger = structlog.wrap_logger(
        structlog.PrintLogger(stream or sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            redact_secrets,
            renderer,
        ],
        logger_name="loopwright",
    )
    return _logger
