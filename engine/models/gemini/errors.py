"""How the ``google-genai`` SDK's failures become :class:`ModelError`: the status, the API's own
message (cut to a few hundred characters; an HTML page is named as such), the wait the API asked
for (a ``Retry-After`` header, or the ``RetryInfo.retryDelay`` of a 429's details), and whether a
retry can help — retryable for 408/409/429/5xx, connection errors (the message says "could not
reach <url>") and bodies that are not a Gemini reply; not for 400/401/403/404. A 400 saying the
input holds more tokens than the model takes is :class:`ContextWindowError` (the run takes the
token-budget edge). Imports ``google.genai`` only through the caller (it passes the module)."""

from __future__ import annotations

import re
from typing import Any

from ...data.errors import ContextWindowError, ModelError
from ..http_errors import cut, html_page, status_error, wait_seconds
from ..http_errors import retry_after as header_wait

_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
_CONTEXT = re.compile(
    r"input token count.*exceeds the maximum|exceeds the maximum number of tokens|context (window|length)|"
    r"prompt is too long|too many tokens",
    re.IGNORECASE | re.DOTALL,
)
_KEY_INVALID = re.compile(r"API_KEY_INVALID|API key not valid|API key expired", re.IGNORECASE)
KEY_HINT = "set GEMINI_API_KEY (or GOOGLE_API_KEY) to a valid key"


def retry_after(exc: Any) -> float | None:
    """The wait the API asked for: the ``Retry-After`` header, else a RetryInfo detail."""
    found = header_wait(getattr(getattr(exc, "response", None), "headers", None))
    if found is not None:
        return found
    details = getattr(exc, "details", None)
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details") or () if isinstance(error, dict) else ():
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo") and item.get("retryDelay"):
            return wait_seconds(str(item["retryDelay"]))
    return None


def _message(exc: Any) -> str:
    message = getattr(exc, "message", None)
    if not message:
        details = getattr(exc, "details", None)
        message = details if isinstance(details, str) else str(exc)
    message = str(message)
    return html_page(message) or cut(message)


def api_error(exc: Any) -> ModelError:
    """A ``google.genai.errors.APIError`` as a ModelError."""
    status = int(getattr(exc, "code", 0) or 0)
    kind = getattr(exc, "status", None)
    message = _message(exc)
    detail = f"{kind}: {message}" if isinstance(kind, str) and kind else message
    if status in (400, 401, 403) and (status == 401 or _KEY_INVALID.search(f"{message} {getattr(exc, 'details', '')}")):
        return ModelError(
            f"the Gemini API refused the credentials ({status} {detail}); {KEY_HINT}", status=status, retryable=False
        )
    if status in (400, 413) and _CONTEXT.search(message):
        return ContextWindowError(
            f"the conversation does not fit the model's context window (Gemini API error {status}: {detail}). "
            "Shorten the history (fewer or smaller tool results) or use a model with a larger context window",
            status=status,
        )
    if status == 404:
        return ModelError(
            f"Gemini API error 404: {detail} (is the model id right? GeminiModel.KNOWN lists the ones "
            "loopwright knows)",
            status=404,
            retryable=False,
        )
    return status_error(
        f"Gemini API error {status}: {detail}",
        status=status or None,
        retryable=status in _RETRYABLE_STATUS or status == 0,
        wait=retry_after(exc),
    )


def transport_error(exc: BaseException, base_url: str) -> ModelError:
    """A failure below HTTP (refused connection, timeout, torn body) as a retryable ModelError."""
    url = base_url
    request = None
    try:
        request = getattr(exc, "request", None)
    except RuntimeError:  # httpx raises when the error has no request attached
        request = None
    if request is not None:
        url = f"{request.url.scheme}://{request.url.netloc.decode()}"
    kind = type(exc).__name__
    shown = cut(str(exc), 160) or kind
    if "Connect" in kind or isinstance(exc, ConnectionError):
        return ModelError(f"could not reach {url} (the Gemini API): {kind}: {shown}", retryable=True)
    if "Timeout" in kind:
        return ModelError(f"the Gemini API at {url} did not answer in time: {kind}: {shown}", retryable=True)
    return ModelError(f"the reply from {url} broke off: {kind}: {shown}", retryable=True)


def unreadable(exc: BaseException) -> ModelError:
    """A body that is not a Gemini reply (broken JSON, a gateway's page) as a retryable ModelError."""
    return ModelError(
        "the reply was not a Gemini API response (it could not be read: a proxy or gateway in between may "
        f"have answered, or the body was torn); {type(exc).__name__}: {cut(str(exc), 160)}",
        retryable=True,
    )
