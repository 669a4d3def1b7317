"""``mypy --strict`` (this environment's) on users' snippets, for the typing tests
(tests/user_path/test_user_typing.py, tests/user_path/test_deps_typing.py): one run over them all, its output lines by
snippet. The package is laid out as installed (``loopwright`` from engine/, ``loopwright.states``
from states/), as ``.ci/typecheck`` does: mypy cannot follow the editable install's import hook."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mypy_on(snippets: Mapping[str, str], base: Path) -> dict[str, list[str]]:
    """What ``mypy --strict`` says of each snippet (``name -> source``), written under ``base``."""
    package = base / "tree" / "loopwright"
    package.mkdir(parents=True)
    for entry in (ROOT / "engine").iterdir():
        (package / entry.name).symlink_to(entry)
    (package / "states").symlink_to(ROOT / "states")
    for name, text in snippets.items():
        (base / f"{name}.py").write_text(text.lstrip())
    env = {**os.environ, "MYPYPATH": str(base / "tree")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version", "3.11",
         *(f"{name}.py" for name in snippets)],
        cwd=base, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "error: Cannot find implementation or library stub" not in done.stdout, done.stdout
    said: dict[str, list[str]] = {name: [] for name in snippets}
    for line in done.stdout.splitlines():
        found = re.match(r"(\w+)\.py:\d+: (.*)", line)
        if found:
            said[found.group(1)].append(found.group(2))
    return said
