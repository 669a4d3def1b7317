"""Another site's page, in real Chromium (Debian's, driven by playwright), cannot drive the server:
a page served from another port POSTs ``text/plain`` JSON to ``/runs`` (a fetch in ``no-cors``
mode and a plain HTML form, neither of which a browser asks permission for) and no run starts;
a DNS-rebinding page (another name resolving to 127.0.0.1) cannot even read ``/runs``."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from loopwright.serve import app
from loopwright.stores import SQLiteStore
from tests.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)
from tests.serve_agents import serving, support

pytestmark = pytest.mark.browser

ATTACK = """<!doctype html><html><body>
<form id="form" method="post" action="{target}/runs" enctype="text/plain" target="sink">
  <input type="hidden" name='{{"agent": "support", "input": "refund Z9", "pad": "' value='"}}'>
</form>
<iframe name="sink"></iframe>
<script>
  window.sent = fetch("{target}/runs", {{
    method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
    body: JSON.stringify({{agent: "support", input: "refund Z8"}}),
  }}).then(() => "sent", (e) => "fetch failed: " + e);
  document.getElementById("form").submit();
</script>
</body></html>"""


def _attacker(target: str) -> Any:
    """A Starlette app serving the attacking page (on its own port: another origin)."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse(ATTACK.format(target=target))

    return Starlette(routes=[Route("/", page)])


def _stored(db: Path) -> list[str]:
    async def read() -> list[str]:
        store = SQLiteStore(db)
        try:
            return [s.run_id for s in await store.runs(limit=100)]
        finally:
            await store.close()

    if not db.exists():
        return []
    with ThreadPoolExecutor(1) as pool:  # (playwright's sync API holds this thread's event loop)
        return pool.submit(asyncio.run, read()).result()


def test_a_cross_origin_text_plain_post_from_chromium_starts_no_run(browser: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    seen: list[tuple[str, int]] = []
    with serving(app([support], store=f"sqlite:///{db}")) as target, serving(_attacker(target)) as evil:
        page = browser.new_page()
        try:
            page.on("response", lambda r: seen.append((r.url, r.status)) if r.url.endswith("/runs") else None)
            page.goto(evil + "/")
            assert page.evaluate("window.sent") == "sent"  # Chromium sent it (no preflight for text/plain)
            page.wait_for_function(
                "() => { try { return frames[0].document.body !== null } catch (e) { return true } }"
            )
            page.wait_for_timeout(300)  # (the form's answer lands in the iframe; nothing may start meanwhile)
        finally:
            page.close()
        import httpx

        listed = httpx.get(target + "/runs").json()["runs"]
    assert listed == [] and _stored(db) == []
    assert any(status == 403 for _, status in seen), seen  # the form's POST reached the server and was refused


def test_a_rebinding_page_cannot_read_the_runs_list(browser: Any, tmp_path: Path) -> None:
    """A page on evil.test (which Chromium resolves to 127.0.0.1, as after a DNS rebinding) is
    same-origin with the server in the browser's eyes, so only the Host check stops it."""
    db = tmp_path / "runs.db"
    with serving(app([support], store=f"sqlite:///{db}", ui=True)) as target:
        port = target.rsplit(":", 1)[1]
        rules = "--host-resolver-rules=MAP evil.test 127.0.0.1"
        chromium = browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, rules])
        try:
            page = chromium.new_page()
            first = page.goto(f"http://evil.test:{port}/")
            assert first is not None and first.status == 421
            got = page.evaluate(
                "async () => { const r = await fetch('/runs', {method: 'POST', headers: "
                "{'Content-Type': 'application/json'}, body: JSON.stringify({input: 'refund Z7'})}); "
                "return [r.status, await r.text()]; }"
            )
            assert got[0] == 421 and "--allowed-host" in json.loads(got[1])["error"]
            listed = page.evaluate("async () => (await fetch('/runs')).status")
            assert listed == 421
        finally:
            chromium.close()
    assert _stored(db) == []
