"""README, docs and examples import only public modules (``PUBLIC`` in ``loopwright.data.exports``),
and reach only names those modules export: the floors may move without notice, so nothing a user
copies may name them."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from loopwright.data.exports import PUBLIC
from tests import ROOT

SOURCES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.py")],
    key=lambda p: p.as_posix(),
)
MODULE = r"loopwright(?:\.[A-Za-z_][\w]*)*"
IMPORTS = [
    re.compile(rf"^\s*from ({MODULE}) import (?!\w+(?:, \w+)*\s*$)", re.M),
    re.compile(rf"^\s*from ({MODULE}) import (\w+(?:, \w+)*)\s*$", re.M),
    re.compile(rf"^\s*import ({MODULE})", re.M),
]
API_PAGES = re.compile(rf"^:::\s*({MODULE})", re.M)
"""mkdocstrings' directives: a public module, or a name one exports."""


def private_imports(text: str) -> list[str]:
    """``line N: module`` for each private module ``text`` imports or documents."""
    found = []
    for pattern in (*IMPORTS, API_PAGES):
        for match in pattern.finditer(text):
            line, module = text[: match.start()].count("\n") + 1, match.group(1)
            names = match.group(2).split(", ") if match.re.groups == 2 else []
            submodules = [f"{module}.{n}" for n in names if _is_module(f"{module}.{n}")]
            if submodules:  # from loopwright.integrations import dbos: modules by name
                found += [f"line {line}: {m}" for m in submodules if m not in PUBLIC]
                if len(submodules) == len(names):
                    continue
            if module not in PUBLIC and not (pattern is API_PAGES and _public_member(module)):
                found.append(f"line {line}: {module}")
    return found


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def _public_member(dotted: str) -> bool:
    """``:::`` pages may name a public module's member (``loopwright.eval.EvalSet``)."""
    module, _, name = dotted.rpartition(".")
    return module in PUBLIC and name in importlib.import_module(module).__all__


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_public_modules_are_imported(path: Path) -> None:
    wrong = private_imports(path.read_text(encoding="utf-8"))
    assert not wrong, f"{path.relative_to(ROOT)} imports private modules (use {', '.join(PUBLIC)}): {wrong}"


def test_the_check_sees_a_private_import() -> None:
    text = "```python\nfrom loopwright.runtime.tool_context import ToolContext\nimport loopwright.serve\n```\n"
    assert private_imports(text) == ["line 2: loopwright.runtime.tool_context"]
    assert private_imports("::: loopwright.table.machine\n::: loopwright.eval\n") == [
        "line 1: loopwright.table.machine"
    ]
    assert private_imports("from loopwright.integrations import dbos\nfrom loopwright import runtime, Agent\n") == [
        "line 2: loopwright.runtime"
    ]
