"""The user-path typing tests: one ``mypy --strict`` run per module over its ``SNIPPETS``."""

from __future__ import annotations

import pytest

from tests.mypy_snippets import mypy_on


@pytest.fixture(scope="module")
def mypy_says(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """One ``mypy --strict`` run over every snippet of the module's ``SNIPPETS``: its output lines,
    by snippet (:func:`tests.mypy_snippets.mypy_on`)."""
    return mypy_on(request.module.SNIPPETS, tmp_path_factory.mktemp("typing"))
