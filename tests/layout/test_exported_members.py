"""Each public module's ``__all__`` is its one list of names (httpx's ``test_exported_members``): every
public name it has is listed, every listed name resolves, and each reports a public home."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from loopwright.data.exports import PUBLIC
from tests import ROOT

ALLOWED_HELPERS = {"annotations", "TYPE_CHECKING"}
"""Names a public ``__init__`` may hold beside its exports (``from __future__``, typing's flag)."""


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_the_one_list_of_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    present = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and n not in ALLOWED_HELPERS
        and not isinstance(v, types.ModuleType)
        and getattr(v, "__module__", None) != "typing"  # Any, for the lazy __getattr__'s annotation
    }
    unlisted = sorted(present - set(exported))
    assert not unlisted, f"{name} has public names missing from __all__ (list them or prefix _): {unlisted}"
    for export in exported:
        getattr(module, export)  # resolves (lazily imported names too)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_exported_class_and_function_reports_a_public_home(name: str) -> None:
    module = importlib.import_module(name)
    wrong = {}
    for export in module.__all__:
        value = getattr(module, export)
        home = getattr(value, "__module__", "")
        if isinstance(value, type | types.FunctionType) and home.startswith("loopwright") and home not in PUBLIC:
            wrong[export] = home
    assert not wrong, f"{name}: these report a private module as their home: {wrong}"


def test_the_homes_do_not_depend_on_import_order() -> None:
    """A name exported by two public modules has one home, whichever is imported first."""
    code = (
        "import loopwright.extend as e, loopwright as lw\n"
        "print(e.RunContext.__module__, lw.AnthropicModel.__module__, e.Row.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["loopwright", "loopwright.models.anthropic", "loopwright.extend"]


def test_public_is_the_list_the_docs_and_the_packages_use() -> None:
    for name in PUBLIC:
        assert importlib.util.find_spec(name) is not None, name
    floors = {"data", "table", "runtime", "loop", "durable", "machines", "cli"}
    assert not {n for n in PUBLIC if n.split(".")[1:2] and n.split(".")[1] in floors}
