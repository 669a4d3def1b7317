"""loopwright's tests, in folders that mirror the package (``tests/models/anthropic/`` tests
``loopwright.models.anthropic``); helpers shared across folders sit here at the top."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root."""
TESTS = ROOT / "tests"
"""This folder: the shared helpers, fakes and MCP servers live here."""
