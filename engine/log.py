"""structlog helpers. Nothing is configured at import: as a library loopwright is quiet.

``configure_logging("console" | "json", level="info")`` turns on loopwright's own records
(one per transition, one per tool call) without touching the application's structlog setup;
``configure_logging("structlog")`` hands them to whatever the application configured.
Values that look like secrets, and keys named like secrets, are redacted before any output.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

import structlog

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


def configure_logging(fmt: LogFormat = "console", *, level: str = "info", stream: TextIO | None = None) -> None:
    """Turn loopwright's structured logs on (``console``/``json``), hand them to the app's own
    structlog configuration (``structlog``), or off again (``off``)."""
    global _logger
    if fmt == "off":
        _logger = _Quiet()
        return
    if fmt == "structlog":
        _logger = _Redacting(structlog.get_logger("loopwright"))
        return
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
