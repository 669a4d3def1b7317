"""The big modules split into modules of one job keep their public names, paths and ``__module__``s."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path

import pytest

from loopwright.runtime.tools import ToolValueError
from loopwright.table.machine import Row
from loopwright.table.rules import Violation

ENGINE = Path(__file__).resolve().parent.parent / "engine"

MOVED_CLASSES = {
    "loopwright.runtime.tools": ("ToolValueError", "RunView", "ToolContext"),
    "loopwright.table.machine": ("Row",),
    "loopwright.table.rules": ("Table", "Violation"),
    "loopwright.integrations.otel": ("RunTrace",),
}
"""Classes now defined beside the module users import them from, which stays their ``__module__``
(so pickles, reprs and messages name the path they always named)."""

SPLIT = {
    "runtime/tools.py": ("tool_values", "tool_context", "tool_threads"),
    "table/machine.py": ("rows", "chooser", "table_edits"),
    "table/rules.py": ("table_spec",),
    "integrations/otel.py": ("otel_spans", "otel_genai", "otel_redact"),
    "stores/sqlite.py": ("sqlite_schema", "sqlite_wal", "sqlite_rows"),
    "cli/trace_page.py": ("trace_page_assets",),
}


@pytest.mark.parametrize("module", sorted(MOVED_CLASSES))
def test_a_moved_class_keeps_the_module_users_import_it_from(module: str) -> None:
    found = importlib.import_module(module)
    for name in MOVED_CLASSES[module]:
        assert getattr(found, name).__module__ == module, f"{module}.{name}"


def test_moved_values_pickle_by_their_old_paths() -> None:
    for value in (ToolValueError("returned a generator"), Row("decide", "done"), Violation(1, "k", "m")):
        data = pickle.dumps(value)
        assert type(value).__module__.encode() in data
        again = pickle.loads(data)
        assert type(again) is type(value) and str(again) == str(value)


@pytest.mark.parametrize("path", sorted(SPLIT))
def test_each_split_module_and_its_parts_stay_under_450_lines(path: str) -> None:
    folder = (ENGINE / path).parent
    for file in (ENGINE / path, *(folder / f"{part}.py" for part in SPLIT[path])):
        lines = len(file.read_text().splitlines())
        assert lines <= 450, f"{file.relative_to(ENGINE)} has {lines} lines: split it along its seams"
