"""Signed run states: an HMAC-SHA256 envelope around a saved state, for states that leave the server.

``RunState.to_json(key=k)`` writes ``{"hmac_sha256": "...", "state": {...}}``;
``RunState.from_json(data, key=k)`` refuses a state that is not signed, was signed with another
key or was changed, with :class:`~loopwright.errors.ResumeError`.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from .errors import ResumeError

_PREFIX = b'{"hmac_sha256":"'


def sign(data: bytes, key: bytes) -> bytes:
    """``data`` (a saved state) wrapped with its HMAC-SHA256 under ``key``."""
    mac = hmac.new(key, data, hashlib.sha256).hexdigest()
    return _PREFIX + mac.encode() + b'","state":' + data + b"}"


def unsign(data: str | bytes, key: bytes) -> bytes:
    """The state inside a :func:`sign` envelope, after checking its HMAC."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        mac = json.loads(raw)["hmac_sha256"]
    except (ValueError, TypeError, KeyError):
        raise ResumeError(
            "this run state is not signed: sign it with to_json(key=...), or load it without key="
        ) from None
    if not raw.startswith(_PREFIX) or not isinstance(mac, str):
        raise ResumeError("this run state's envelope is malformed: it was not written by to_json(key=...)")
    start = len(_PREFIX) + len(mac) + len(b'","state":')
    inner = raw[start:-1]
    expected = hmac.new(key, inner, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        raise ResumeError("this run state's signature does not match: it was changed, or signed with another key")
    return inner
