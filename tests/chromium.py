"""The one Chromium fixture of the browser tests: playwright driving the system's (Debian's) Chromium.

``from .chromium import browser as browser`` in a test module gives its tests ``browser`` (a
launched headless Chromium, one per module; conftest marks every test that takes it
``browser``). On a machine without Chromium, Graphviz or playwright those tests are skipped,
loudly; in CI (env ``CI`` set) they fail instead: CI installs all three.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from loopwright.machines.diagram import dot_available

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def playwright_or_skip(*, needs_graphviz: bool = True) -> Any:
    """playwright's ``sync_playwright``; or skip the test (fail it in CI), saying what is missing
    (Graphviz too, unless ``needs_graphviz=False``: a test of the drawing without it)."""
    why = None
    if needs_graphviz and not dot_available():
        why = "the pages' drawings need Graphviz (apt-get install graphviz)"
    if why is None and not os.access(CHROMIUM, os.X_OK):
        why = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = why or "the playwright package is missing (pip install -e '.[dev]')"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests must run in CI: {why}")
        print(f"\nSKIPPED browser test: {why}", file=sys.stderr)
        pytest.skip(why)
    return sync_playwright


@contextmanager
def launched(*, needs_graphviz: bool = True) -> Iterator[Any]:
    """A headless Chromium (playwright's ``Browser``) for as long as the block runs; the test is
    skipped (failed in CI) without it (:func:`playwright_or_skip`)."""
    sync_playwright = playwright_or_skip(needs_graphviz=needs_graphviz)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (playwright's ``Browser``): ``browser.new_page()`` in each test."""
    with launched() as chromium:
        yield chromium
