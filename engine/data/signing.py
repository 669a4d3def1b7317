"""Signed run states: an HMAC-SHA256 envelope around a saved state, for states that leave the server;
and signed store rows.

``RunState.to_json(key=k)`` writes ``{"hmac_sha256": "...", "state": {...}}``;
``RunState.from_json(data, key=k)`` refuses a state that is not signed, was signed with another
key or was changed, with :class:`~loopwright.data.errors.ResumeError`.

A store opened with ``key=k`` (``SQLiteStore(path, key=k)``, ``PostgresStore(dsn, key=k)``)
signs each row it writes the same way (:class:`RowSigner`): a checkpoint over its run id, version,
agent, stage, outcome, seq, head and body; a kept tool result over its run id, call id, seq and
body; a claim over its run id, suspension, owner and decisions. Reading, it refuses (ResumeError)
a row that is unsigned, changed, moved to another run or version, or signed with another key,
and a run whose checkpoints are not all there (1, 2, ... n: one removed from the middle). What
a signature cannot show: that the newest rows were removed (the run goes back to an earlier
checkpoint, as after a crash), and the columns that only say who holds the run and when
(``owner``, ``updated``; ``runs()`` lists what the rows say, unchecked). A store without a key
trusts its rows as they are: anyone who can write the database can change what a resumed
run does (a payment of 5 becomes 5000, consistently in every row).
"""

from __future__ import annotations

import hashlib
import hmac
import json

from pydantic_core import to_json

from .errors import ConfigurationError, ResumeError

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


# ---------------------------------------------------------------- store rows

ROW_MAC_SIZE = 32
"""Bytes of a store row's signature (HMAC-SHA256)."""


def row_signer(key: object) -> RowSigner | None:
    """A store's ``key=`` as its signer (None: its rows are not signed); ConfigurationError if
    it is not bytes."""
    if key is None:
        return None
    if not isinstance(key, bytes) or not key:
        raise ConfigurationError(
            f"key= takes the signing key as bytes (e.g. 32 bytes from os.urandom(32), kept secret), got "
            f"{type(key).__name__} {key!r:.20}"
        )
    return RowSigner(key)


class RowSigner:
    """Signs and checks a store's rows with one key (HMAC-SHA256; the key's HMAC state is made
    once, each row's copies it)."""

    __slots__ = ("_base",)

    def __init__(self, key: bytes) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)

    def mac(self, fields: list[object], *blobs: bytes) -> bytes:
        """The signature of a row: its ``fields`` (kind first, then what names the row and what
        it says, as JSON) and its ``blobs``, each preceded by its length."""
        h = self._base.copy()
        h.update(to_json(fields))
        for blob in blobs:
            h.update(b"\n%d\n" % len(blob))
            h.update(blob)
        return h.digest()

    def check(self, mac: bytes | None, what: str, fields: list[object], *blobs: bytes) -> None:
        """Refuse (ResumeError) a row whose signature ``mac`` is missing or does not match
        (``what``: the row, as the message names it)."""
        if mac is None:
            raise ResumeError(
                f"{what} is not signed: it was written without key= (or its signature was removed); a store "
                "opened with key= reads signed rows only"
            )
        if not hmac.compare_digest(bytes(mac), self.mac(fields, *blobs)):
            raise ResumeError(
                f"{what} does not match its signature: it was changed or moved, or signed with another key; "
                "nothing of it is used"
            )
