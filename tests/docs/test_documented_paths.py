"""Every ``loopwright.…`` path the README and docs/ name (and every entry point pyproject declares)
imports, so a module moved without keeping its documented path fails here by name; the docs site
builds with ``--strict``; ``loopwright.__version__`` is the installed distribution's."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import ROOT

PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

NOT_PATHS = {
    "loopwright.transition": "the OpenTelemetry span event's name (docs/guide/observability.md)",
    "loopwright.resumed": "an OpenTelemetry span attribute (docs/guide/observability.md)",
    "loopwright.run.id": "an OpenTelemetry span link attribute (docs/guide/observability.md)",
    "loopwright.tool.executed": "an OpenTelemetry span attribute (docs/guide/observability.md)",
    "loopwright.tool.not_run": "an OpenTelemetry span event's name (docs/guide/observability.md)",
}
"""Dotted names in the docs that are not import paths, each with where it comes from."""

_DOTTED = re.compile(r"(?<![\w.])loopwright(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"^\s*from (loopwright(?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+)$)", flags=re.M)
_DIRECTIVE = re.compile(r"^::: (loopwright(?:\.\w+)*)\s*$", flags=re.M)


def documented_paths() -> dict[str, list[str]]:
    """Each dotted path the pages name (``loopwright.x.y``, ``from loopwright.x import y``, an API
    reference's ``::: loopwright.x``) and the pages that name it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        text, name = page.read_text(), page.relative_to(ROOT).as_posix()
        paths = set(_DOTTED.findall(text)) | set(_DIRECTIVE.findall(text))
        for module, wrapped, names in _FROM_IMPORT.findall(text):
            paths |= {f"{module}.{n.split(' as ')[0].strip()}" for n in (wrapped or names).split(",") if n.strip()}
        for path in paths - set(NOT_PATHS):
            found.setdefault(path, []).append(name)
    return found


PATHS = documented_paths()


def resolve(path: str) -> object:
    """Import the longest module prefix of ``path``, then take the rest as attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name is None or not ".".join(parts[:cut]).startswith(error.name):
                raise  # a module that exists but imports something missing: a real failure
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ModuleNotFoundError(path)


def test_the_docs_name_the_paths_users_import() -> None:
    """The scan finds what the pages show (a regex that silently matched nothing would pass all)."""
    for expected in ("loopwright.Agent", "loopwright.stores.SQLiteStore", "loopwright.testing.model_behaviours"):
        assert expected in PATHS, expected
    assert len(PATHS) > 40


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_documented_path_imports(path: str) -> None:
    try:
        value = resolve(path)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{path} (named in {', '.join(PATHS[path])}) no longer imports: {error}")
    assert value is not None


def entry_points() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    targets = list(project.get("scripts", {}).values())
    targets += [t for group in project.get("entry-points", {}).values() for t in group.values()]
    return targets


@pytest.mark.parametrize("target", entry_points())
def test_an_entry_point_imports(target: str) -> None:
    module, _, attr = target.partition(":")
    value = resolve(module + (f".{attr}" if attr else ""))
    assert value is not None and (not attr or callable(value))


def test_the_version_is_the_installed_distributions() -> None:
    import loopwright

    assert loopwright.__version__ == importlib.metadata.version("loopwright")
    assert re.search(
        rf"^## \[{re.escape(loopwright.__version__)}\] - \d{{4}}-\d\d-\d\d$", (ROOT / "CHANGELOG.md").read_text(), re.M
    ), "CHANGELOG.md has no release heading for the package's version"
    assert "__version__" not in loopwright.__all__  # a dunder, not a public name of the API


@pytest.mark.slow
def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, anchor, snippet or API reference fails."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (it comes with [dev])")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "index.html").read_text().count("doc-heading") > 50
