"""The line between loopwright's public skin and its private floors.

:data:`PUBLIC` lists every module a user imports; everything else (the floors ``data``, ``table``,
``runtime``, ``loop``, ``durable``, ``machines``, ``cli`` and the modules inside the public
packages) is private and may move without notice. Each public package declares its names once,
with :func:`lazy_exports`: a name is imported from its private home on first use (PEP 562), so
``import loopwright`` costs almost nothing, and it then reports its public home as ``__module__``
(as httpx does in its ``__init__``), which is where docs, reprs and pickles find it.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["PUBLIC", "claim", "claim_own", "lazy_exports"]

PUBLIC = (
    "loopwright",
    "loopwright.extend",
    "loopwright.models",
    "loopwright.models.anthropic",
    "loopwright.models.openai",
    "loopwright.models.gemini",
    "loopwright.stores",
    "loopwright.workflows",
    "loopwright.features",
    "loopwright.eval",
    "loopwright.testing",
    "loopwright.serve",
    "loopwright.demo",
    "loopwright.integrations.mcp",
    "loopwright.integrations.dbos",
    "loopwright.integrations.temporal",
    "loopwright.integrations.otel",
    "loopwright.integrations.a2a",
)
"""Every public module. README, docs and examples import only these (a test checks it)."""


def claim(value: object, package: str) -> None:
    """Make ``value`` (a class or function defined in a private module) report ``package`` as its
    ``__module__``. A value already claimed by a public module keeps its home."""
    module = getattr(value, "__module__", None)
    if not isinstance(module, str) or not module.startswith("loopwright") or module in PUBLIC:
        return
    if isinstance(value, type | types.FunctionType):
        value.__module__ = package


def claim_own(package: str) -> None:
    """For a public package that imports its names eagerly: each name of its ``__all__`` defined in
    one of its own (private) modules reports ``package`` as its home."""
    namespace = vars(sys.modules[package])
    for name in namespace["__all__"]:
        value = namespace.get(name)  # a lazy name claims itself when loaded
        if str(getattr(value, "__module__", "")).startswith(package + "."):
            claim(value, package)


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for public package ``package``, whose names are imported on
    first use from ``exports`` (name -> the module defining it, absolute or relative to
    ``package``), claimed for ``package`` and cached in its namespace."""

    def __getattr__(name: str) -> Any:
        home = exports.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        claim(value, package)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
