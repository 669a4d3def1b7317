"""How the Anthropic SDK's failures become :class:`ModelError`: the status, the API's own
message (cut to a few hundred characters; an HTML page is named as such), the request id, the
wait the API asked for (``Retry-After``), and whether a retry can help — retryable for
408/409/429/5xx/529, connection errors and bodies that are not a Messages API reply, not for
400/401/403/404. An ``error`` event inside a streamed reply (HTTP 200) gets the status its
error type stands for. A 429's message names the rate limits the API reported
(``anthropic-ratelimit-*`` headers: the one spent first); every status error carries them as
``error.rate_limits``."""

from __future__ import annotations

import contextlib

import anthropic

from ...data.errors import ContextWindowError, ModelError
from ..http_errors import cut, html_page, retry_after, status_error

_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each API error type stands for (an error event in a stream comes with 200)."""


def stream_error(exc: Exception) -> ModelError:
    """What a failed streamed call comes to (the SDK leaves transport and body errors unwrapped)."""
    if isinstance(exc, anthropic.AnthropicError):
        return model_error(exc)
    if isinstance(exc, ValueError | AttributeError | KeyError | TypeError):  # broken JSON or events in the body
        return ModelError(
            "the reply was not a Messages API stream (its events could not be read: a proxy or gateway in "
            f"between may have answered, or the body was torn); {type(exc).__name__}: {cut(str(exc), 120)}",
            retryable=True,
        )
    if isinstance(exc, AssertionError):  # the SDK found no message_start: no Messages API events
        return ModelError(
            "the reply stream ended before the message was complete: the body held no Messages API events "
            "(a proxy or gateway in between may have answered)",
            retryable=True,
        )
    return ModelError(f"the reply stream broke off: {type(exc).__name__}: {cut(str(exc))}", retryable=True)


_RATE = "anthropic-ratelimit-"


def rate_limits(exc: anthropic.APIStatusError) -> dict[str, str]:
    """The ``anthropic-ratelimit-*`` headers of the reply, without their prefix
    (``{"requests-remaining": "0", "requests-reset": "2026-...", ...}``)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return {}
    with contextlib.suppress(Exception):
        return {k.lower()[len(_RATE) :]: v for k, v in headers.items() if k.lower().startswith(_RATE)}
    return {}


def _limits_text(limits: dict[str, str]) -> str:
    """``input-tokens 0/40000 left, reset 2026-...; requests 12/50 left`` (the spent kind first)."""
    kinds = sorted({k.rsplit("-", 1)[0] for k in limits if k.endswith("-remaining")},
                   key=lambda kind: (limits.get(f"{kind}-remaining") != "0", kind))  # fmt: skip
    parts = []
    for kind in kinds:
        text = f"{kind} {limits[f'{kind}-remaining']}/{limits.get(f'{kind}-limit', '?')} left"
        if limits.get(f"{kind}-reset"):
            text += f", reset {limits[f'{kind}-reset']}"
        parts.append(text)
    return "; ".join(parts)


def _api_error(exc: anthropic.APIStatusError) -> tuple[str | None, str]:
    """The API's error type and message from the error body, else a plain word on the body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            kind = error.get("type")
            return (kind if isinstance(kind, str) else None), cut(str(error["message"]))
    raw = ""
    with contextlib.suppress(Exception):
        raw = exc.response.text
    raw = raw or (body if isinstance(body, str) else "") or str(getattr(exc, "message", None) or exc)
    return None, html_page(raw) or cut(raw)


def model_error(exc: anthropic.AnthropicError) -> ModelError:
    if isinstance(exc, anthropic.APIStatusError):
        limits = rate_limits(exc)
        error = _status_error(exc, limits)
        error.rate_limits = limits  # type: ignore[attr-defined]
        return error
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelError(f"could not reach the Anthropic API: {cut(str(exc))}", retryable=True)
    if type(exc).__name__ == "CredentialsError":
        return ModelError(f"the Anthropic credentials could not be loaded: {exc}", retryable=False)
    return ModelError(f"Anthropic client error: {type(exc).__name__}: {cut(str(exc))}", retryable=False)


def _status_error(exc: anthropic.APIStatusError, limits: dict[str, str]) -> ModelError:
    kind, message = _api_error(exc)
    detail = f"{kind}: {message}" if kind else message
    request_id = f" [request-id {exc.request_id}]" if getattr(exc, "request_id", None) else ""
    status = exc.status_code
    where = ""
    if status < 400:  # an error event inside a streamed reply: the status line said 200
        status = _ERROR_TYPE_STATUS.get(kind or "", 500)
        where = " in the reply stream"
    if status == 401:
        return ModelError(
            f"the Anthropic API refused the credentials (401 {detail}); set ANTHROPIC_API_KEY to a valid key"
            f"{request_id}",
            status=401,
            retryable=False,
        )
    if status == 400 and "prompt is too long" in message.lower():
        return ContextWindowError(
            f"the request does not fit the model's context window (400 {detail}){request_id}: the run takes "
            "the token-budget edge (compaction, if the agent has it, else salvage)",
            status=400,
        )
    shown = f" (rate limits: {_limits_text(limits)})" if limits and status == 429 else ""
    return status_error(
        f"Anthropic API error {status}{where}: {detail}{shown}{request_id}",
        status=status,
        retryable=status in _RETRYABLE_STATUS,
        wait=retry_after(getattr(getattr(exc, "response", None), "headers", None)),
    )
