"""Every route of ``loopwright.serve.app`` fuzzed over real HTTP (uvicorn on a socket, httpx):
generated methods, paths (the app's own routes, read from it, so a new route is fuzzed too),
headers, query strings and bodies (JSON of every shape and type, non-JSON, past the size limit,
deep, bad UTF-8, lone surrogates). Whatever comes in:

- the server answers (never drops the connection) and never with a 5xx;
- every error is JSON with an ``error`` that says what was wrong;
- a refused request (4xx) changes nothing in the store;
- the server still serves a good request after.

The normal suite runs 150 examples (the ``serve-fuzz`` profile); ``LOOPWRIGHT_SERVE_FUZZ=serve-fuzz-long``
runs 5,000."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route

from loopwright.cli.trace_page import trace_page
from loopwright.serve import app
from tests.serve_agents import serving, support

_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("serve-fuzz", max_examples=150, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("serve-fuzz-long", max_examples=5000, deadline=None, suppress_health_check=_QUIET)
FUZZ = settings.get_profile(os.environ.get("LOOPWRIGHT_SERVE_FUZZ", "serve-fuzz"))
"""The normal suite's bounded run; ``LOOPWRIGHT_SERVE_FUZZ=serve-fuzz-long`` for a long one."""

MAX_BODY = 4096
"""The fuzzed server's ``max_body_bytes`` (small, so bodies past it are cheap to make)."""
USERS = ("ada", "bob")


def _auth(request: Any) -> str | None:
    user = request.headers.get("x-user")
    return user if user in USERS else None


class Served:
    def __init__(self, base: str, db: Path, starlette: Any, suspended: str, ended: str) -> None:
        self.base, self.db, self.starlette = base, db, starlette
        self.suspended, self.ended = suspended, ended
        self.host = base.removeprefix("http://")

    def templates(self) -> list[tuple[str, list[str]]]:
        """Every route of the app: its path template and methods (a new route is fuzzed too)."""
        return [(r.path, sorted(r.methods or ())) for r in self.starlette.routes if isinstance(r, Route)]

    def quiet(self) -> None:
        """Wait until no run is in progress in the server (a started run has checkpointed)."""
        deadline = time.monotonic() + 30
        while self.starlette.state.loopwright.service.live:
            assert time.monotonic() < deadline, "a run did not stop within 30 s"
            time.sleep(0.01)

    def snapshot(self) -> list[Any]:
        """Every row of every table of the store (what a refused request must leave alone)."""
        with sqlite3.connect(self.db) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
            return [(t, sorted(map(repr, db.execute(f'SELECT * FROM "{t}"')))) for t in tables]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = tmp_path_factory.mktemp("fuzz") / "runs.db"
    starlette = app(
        support,
        store=f"sqlite:///{db}",
        auth=_auth,
        ui=True,
        trace_page=trace_page,
        max_body_bytes=MAX_BODY,
    )
    with serving(starlette) as base:
        user = {"x-user": "ada"}
        suspended = httpx.post(f"{base}/runs", json={"input": "refund 42"}, headers=user).json()["run_id"]
        ended = httpx.post(f"{base}/runs", json={"input": "hello"}, headers=user).json()["run_id"]
        yield Served(base, db, starlette, suspended, ended)


# ------------------------------------------------------------------ what a request is made of

TEXT = st.text(max_size=30)
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(
    JSON_LEAF, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12
)
FIELD_VALUES = JSON_LEAF | st.lists(JSON_LEAF, max_size=3) | st.dictionaries(TEXT, JSON_LEAF, max_size=3)
DECISION = st.fixed_dictionaries(
    {},
    optional={
        "call_id": FIELD_VALUES,
        "action": st.sampled_from(["approve", "deny", "value", "maybe", ""]) | FIELD_VALUES,
        "reason": FIELD_VALUES,
        "args": FIELD_VALUES,
        "value": FIELD_VALUES,
        "extra": FIELD_VALUES,
    },
)
SHAPED = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "agent": st.sampled_from(["support", "nobody"]) | FIELD_VALUES,
            "input": st.sampled_from(["hi", "refund 7", "look up 9", ""]) | FIELD_VALUES,
            "run_id": TEXT | FIELD_VALUES,
            "session": FIELD_VALUES,
            "surprise": FIELD_VALUES,
        },
    ),
    st.fixed_dictionaries({"decisions": st.lists(DECISION, max_size=3) | FIELD_VALUES}),
    st.fixed_dictionaries(
        {},
        optional={
            "threadId": FIELD_VALUES,
            "runId": FIELD_VALUES,
            "messages": st.lists(st.dictionaries(TEXT, FIELD_VALUES, max_size=4), max_size=3) | FIELD_VALUES,
            "resume": FIELD_VALUES,
            "tools": FIELD_VALUES,
            "state": FIELD_VALUES,
        },
    ),
)


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


BODIES: st.SearchStrategy[bytes | None] = st.one_of(
    st.none(),
    st.just(b""),
    SHAPED.map(lambda v: json.dumps(v).encode()),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.integers(1, 200_000).map(_deep),
    st.integers(MAX_BODY - 16, 3 * MAX_BODY).map(lambda n: b'{"input": "' + b"x" * n + b'"}'),
    st.sampled_from(
        [
            b'{"input": "\\ud800"}',
            b'{"input": NaN}',
            b'{"input": Infinity}',
            b'{"decisions": [{"call_id": "\xff\xfe", "action": "approve"}]}',
            b'{"input": "hi"',
            b"\xef\xbb\xbf{}",
            b"null",
            b"[]",
            b'"text"',
            b'{"input": "\xed\xa0\x80"}',
        ]
    ),
)
HEADER_NAMES = st.sampled_from(
    ["accept", "accept-encoding", "cookie", "authorization", "x-forwarded-for", "x-forwarded-host", "expect", "range"]
) | st.from_regex(r"\Ax-[a-z0-9-]{1,20}\Z")
HEADER_VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip)
HEADERS = st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=3)
"""Other headers, any printable value (``x-user`` stays the auth hook's)."""
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
QUERY = st.dictionaries(
    st.sampled_from(["agent", "outcome", "since", "until", "limit", "after", "x"]) | TEXT,
    st.sampled_from(["", "0", "-1", "1e999", "nan", "support", "10", "abc"]) | TEXT,
    max_size=4,
)


@st.composite
def requests(draw: st.DrawFn, served: Served) -> dict[str, Any]:
    template, methods = draw(st.sampled_from(served.templates()))
    method = draw(st.sampled_from(methods) | METHODS)
    values = {
        "run_id": st.sampled_from([served.suspended, served.ended, "nope", "..", "%2e%2e", "a" * 300]) | TEXT,
        "name": st.sampled_from(["support", "nobody", "app.js", "../index.html", "app.css"]) | TEXT,
    }
    path = template
    for key, strategy in values.items():
        if "{" + key + "}" in path:
            filled = quote(draw(strategy), safe="")
            path = path.replace("{" + key + "}", filled or "x")
    headers: dict[str, str] = {}
    user = draw(st.sampled_from(["ada", "bob", None, "eve"]))
    if user is not None:
        headers["x-user"] = user
    kind = draw(st.sampled_from(["application/json", "text/plain", "application/json; charset=latin-1", None, "*/*"]))
    if kind is not None:
        headers["content-type"] = kind
    origin = draw(st.sampled_from([None, f"http://{served.host}", "http://evil.example", "null"]))
    if origin is not None:
        headers["origin"] = origin
    if draw(st.booleans()):
        headers["last-event-id"] = draw(st.sampled_from(["0", "-5", "999999999999999999999", "x"]) | TEXT)
    headers.update(draw(HEADERS))
    host = draw(st.sampled_from([None, "evil.example", "localhost"]))
    ascii_headers = {k: v for k, v in headers.items() if v.isascii() and v.isprintable()}
    headers.pop("x-user", None)
    if user is not None:
        headers["x-user"] = user
    return {
        "method": method,
        "path": path,
        "headers": ascii_headers,
        "host": host,
        "params": draw(QUERY),
        "body": draw(BODIES),
        "chunked": draw(st.booleans()),
    }


# ------------------------------------------------------------------ the properties


def _send(served: Served, request: dict[str, Any]) -> tuple[httpx.Response, bytes]:
    """Send it (streams: their head and up to the first chunk); the response and what was read."""
    headers = dict(request["headers"])
    if request["host"] is not None:
        headers["host"] = request["host"]
    with (
        httpx.Client(base_url=served.base, timeout=30) as client,
        client.stream(
            request["method"], request["path"], headers=headers, params=request["params"], content=_content(request)
        ) as response,
    ):
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response, b""
        return response, response.read()


def _content(request: dict[str, Any]) -> Any:
    """The body as given, or (``chunked``) sent in pieces without a Content-Length."""
    body = request["body"]
    if not request.get("chunked") or body is None:
        return body
    return iter([body[i : i + 1000] for i in range(0, len(body), 1000)] or [b""])


def check_answer(served: Served, request: dict[str, Any]) -> None:
    served.quiet()
    before = served.snapshot()
    try:
        response, body = _send(served, request)
    except httpx.TransportError as exc:
        raise AssertionError(f"the server dropped the connection: {exc!r}") from None
    assert response.status_code < 500, (response.status_code, body[:300])
    if response.status_code >= 400 and request["method"] != "HEAD":
        assert response.headers["content-type"].startswith("application/json"), (response.status_code, body[:200])
        error = json.loads(body)["error"]
        assert isinstance(error, str) and len(error) > 10, error
    if response.status_code >= 400:
        served.quiet()
        assert served.snapshot() == before, f"a refused request ({response.status_code}) changed the store"
    good = httpx.get(f"{served.base}/agents", headers={"x-user": "ada"}, timeout=30)
    assert good.status_code == 200 and good.json()["agents"] == ["support"]


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_no_request_gets_a_5xx_a_reset_or_a_change_when_refused(served: Served, data: st.DataObject) -> None:
    check_answer(served, data.draw(requests(served)))


def test_the_fuzz_reads_every_route_from_the_app(served: Served) -> None:
    paths = {p for p, _ in served.templates()}
    assert {"/runs", "/runs/{run_id}/decisions", "/agents/{name}/agui", "/ui/{name}", "/"} <= paths


def test_the_issues_hostile_requests_answer_4xx_json_and_change_nothing(served: Served) -> None:
    own = {"x-user": "ada", "content-type": "application/json"}
    cases = [
        ("POST", "/runs", _deep(200_000)),
        ("POST", f"/runs/{served.suspended}/decisions", b'{"decisions": [{"call_id": "\xff", "action": "approve"}]}'),
        ("POST", "/runs", b'{"input": "' + b"x" * 20_000_000 + b'"}'),
    ]
    for method, path, body in cases:
        request = {"method": method, "path": path, "headers": own, "host": None, "params": {}, "body": body}
        check_answer(served, request)
