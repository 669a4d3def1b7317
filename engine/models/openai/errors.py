"""How the ``openai`` SDK's failures become :class:`ModelError`: the status, the API's own message
(cut to a few hundred characters; an HTML page is named as such), the request id, the wait the
server asked for (``Retry-After``), and whether a retry can help — retryable for
408/409/429/5xx, connection errors and bodies that are not an API reply; not for 400/401/403/404.
A full context window (``context_length_exceeded``, or a local server's "maximum context length")
is :class:`ContextWindowError`, so the run takes the token-budget edge. An ``error`` event inside
a streamed reply (HTTP 200) counts as a server error (retryable) unless its code says otherwise.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import openai

from ...data.errors import ContextWindowError, ModelError
from ..http_errors import cut, html_page, retry_after, status_error

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_CONTEXT = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|too many tokens",
    re.IGNORECASE,
)
MISSING_KEY = (
    "OPENAI_API_KEY is not set: export OPENAI_API_KEY=<your key> and run again, or pass "
    "OpenAIModel(..., client=openai.AsyncOpenAI(api_key=...)); a local OpenAI-compatible server needs "
    "base_url= (any key works there)"
)


def _api_error(exc: openai.APIStatusError) -> tuple[str | None, str]:
    """The API's error code (or type) and message from the body, else a plain word on the body."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        kind = error.get("code") or error.get("type")
        return (str(kind) if kind else None), cut(str(error["message"]))
    raw = ""
    with contextlib.suppress(Exception):
        raw = exc.response.text
    raw = raw or (body if isinstance(body, str) else "") or str(getattr(exc, "message", None) or exc)
    return None, html_page(raw) or cut(raw)


def _status_error(exc: openai.APIStatusError, where: str) -> ModelError:
    kind, message = _api_error(exc)
    detail = f"{kind}: {message}" if kind else message
    request_id = f" [request-id {exc.request_id}]" if getattr(exc, "request_id", None) else ""
    status = exc.status_code
    if status in (400, 413) and (_CONTEXT.search(kind or "") or _CONTEXT.search(message)):
        return ContextWindowError(
            f"the conversation does not fit the model's context window ({status} {detail}){request_id}",
            status=status,
        )
    if status == 401:
        return ModelError(
            f"the server at {where} refused the credentials (401 {detail}); set OPENAI_API_KEY to a valid key"
            f"{request_id}",
            status=401,
            retryable=False,
        )
    return status_error(
        f"OpenAI API error {status} from {where}: {detail}{request_id}",
        status=status,
        retryable=status in _RETRYABLE_STATUS or status >= 500,
        wait=retry_after(getattr(exc.response, "headers", None)),
    )


def model_error(exc: BaseException, where: str) -> ModelError:
    """What a failed call to ``where`` (the server's base URL) comes to."""
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, where)
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"the request to {where} timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return ModelError(f"could not reach {where}: {cut(str(cause) or type(cause).__name__, 160)}", retryable=True)
    if isinstance(exc, openai.APIError):  # an error object inside a 200 stream
        body = getattr(exc, "body", None)
        code = body.get("code") if isinstance(body, dict) else None
        message = cut(str(getattr(exc, "message", None) or exc))
        if _CONTEXT.search(f"{code} {message}"):
            return ContextWindowError(f"the conversation does not fit the model's context window ({message})")
        return ModelError(f"the reply stream from {where} reported an error: {message}", retryable=True)
    if isinstance(exc, openai.OpenAIError):
        if "OPENAI_API_KEY" in str(exc) or "api_key" in str(exc):
            return ModelError(MISSING_KEY, retryable=False)
        return ModelError(f"OpenAI client error: {type(exc).__name__}: {cut(str(exc))}", retryable=False)
    if isinstance(exc, ValueError | AttributeError | KeyError | TypeError):  # a body that is not an API reply
        return ModelError(
            f"the reply from {where} was not an OpenAI API reply (a proxy or gateway in between may have "
            f"answered, or the body was torn); {type(exc).__name__}: {cut(str(exc), 120)}",
            retryable=True,
        )
    return ModelError(f"the reply from {where} broke off: {type(exc).__name__}: {cut(str(exc))}", retryable=True)


def stream_failed(kind: str, error: Any, where: str) -> ModelError:
    """A Responses stream's ``error`` or ``response.failed`` event as a ModelError."""
    code = getattr(error, "code", None) if error is not None else None
    message = cut(str(getattr(error, "message", None) or error or kind))
    if _CONTEXT.search(f"{code} {message}"):
        return ContextWindowError(f"the conversation does not fit the model's context window ({message})")
    retryable = code not in ("invalid_prompt", "invalid_request_error")
    return ModelError(
        f"the reply stream from {where} reported {kind}: {code or 'error'}: {message}", retryable=retryable
    )
