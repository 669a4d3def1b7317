"""What the adapters' error modules (:mod:`.anthropic_errors`, :mod:`.openai_errors`,
:mod:`.gemini_errors`) share: the wait a server asked for (:func:`retry_after`, the one
``Retry-After`` reader) and the error that carries it, capped at :data:`MAX_RETRY_AFTER_S`
(:func:`status_error`), an API message cut to a few hundred characters (:func:`cut`), and an HTML
page where an API error was due (:func:`html_page`). No SDK import.
"""

from __future__ import annotations

import email.utils
import html
import math
import re
import time
from typing import Any

from ..data.errors import ModelError

MESSAGE_LIMIT = 300
MAX_RETRY_AFTER_S = 60.0
"""The longest wait a server's ``Retry-After`` (or Gemini's ``RetryInfo``) gets. A server asking
for longer (``Retry-After: 99999999``, a date a year ahead) gets no wait at all: its error says
what it asked and this maximum, stays retryable (worth trying again later) and carries no
``retry_after``, so the run's retries back off as for any other error and the run ends promptly,
never sleeping toward its deadline."""
_HTML = re.compile(r"<(!doctype|html|head|body)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis where it was cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def html_page(raw: str) -> str | None:
    """The words for a body that is an HTML page (a proxy's or gateway's), or None."""
    if not _HTML.search(raw):
        return None
    title = _TITLE.search(raw)
    shown = f" ({cut(html.unescape(title.group(1)), 120)})" if title else ""
    return f"the server answered with an HTML page{shown}, not an API error: a proxy or gateway failed"


def wait_seconds(value: str) -> float | None:
    """A wait as seconds: ``"12"``, ``"1.5"``, ``"37s"`` (Google's duration) or an HTTP date
    (the seconds until it); a wait already past is 0; anything else (garbage, NaN, an overflow)
    is None."""
    value = value.strip()
    seconds = _number(value.removesuffix("s"))
    if seconds is None:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def retry_after(headers: Any) -> float | None:
    """The wait a reply's headers ask for: ``retry-after-ms`` (milliseconds), else
    ``retry-after`` (seconds or an HTTP date: :func:`wait_seconds`); None when there is none or
    it cannot be read. Takes any mapping-like ``headers`` (httpx's, aiohttp's, a dict: looked up
    in lower case) and never raises."""
    ms = _number(_header(headers, "retry-after-ms"))
    if ms is not None and math.isfinite(ms):
        return max(ms / 1000, 0.0)
    value = _header(headers, "retry-after")
    return wait_seconds(value) if value else None


def status_error(message: str, *, status: int | None, retryable: bool, wait: float | None) -> ModelError:
    """An API's error reply as a ModelError that asks the run to wait ``wait`` seconds (the
    server's, from :func:`retry_after`) before a retry, when that is at most
    :data:`MAX_RETRY_AFTER_S`; a longer wait is said in the message and not asked for."""
    if wait is not None and wait > MAX_RETRY_AFTER_S:
        message = (
            f"{message}; the server asked to wait {wait:.0f} s before a retry, longer than the "
            f"{MAX_RETRY_AFTER_S:g} s loopwright waits at most (MAX_RETRY_AFTER_S): try again later"
        )
        wait = None
    return ModelError(message, status=status, retryable=retryable, retry_after=wait)


def _header(headers: Any, name: str) -> str:
    try:
        value = headers.get(name) if headers is not None else None
    except Exception:  # a headers object that is not what it claims: nothing to read
        return ""
    return str(value) if value else ""


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None
